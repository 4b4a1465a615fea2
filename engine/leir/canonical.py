"""Programs modulo renaming: two programs that differ only by a consistent renaming of their
intermediate tensors and loop variables compute the same thing, build to the same code and
run equally fast. ``renaming_key`` names that class, so builds, measurements and visited
search states are shared across it.
"""
from __future__ import annotations

import hashlib
from dataclasses import replace

from engine.leir.ast import Equation, Nest, Ref, Var, transform
from engine.leir.printer import body_to_str

_HW_PREFIXES = ("tx", "ty", "tz", "bx", "by", "bz")


def canonical_body(program) -> tuple:
    """The body with intermediates renamed ``I0, I1, ...`` in order of first occurrence and each
    loop variable renamed after its binding loop (a hardware-bound loop keeps its ``tx``/``bx``
    ... prefix, which carries meaning); known tensors keep their names."""
    known = {d.name for d in program.known}
    tensors: dict[str, str] = {}
    counter = [0]

    def tensor(name: str) -> str:
        if name in known:
            return name
        if name not in tensors:
            tensors[name] = f"I{len(tensors)}"
        return tensors[name]

    def expr(e, env: dict):
        def fn(n):
            if isinstance(n, Var):
                return replace(n, name=env.get(n.name, n.name))
            if isinstance(n, Ref):
                return replace(n, name=tensor(n.name))
            return n
        return transform(e, fn)

    def item(it, env: dict):
        if isinstance(it, Equation):
            lhs = expr(it.lhs, env)
            return replace(it, lhs=lhs, rhs=expr(it.rhs, env))
        env = dict(env)
        loops = []
        for l in it.loops:
            prefix = l.var[:2] if l.kind == "B" and l.var[:2] in _HW_PREFIXES else ""
            name = f"{prefix}v{counter[0]}"
            counter[0] += 1
            env[l.var] = name
            loops.append(replace(l, var=name))
        return Nest(tuple(loops), tuple(item(b, env) for b in it.body))

    return tuple(item(n, {}) for n in program.body)


def renaming_key(program) -> str:
    """A short stable hash of the program modulo renaming of intermediates and loop variables
    (known tensors, their dtypes and shapes included)."""
    decls = ";".join(f"{d.name}:{d.dtype}{list(d.shape)}" for d in program.inputs) + "|" + \
        ";".join(f"{d.name}:{d.dtype}{list(d.shape)}" for d in program.outputs)
    text = decls + "|" + body_to_str(canonical_body(program))
    return hashlib.sha256(text.encode()).hexdigest()[:24]
