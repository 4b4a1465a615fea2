"""Is the map from an equation's spatial loop variables to the element it writes one-to-one?

The lowering needs this for a reduction whose LHS index is composite (``D_{f*4+tx}`` after a
loop split): ``T.init`` runs once per spatial iteration (when every reduction variable is 0),
which is LEIR's "initialise each element before its first update" exactly when no two
spatial iterations write the same element.

Decided in two exact ways, never by guessing:

* symbolically: an entry ``c1*x1 + ... + cn*xn + k`` (after substituting variables already
  determined by other entries) determines its variables when, sorted by ``|c|``, each
  ``|c|`` exceeds the largest span the smaller terms reach (mixed radix: ``f*4+tx`` with
  ``tx < 4``); repeated until nothing changes. Extent-1 variables are always determined;
* by enumeration, when that fails and the spatial space has at most ``BRUTE_FORCE_LIMIT``
  points: evaluate every entry on the whole grid (floor ``//`` and ``%`` as in LEIR) and
  count distinct index tuples.

An index that reads a tensor (a data-dependent scatter) is never called injective.
"""
from __future__ import annotations

import math

import numpy as np

from engine.leir.ast import BinOp, Call, Num, Ref, Unary, Var, walk
from engine.leir.affine import affine, mixed_radix

BRUTE_FORCE_LIMIT = 1 << 18


def index_vars(index) -> list[str]:
    """Loop variables of an index tuple, in first-occurrence order."""
    out: dict[str, None] = {}
    for e in index:
        for n in walk(e):
            if isinstance(n, Var):
                out.setdefault(n.name, None)
    return list(out)


def _symbolic(index, extents: dict[str, int]) -> bool:
    known = {v for v, n in extents.items() if n == 1}
    changed = True
    while changed and len(known) < len(extents):
        changed = False
        for e in index:
            a = affine(e, extents)
            if a is None:
                continue
            terms = [(v, c) for v, c in a.items() if v != 1 and c != 0 and v not in known]
            if terms and mixed_radix(((c, v) for v, c in terms), extents):
                known |= {v for v, _ in terms}
                changed = True
    return len(known) == len(extents)


def _evaluate(e, grid: dict[str, np.ndarray]):
    """Integer value of ``e`` on the grid, or None for anything but integer arithmetic."""
    if isinstance(e, Num):
        return int(e.text) if e.is_int else None
    if isinstance(e, Var):
        return grid.get(e.name)
    if isinstance(e, Unary) and e.op == "-":
        a = _evaluate(e.operand, grid)
        return None if a is None else -a
    if isinstance(e, BinOp) and e.op in ("+", "-", "*", "//", "%"):
        a, b = _evaluate(e.lhs, grid), _evaluate(e.rhs, grid)
        if a is None or b is None:
            return None
        if e.op in ("//", "%") and np.any(np.asarray(b) == 0):
            return None
        return {"+": np.add, "-": np.subtract, "*": np.multiply,
                "//": np.floor_divide, "%": np.mod}[e.op](a, b)
    if isinstance(e, Call) and e.func in ("max", "min", "abs"):
        args = [_evaluate(x, grid) for x in e.args]
        if any(x is None for x in args):
            return None
        if e.func == "abs":
            return np.abs(args[0])
        return (np.maximum if e.func == "max" else np.minimum)(*args)
    return None


def _enumerated(index, extents: dict[str, int]) -> bool | None:
    names = list(extents)
    points = math.prod(extents.values())
    if points > BRUTE_FORCE_LIMIT:
        return None
    axes = np.meshgrid(*[np.arange(extents[v], dtype=np.int64) for v in names], indexing="ij")
    grid = {v: a.reshape(-1) for v, a in zip(names, axes)}
    cols = []
    for e in index:
        val = _evaluate(e, grid)
        if val is None:
            return None
        cols.append(np.broadcast_to(np.asarray(val, dtype=np.int64), (points,)))
    if not cols:
        return points <= 1
    return len(np.unique(np.stack(cols, axis=1), axis=0)) == points


def is_injective(index, extents: dict[str, int]) -> bool:
    """True when distinct points of the loop variables in ``index`` (with ``extents``) always
    give distinct index tuples. ``extents`` must cover every variable of ``index``; extra
    entries are ignored."""
    if any(isinstance(n, Ref) for e in index for n in walk(e)):
        return False
    ext = {v: extents[v] for v in index_vars(index)}
    if _symbolic(index, ext):
        return True
    return bool(_enumerated(index, ext))
