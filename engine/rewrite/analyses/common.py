"""Helpers every analysis family shares: reduction forms, variables of expressions and indices,
divisors and cut points of extents, in-bounds tests.
"""
from __future__ import annotations

from engine.leir.affine import radix_vars
from engine.leir.ast import BinOp, Call, Equation, Nest, Ref, Unary, Var, refs, walk
from engine.leir.intervals import NotAffine, interval


REDUCE_OPS = ("+", "-", "*")
EXACT_REDUCE = ("max", "min")


def divisors(n: int) -> list[int]:
    """Every f with 1 < f < n and f | n, ascending (trial division up to sqrt(n))."""
    small, large = [], []
    f = 2
    while f * f <= n:
        if n % f == 0:
            small.append(f)
            if f * f != n:
                large.append(n // f)
        f += 1
    return small + large[::-1]


def cuts(n: int) -> list[int]:
    """Cut points for splitting a reduction range of extent n: the divisors, and n // 2."""
    out = set(divisors(n))
    if n >= 2:
        out.add(n // 2)
    return sorted(out)


# ------------------------------------------------------------------ expressions and indices


def owned_vars(index, extents) -> set[str]:
    """Loop vars that the index tuple determines injectively (``engine.affine.radix_vars``)."""
    out: set[str] = set()
    for entry in index:
        out |= radix_vars(entry, extents)
    return out


def value_vars(e, in_index: bool = False) -> set[str]:
    """Loop variables used as values (outside every tensor index)."""
    if isinstance(e, Var):
        return set() if in_index else {e.name}
    if isinstance(e, Ref):
        out: set[str] = set()
        for i in e.index:
            out |= value_vars(i, True)
        return out
    out = set()
    for c in (e.operand,) if isinstance(e, Unary) else (e.lhs, e.rhs) if isinstance(e, BinOp) else \
            getattr(e, "operands", None) or getattr(e, "args", None) or ():
        out |= value_vars(c, in_index)
    return out


def all_vars(e) -> set[str]:
    return {n.name for n in walk(e) if isinstance(n, Var)}


def reduce_op(eq: Equation) -> str | None:
    """The operator of a pure reduction ``X = X op e`` / ``max(X, e)`` with X not in e."""
    x, r = eq.lhs, eq.rhs
    if isinstance(r, BinOp) and r.op in REDUCE_OPS and r.lhs == x:
        e = r.rhs
        op = r.op
    elif isinstance(r, Call) and r.func in EXACT_REDUCE and r.args[0] == x:
        e = r.args[1]
        op = r.func
    else:
        return None
    if any(ref.name == x.name for ref in refs(e)) or any(ref.name == x.name for i in x.index for ref in refs(i)):
        return None
    return op


def is_update(eq: Equation) -> bool:
    return any(r == eq.lhs for r in refs(eq.rhs))


# ------------------------------------------------------------------ per-nest analyses


def nest_equations(nest: Nest, outer):
    loops = outer + nest.loops
    for it in nest.body:
        if isinstance(it, Equation):
            yield loops, it
        else:
            yield from nest_equations(it, loops)


def nest_loops(nest: Nest):
    for l in nest.loops:
        yield l
    for it in nest.body:
        if isinstance(it, Nest):
            yield from nest_loops(it)


def _clean(eqs) -> dict[str, tuple] | None:
    """Write index per tensor written in the nest when every access to it uses that index.

    None when some written tensor is written at two indices or read at another index
    (a dependence across iterations, e.g. a prefix recurrence reading F_{a-1}).
    """
    windex: dict[str, tuple] = {}
    for _, eq in eqs:
        prev = windex.setdefault(eq.lhs.name, eq.lhs.index)
        if prev != eq.lhs.index:
            return None
    for _, eq in eqs:
        for r in list(refs(eq.rhs)) + [r for i in eq.lhs.index for r in refs(i)]:
            if r.name in windex and r.index != windex[r.name]:
                return None
    return windex


def in_bounds(r: Ref, env: dict, shapes: dict) -> bool:
    """Every index of ``r`` (and of the reads inside its indices) stays inside the shape of the
    tensor it reads, over the loop box ``env``."""
    shape = shapes.get(r.name)
    if shape is None or len(shape) != len(r.index):
        return False
    for entry, n in zip(r.index, shape):
        try:
            iv = interval(entry, env)
        except (NotAffine, KeyError, ZeroDivisionError):
            return False
        if iv is None or iv[0] < 0 or iv[1] >= n:
            return False
        for q in refs(entry):  # a read inside an index is copied too: it must be in bounds
            if q is not entry and not in_bounds(q, env, shapes):
                return False
    return True
