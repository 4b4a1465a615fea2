"""Facts for rules/partial.egg (partially_equivalent_then_correct): padded axes and slides.
"""
from __future__ import annotations

from engine.leir.ast import BinOp, Call, Compare, Equation, Nest, Num, Ref, Var, refs, transform
from engine.rewrite.analyses.common import (all_vars, reduce_op)


# ------------------------------------------------------------------ S35: partially_equivalent_then_correct
# Fact for rules/partial.egg (declared in rules/leir/padding.egg).


def _conjuncts(e) -> list:
    if isinstance(e, BinOp) and e.op == "&":
        return _conjuncts(e.lhs) + _conjuncts(e.rhs)
    return [e]


def _int(e) -> int | None:
    return int(e.text) if isinstance(e, Num) and e.is_int else None


def _pad_axes(nest: Nest) -> list[tuple[str, int, int, int]]:
    """(v, p, lo, n) for each padded axis of  H_P = if_then_else(cond, A_Q, z).

    v is an L loop of the nest that occurs only as P's entry p, as Q's entry v-lo (lo >= 1)
    and in the one conjunct  lo<=v<lo+n  of cond; z is a tensor- and variable-free constant.
    """
    if len(nest.body) != 1 or not isinstance(nest.body[0], Equation):
        return []
    eq = nest.body[0]
    r = eq.rhs
    if not (isinstance(r, Call) and r.func == "if_then_else" and isinstance(r.args[1], Ref)):
        return []
    cond, a, z = r.args
    if a.name == eq.lhs.name or list(refs(z)) or all_vars(z) or list(refs(cond)):
        return []
    out = []
    for p, entry in enumerate(eq.lhs.index):
        if not isinstance(entry, Var):
            continue
        v = entry.name
        loop = next((l for l in nest.loops if l.var == v), None)
        if loop is None or loop.kind != "L" or sum(l.var == v for l in nest.loops) != 1:
            continue
        if any(v in all_vars(e) for q, e in enumerate(eq.lhs.index) if q != p):
            continue
        qs = [e for e in a.index if v in all_vars(e)]
        if len(qs) != 1 or not (isinstance(qs[0], BinOp) and qs[0].op == "-" and qs[0].lhs == Var(v)):
            continue
        lo = _int(qs[0].rhs)
        cs = [c for c in _conjuncts(cond) if v in all_vars(c)]
        if lo is None or lo < 1 or len(cs) != 1:
            continue
        c = cs[0]
        if not (isinstance(c, Compare) and c.ops == ("<=", "<") and _int(c.operands[0]) == lo
                and c.operands[1] == Var(v) and _int(c.operands[2]) is not None):
            continue
        n = _int(c.operands[2]) - lo
        if n >= 1 and lo + n <= loop.extent:
            out.append((v, p, lo, n, loop.extent))
    return out


def _slide(nest: Nest, h: str, p: int):
    """(c, m, k) when nest is  X_O = X_O + e  (init 0) reading h exactly once, as h_R with R[p] = c+f.

    c is an L loop occurring in the equation only as O's entry Var c and inside R[p]; f is an
    L loop absent from O (a reduction axis; every reduction axis is an L loop); e does not read X.
    """
    if len(nest.body) != 1 or not isinstance(nest.body[0], Equation):
        return None
    eq = nest.body[0]
    x = eq.lhs
    if eq.init != "0" or reduce_op(eq) != "+" or not (isinstance(eq.rhs, BinOp) and eq.rhs.lhs == x):
        return None
    e = eq.rhs.rhs
    hs = [r for r in refs(e) if r.name == h]
    if x.name == h or len(hs) != 1 or len(hs[0].index) <= p:  # h read once: the weight never reads h
        return None
    for ref in refs(e):  # h never inside another tensor's index
        if any(r.name == h for i in ref.index for r in refs(i)):
            return None
    rp = hs[0].index[p]
    if not (isinstance(rp, BinOp) and rp.op == "+" and isinstance(rp.lhs, Var) and isinstance(rp.rhs, Var)):
        return None
    loops = {l.var: l for l in nest.loops}
    if len(loops) != len(nest.loops):
        return None
    o_vars = set().union(*(all_vars(i) for i in x.index)) if x.index else set()
    if any(l.kind != "L" for l in nest.loops if l.var not in o_vars):
        return None
    rest = transform(e, lambda q: Num("0") if isinstance(q, Ref) and q.name == h else q)
    for c, f in ((rp.lhs.name, rp.rhs.name), (rp.rhs.name, rp.lhs.name)):
        if c == f or c not in loops or f not in loops or loops[c].kind != "L" or f in o_vars:
            continue
        if [i for i in x.index if c in all_vars(i)] != [Var(c)] or c in all_vars(rest):
            continue
        if any(c in all_vars(i) for q, i in enumerate(hs[0].index) if q != p):
            continue
        return c, loops[c].extent, loops[f].extent
    return None


def partial_facts(program, enc, found) -> None:
    """(PadConv s0 s1 v c lo n cut) for adjacent top-level s0 (padding along v) and s1 (sliding
    window along c over s0's output): see rules/leir/padding.egg."""
    body, pair = program.body, found.pairs
    keys = [enc.path_key[(i,)] for i in range(len(body))]
    for i in range(len(body) - 1):
        s0, s1 = body[i], body[i + 1]
        if not (isinstance(s0, Nest) and isinstance(s1, Nest)):
            continue
        for v, p, lo, n, extent in _pad_axes(s0):
            got = _slide(s1, s0.body[0].lhs.name, p)
            if got is None:
                continue
            c, m, k = got
            cut = lo + n - k + 1
            if 1 <= cut < m and lo < m and m + k - 1 <= extent:
                pair.append(("PadConv", keys[i], keys[i + 1], v, c, lo, n, cut))
