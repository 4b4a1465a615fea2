"""Generated TVMScript cut into its header and top-level statements, and headers rebuilt for a
subset of the buffers: the pieces the incremental checker (tests/test_neighbours_lower.py) and the
build sweep (tests/build_sweep.py) build statement by statement."""
from __future__ import annotations

import re

INDENT = "    "  # lowering.tir's indentation unit


def split_tvmscript(text: str) -> tuple[str, list[str]] | None:
    """Generated TVMScript as (header, top-level statements): the header is the decorator,
    signature, attributes and function-level allocations; each statement is one ``for`` or
    ``with`` at function-body indentation with the lines under it. None for another shape."""
    lines = text.splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith((INDENT + "for ", INDENT + "with "))]
    if not starts:
        return None
    top = [i for i, l in enumerate(lines) if l.startswith(INDENT) and not l.startswith(INDENT + " ")]
    if [i for i in top if i >= starts[0]] != starts:
        return None
    bounds = starts + [len(lines)]
    chunks = ["\n".join(lines[a:b]) for a, b in zip(bounds, bounds[1:])]
    return "\n".join(lines[:starts[0]]), chunks


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*: T\.Buffer\(\([0-9, ]*\), \"[a-z0-9]+\"\)")
_DECORATOR, _ATTR = "@T.prim_func(s_tir=True)", INDENT + 'T.func_attr({"tir.noalias": True})'


def declarations(header: str) -> tuple[dict[str, str], dict[str, str]] | None:
    """The buffers a TVMScript header declares, as ({name: parameter text}, {name: allocation
    line}) in header order; None if the header has any other line or a parameter this does not
    recognise."""
    params, allocs = {}, {}
    for line in header.splitlines():
        if line.startswith("def main("):
            found = _PARAM.findall(line)
            if len(found) != line.count(": ") or line != "def main(" + ", ".join(found) + "):":
                return None
            params.update((d.partition(":")[0], d) for d in found)
        elif line.startswith(INDENT) and " = T.alloc_buffer(" in line:
            allocs[line.strip().partition(" = ")[0]] = line
        elif line not in (_DECORATOR, _ATTR):
            return None
    return params, allocs


def header_for(params: dict, allocs: dict, names: set) -> str:
    """A header declaring only the buffers in ``names``, exactly as the full header does."""
    sig = ", ".join(d for n, d in params.items() if n in names)
    return "\n".join([_DECORATOR, f"def main({sig}):", _ATTR] + [l for n, l in allocs.items() if n in names])
