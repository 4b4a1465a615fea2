"""The plain-nest form of a program: what rewrite-then-tune hands MetaSchedule.

Our search makes two kinds of steps. Algebraic and cross-statement rewrites (online softmax,
prefix forms, fusion, CSE, layouts) are what MetaSchedule cannot do; loop schedules (splits,
tiles, parallel/vector/unroll annotations) are what it does itself, better, as one coordinated
decision. ``plain_program`` keeps the first kind and undoes the second: every loop serial
(``L``) and every pair of loops that a split or a tile made out of one loop fused back into
that loop (at the outer loop's place; the order of the other loops stays as it is, so
reorders stay). A pair ``o`` (extent n), ``i`` (extent m) of one nest fuses back when every
maximal integer-linear expression that mentions them is ``k*(o*m + i) + rest``; the fused
loop takes ``i``'s name and extent n*m, and such expressions become ``k*i + rest``.
"""
from __future__ import annotations

from dataclasses import replace

from engine.leir.ast import BinOp, Equation, Loop, Nest, Num, Unary, Var, children, with_children


def plain_program(program):
    """``program`` with serial loops and its split/tiled loops fused back (see module doc)."""
    return program.with_body(tuple(_plain_item(it) for it in program.body))


def _plain_item(item):
    if not isinstance(item, Nest):
        return item
    nest = Nest(tuple(replace(l, kind="L") for l in item.loops), tuple(_plain_item(b) for b in item.body))
    while True:
        fused = _fuse_one_pair(nest)
        if fused is None:
            return nest
        nest = fused


def _fuse_one_pair(nest: Nest):
    """The nest with its first fusible (outer, inner) loop pair fused, or None."""
    loops = nest.loops
    for p, outer in enumerate(loops):
        for q in range(p + 1, len(loops)):
            inner = loops[q]
            body = _fuse_body(nest.body, outer.var, inner.var, inner.extent)
            if body is not None:
                new_loops = list(loops)
                new_loops[p] = Loop("L", inner.var, outer.extent * inner.extent)
                del new_loops[q]
                return Nest(tuple(new_loops), body)
    return None


def _fuse_body(body, o: str, i: str, m: int):
    """``body`` with ``k*(o*m+i)`` rewritten to ``k*i``; None when o or i is used otherwise
    (or o is not used at all: then the loops are not a split of one loop)."""
    used = [False]

    def fix(e):
        lin = _linear(e)
        if lin is not None:
            co, ci = lin.get(o, 0), lin.get(i, 0)
            if co == 0 and ci == 0:
                return e
            if co != m * ci or ci == 0:
                raise _NotSplit
            used[0] = True
            return _build({v: c for v, c in lin.items() if v != o})
        kids = children(e)
        return with_children(e, tuple(fix(k) for k in kids)) if kids else e

    def item(it):
        if isinstance(it, Nest):
            if any(l.var in (o, i) for l in it.loops):
                raise _NotSplit
            return Nest(it.loops, tuple(item(b) for b in it.body))
        return Equation(fix(it.lhs), fix(it.rhs), it.init)
    try:
        new = tuple(item(b) for b in body)
    except _NotSplit:
        return None
    return new if used[0] else None


class _NotSplit(Exception):
    pass


def _linear(e):
    """``{var: coefficient, None: constant}`` when ``e`` is an integer-linear expression of loop
    variables, else None."""
    if isinstance(e, Num):
        return {None: e.value} if e.is_int else None
    if isinstance(e, Var):
        return {e.name: 1}
    if isinstance(e, Unary) and e.op == "-":
        a = _linear(e.operand)
        return None if a is None else {k: -v for k, v in a.items()}
    if isinstance(e, BinOp) and e.op in "+-*":
        a, b = _linear(e.lhs), _linear(e.rhs)
        if a is None or b is None:
            return None
        if e.op == "*":
            if set(a) <= {None}:
                a, b = b, a
            if not set(b) <= {None}:
                return None
            k = b.get(None, 0)
            return {v: c * k for v, c in a.items()}
        sign = 1 if e.op == "+" else -1
        out = dict(a)
        for v, c in b.items():
            out[v] = out.get(v, 0) + sign * c
        return out
    return None


def _build(lin: dict):
    """An expression for a linear form (variables in their first-seen order, constant last)."""
    terms = [(v, c) for v, c in lin.items() if v is not None and c != 0]
    const = lin.get(None, 0)
    expr = None
    for v, c in terms:
        t = Var(v) if abs(c) == 1 else BinOp("*", Var(v), Num(str(abs(c))))
        expr = (Unary("-", t) if c < 0 else t) if expr is None else BinOp("+" if c > 0 else "-", expr, t)
    if expr is None:
        return Num(str(const)) if const >= 0 else Unary("-", Num(str(-const)))
    if const:
        expr = BinOp("+" if const > 0 else "-", expr, Num(str(abs(const))))
    return expr


__all__ = ["parallel_scans", "plain_program"]


def parallel_scans(program):
    """``program`` with the leading loops of each *scan* nest (one that reads an element of a
    tensor it writes at another index: a prefix max or running sum) that its iterations do not
    share made parallel (``P``). MetaSchedule cannot parallelise above a scan block (it is
    neither complete nor a reduction), so the tuning TIR brings this parallelism itself."""
    return program.with_body(tuple(_parallel_scan(it) if isinstance(it, Nest) and _is_scan(it) else it
                                   for it in program.body))


def _refs(items):
    from engine.leir.ast import Ref, equations, walk
    for _, eq in equations(items):
        yield eq.lhs, True
        for e in walk(eq.rhs):
            if isinstance(e, Ref):
                yield e, False


def _is_scan(nest: Nest) -> bool:
    refs = list(_refs((nest,)))
    written = {r.name: r.index for r, w in refs if w}
    return any(not w and r.name in written and r.index != written[r.name] for r, w in refs)


def _parallel_scan(nest: Nest) -> Nest:
    refs = list(_refs((nest,)))
    written = {r.name for r, w in refs if w}
    mine = [r for r, _ in refs if r.name in written]
    loops = list(nest.loops)
    for k, loop in enumerate(loops):
        # every access to a written tensor has this loop's variable alone at one same position
        pos = {next((j for j, e in enumerate(r.index) if isinstance(e, Var) and e.name == loop.var), None)
               for r in mine}
        if len(pos) != 1 or None in pos:
            break
        loops[k] = replace(loop, kind="P")
    return Nest(tuple(loops), nest.body)
