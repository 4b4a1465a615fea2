"""What a step changes, in few tokens: the text of a menu entry.

A menu shows dozens of steps of the same program; repeating whole statements (every tensor
with its ``^{f32,g}`` annotation) made the softmax menu 7,293 tokens. ``compact_change``
diffs the program before and after the step over statements, then over LEIR tokens (a loop
header, a tensor reference with its indices, an identifier, a number, a character) and shows,
for each changed region, the new text from the first to the last changed token with a few
tokens of context (``…`` for the rest; ``- old`` when the step only deletes). Tensors in global memory are written without their
annotation (``A_{tx,a}`` for ``A^{f32,g}_{tx,a}``); any other scope keeps it, so a change of
scope stays visible. When the hunks would be longer than the changed statements themselves,
those statements are shown instead. Pure and deterministic: the same programs give the same
text (the dataset's menu rows rely on it).
"""
from __future__ import annotations

import difflib
import re

_TOKEN = re.compile(r"[A-Za-z_]\w*(?:\^\{[^{}]*\})?_\{[^{}]*\}|[A-Za-z_]\w*\^\{[^{}]*\}"  # loop header, tensor
                    r"|[A-Za-z_]\w*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\S")
_GLOBAL = re.compile(r"([A-Za-z_]\w*)\^\{[^{},]*,g\}")


def compact_leir(text: str) -> str:
    """LEIR with the ``^{dtype,g}`` annotations of global tensors left out."""
    return _GLOBAL.sub(r"\1", text)


def _tokens(text: str) -> list[str]:
    return [compact_leir(t) for t in _TOKEN.findall(text)]


def statements(program) -> list[str]:
    from engine.leir.printer import item_to_str
    return [item_to_str(n) for n in program.body]


def changed_statements(before, after) -> list[str]:
    """The top-level statements of ``after`` that are not in ``before``."""
    a, b = statements(before), statements(after)
    out = []
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            out.extend(b[j1:j2])
    if not out and len(b) < len(a):
        out.append("(removes statement(s))")
    return out


CONTEXT = 3          # unchanged tokens kept on each side of a change


def _span(old: list[str], new: list[str]) -> str:
    """The new text between the common prefix and suffix of ``old`` and ``new`` (plus a few
    tokens of context, ``…`` for what is left out); ``- old`` when the step only deletes."""
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    s = 0
    while s < min(len(old), len(new)) - p and old[-1 - s] == new[-1 - s]:
        s += 1
    side, toks = ("", new) if len(new) > p + s else ("- ", old)
    start, end = max(0, p - CONTEXT), len(toks) - max(0, s - CONTEXT)
    return side + ("…" if start > 0 else "") + "".join(toks[start:end]) + ("…" if end < len(toks) else "")


def compact_change(before, after) -> str:
    """Per changed region of statements, the changed span of its new text (``; ``-separated),
    or the changed statements in compact notation when those are shorter."""
    a, b = statements(before), statements(after)
    spans: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            spans.append(_span(_tokens("".join(a[i1:i2])), _tokens("".join(b[j1:j2]))))
    diff = "; ".join(spans)
    whole = " ".join(compact_leir(s) for s in changed_statements(before, after))
    if not diff:
        return "(statements reordered)"
    return whole if whole and len(whole) < len(diff) else diff


def full_change(before, after) -> str:
    """The changed statements as LEIR (``--menu-detail full``)."""
    return " ".join(changed_statements(before, after)) or "(statements reordered)"
