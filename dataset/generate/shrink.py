"""Smaller instances of a program, for verifying its rewrites on a CPU in reasonable time.

The corpus holds programs at their workloads' real sizes (up to 10^9 iteration points); a
rewrite of such a program is verified by building and running both on seeded inputs, which is
impractical at that size. ``shrink_program`` maps every size of a program (loop extents,
declared dimensions, integer literals) by one substitution that keeps the relations between
sizes, and keeps the result only when the semantic analysis accepts it.
"""
from __future__ import annotations

import math
from dataclasses import replace

from engine.leir.ast import Equation, Num, equations, transform
from engine.leir.diagnostics import LeirError
from engine.leir.program import make_program

POINT_LIMIT = 1 << 14   # iteration points of a shrunk program, all equations together (default)
KEEP = 16               # sizes up to this stay as they are (batch, kernel, stride sizes)
GRANULARITIES = (2, 4, 8, 16, 32, 64, 128, 256)
WIDE_GRANULARITIES = GRANULARITIES + (512, 1024, 2048, 4096)   # for programs far above the limit


def points(p) -> int:
    """Iteration points of all equations of ``p`` together."""
    return sum(math.prod(l.extent for l in loops) for loops, _ in equations(p.body))


def size_map(g: int):
    """The size substitution with granularity ``g``: v -> v for v <= KEEP, else
    round(v/g) + (v - g*round(v/g)).

    Sizes of one program are related by scaling (``c*2+f`` over an extent of 2n, flattened
    ``a*n+c``) and by small offsets (padding ``n+2``, valid convolutions ``n-2``,
    ``3999-a``); writing a size as anchor + offset and dividing only the anchor keeps
    both kinds of relation whenever the offsets are small against ``g``.
    """
    def phi(v: int) -> int:
        if v <= KEEP:
            return v
        anchor = g * round(v / g)
        return anchor // g + (v - anchor)
    return phi


def _mapped(p, phi):
    """``p`` with every loop extent, declared dimension and integer literal mapped by ``phi``
    (literals too: guards like ``2<=c<258`` and flattening strides follow the extents);
    re-analysed, so an inconsistent result raises ``LeirError``."""
    def expr(e):
        return transform(e, lambda n: Num(str(phi(int(n.text)))) if isinstance(n, Num) and n.is_int else n)

    def item(it):
        if isinstance(it, Equation):
            return replace(it, lhs=expr(it.lhs), rhs=expr(it.rhs), init=None)
        return replace(it, loops=tuple(replace(l, extent=phi(l.extent)) for l in it.loops),
                       body=tuple(item(x) for x in it.body))

    def decls(ds):
        return tuple(replace(d, shape=tuple(phi(n) for n in d.shape)) for d in ds)
    return make_program(p.name, decls(p.inputs), decls(p.outputs), tuple(item(n) for n in p.body))


def _sizes(p) -> list[int]:
    return [l.extent for loops, _ in equations(p.body) for l in loops] + [n for d in p.known for n in d.shape]


def shrink_program(p, limit: int = POINT_LIMIT, granularities=GRANULARITIES):
    """A valid copy of ``p`` with at most ``limit`` iteration points, or None.

    ``p`` itself when it is small enough; otherwise the first granularity ``g`` (finest
    first, so the copy keeps as much structure as the limit allows: no needless extent-1
    loops) whose ``size_map`` gives a program that passes the semantic analysis (shapes,
    in-bounds reads and writes, guards included) with at most ``limit`` points.
    """
    return shrink_with_granularity(p, limit, granularities)[0]


def _instances(p, granularities):
    """(mapped copy, granularity) for each granularity, in order, that maps every size to at least
    1 and gives a program the analysis accepts."""
    for g in granularities:
        phi = size_map(g)
        if any(phi(v) < 1 for v in _sizes(p)):
            continue
        try:
            q = _mapped(p, phi)
        except LeirError:
            continue
        yield q, g


def shrink_with_granularity(p, limit: int = POINT_LIMIT, granularities=GRANULARITIES):
    """(the shrunk program or None, the granularity used: 1 when ``p`` is kept as it is)."""
    if points(p) <= limit:
        return p, 1
    for q, g in _instances(p, granularities):
        if points(q) <= limit:
            return q, g
    return None, None


def smallest_instance(p, granularities=WIDE_GRANULARITIES):
    """(the valid mapped copy of ``p`` with the fewest iteration points, its granularity), or
    (None, None) when no granularity gives a program the analysis accepts; for programs whose
    kept sizes (kernels, offsets) keep them above any small limit."""
    best = (None, None)
    for q, g in _instances(p, granularities):
        if best[0] is None or points(q) < points(best[0]):
            best = (q, g)
    return best
