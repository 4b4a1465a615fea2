"""Affine index expressions over loop variables, and when an index is one-to-one.

Several analyses need to know whether distinct loop points reach distinct elements (loop
parallelism and reorder legality, statement fusion, T.init placement in the lowering); they
all decide it here, with the same mixed-radix argument.
"""
from __future__ import annotations

from typing import Iterable

from engine.leir.ast import BinOp, Num, Unary, Var


def affine(e, extents) -> dict | None:
    """``e`` as {var: coef, 1: const} when it is affine in loop variables, else None."""
    if isinstance(e, Num):
        return {1: int(e.text)} if e.is_int else None
    if isinstance(e, Var):
        return {e.name: 1} if e.name in extents else None
    if isinstance(e, Unary) and e.op == "-":
        a = affine(e.operand, extents)
        return None if a is None else {k: -c for k, c in a.items()}
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        a, b = affine(e.lhs, extents), affine(e.rhs, extents)
        if a is None or b is None:
            return None
        s = -1 if e.op == "-" else 1
        out = dict(a)
        for k, c in b.items():
            out[k] = out.get(k, 0) + s * c
        return out
    if isinstance(e, BinOp) and e.op == "*":
        a, b = affine(e.lhs, extents), affine(e.rhs, extents)
        if a is None or b is None:
            return None
        if set(a) <= {1}:
            a, b = b, a
        if not set(b) <= {1}:
            return None
        k = b.get(1, 0)
        return {v: c * k for v, c in a.items()}
    return None


def mixed_radix(terms: Iterable[tuple[int, str]], extents) -> bool:
    """Distinct points of the variables give distinct values of ``sum(c*v)``.

    True when, sorted by ``|c|``, each ``|c|`` exceeds the span the smaller terms reach
    (``f*4+tx`` with ``tx < 4``).
    """
    reach = 0
    for c, v in sorted((abs(c), v) for c, v in terms):
        if c <= reach:
            return False
        reach += c * (extents[v] - 1)
    return True


def radix_vars(entry, extents, among=None) -> set[str]:
    """Variables (of ``among``, default all) that one index entry determines, when it is an
    affine mixed-radix combination of them with positive coefficients; else the empty set.

    Variables outside ``among`` are held fixed (they only shift the value).
    """
    a = affine(entry, extents)
    if a is None:
        return set()
    terms = [(c, v) for v, c in a.items() if v != 1 and c != 0 and (among is None or v in among)]
    if terms and all(c > 0 for c, _ in terms) and mixed_radix(terms, extents):
        return {v for _, v in terms}
    return set()
