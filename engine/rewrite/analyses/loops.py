"""Facts about one loop nest (rules/operator.egg and the guards of most other files): reads and
writes, reduction axes, DOALL axes, legal loop swaps, fusable loop pairs, hardware tags.
"""
from __future__ import annotations

from engine.leir.ast import BinOp, Equation, Nest, Num, Ref, Unary, Var, refs
from engine.rewrite.analyses.common import (REDUCE_OPS, owned_vars, value_vars, all_vars, reduce_op, is_update, nest_equations, nest_loops, _clean)


def nest_facts(nest: Nest, outer: tuple, top_level: bool) -> set[tuple]:
    """Facts about one occurrence of ``nest`` (enclosing loops ``outer``), without the key."""
    out: set[tuple] = set()
    eqs = list(nest_equations(nest, outer))
    own = [l.var for l in nest.loops]
    every = list(outer) + list(nest_loops(nest))
    extents = {l.var: l.extent for l in every}
    has_sub = any(isinstance(it, Nest) for it in nest.body)

    for _, eq in eqs:
        out.add(("Writes", eq.lhs.name))
        for r in list(refs(eq.rhs)) + [r for i in eq.lhs.index for r in refs(i)]:
            out.add(("Reads", r.name))

    # (8) reduction axes, index-only vars
    used_as_value: set[str] = set()
    for _loops, eq in eqs:
        used_as_value |= value_vars(eq.rhs) | value_vars(eq.lhs)
        if is_update(eq) or eq.init is not None:
            lhs_vars = set().union(*(all_vars(i) for i in eq.lhs.index)) if eq.lhs.index else set()
            for v in own:
                if v not in lhs_vars:
                    out.add(("ReductionAxis", v))
    for v in own:
        if v not in used_as_value:
            out.add(("IndexOnly", v))

    # (1) pattern: single-equation reduction at top level
    if top_level and len(nest.body) == 1 and isinstance(nest.body[0], Equation):
        op = reduce_op(nest.body[0])
        if op is not None:
            out.add(("ReduceForm", op))
            # reduction_factorization (rules/operator.egg): the LHS index determines every loop
            # variable it mentions injectively, so a combine over exactly those loops
            # visits each element of X once.
            lhs_ix = nest.body[0].lhs.index
            if set().union(set(), *(all_vars(i) for i in lhs_ix)) <= owned_vars(lhs_ix, extents):
                out.add(("OwnedLhs",))

    # (9) pointwise access
    if eqs and all(all(r.index == eq.lhs.index for r in refs(eq.rhs)) for _, eq in eqs):
        out.add(("Pointwise",))

    # (2) dependence inside the nest: DOALL axes and legal loop swaps
    windex = _clean(eqs)
    owned = [owned_vars(eq.lhs.index, extents) for _, eq in eqs]
    if windex is not None:
        for v in own:
            if all(v in o for o in owned):
                out.add(("ParallelAxis", v))
        if not has_sub:
            readers: dict[str, int] = {}
            for _, eq in eqs:
                for r in refs(eq.rhs):
                    readers[r.name] = readers.get(r.name, 0) + 1
            writers: dict[str, int] = {}
            for _, eq in eqs:
                writers[eq.lhs.name] = writers.get(eq.lhs.name, 0) + 1
            for i, v in enumerate(own):
                for w in own[i + 1:]:
                    ex = _swap(v, w, eqs, owned, extents, readers, writers)
                    if ex is not None:
                        out.add(("Reorderable", v, w, ex))
                        out.add(("Reorderable", w, v, ex))

    # index pattern u*i+v for loop fusion
    for p in range(len(nest.loops) - 1):
        u, v = nest.loops[p], nest.loops[p + 1]
        if _fusable(u.var, v.var, v.extent, eqs):
            out.add(("FusableLoops", u.var, v.var, v.extent))

    # hardware: tags in use around and inside, thread product, parallel loops
    tags: dict[str, str] = {}
    threads, parallel = 1, False
    for l in every:
        if l.kind == "B":
            tags[l.var] = l.var[:2]
            if l.var.startswith("t"):
                threads *= l.extent
            else:
                parallel = True
        elif l.kind == "P":
            parallel = True
    for v in own:
        if v in tags:
            out.add(("LoopTag", v, tags[v]))
    for tag in ("tx", "ty", "tz", "bx", "by", "bz"):
        if tag not in tags.values():
            out.add(("FreeTag", tag))
    out.add(("ThreadProduct", threads))
    if not parallel:
        out.add(("NoParallel",))
    return out


def _swap(v, w, eqs, owned, extents, readers, writers) -> str | None:
    """Exactness of swapping loops v and w ("bitwise" / "reassociating"), None if illegal."""
    exact = "bitwise"
    for (loops, eq), own in zip(eqs, owned):
        order = [l.var for l in loops]
        free = set(order) - own
        if not _moves_free_loops(order, free, v, w):
            continue
        x = eq.lhs.name
        interacts = readers.get(x, 0) > 0 or writers.get(x, 0) > 1
        op = reduce_op(eq)
        if op is not None and writers.get(x, 0) == 1 and readers.get(x, 0) == 1:
            # the one read is the accumulator itself: only the accumulation order changes
            if op in REDUCE_OPS:
                exact = "reassociating"
            continue
        index_vars = set().union(*(all_vars(i) for i in eq.lhs.index)) if eq.lhs.index else set()
        if not interacts and v not in index_vars and w not in index_vars:
            continue  # last write wins at the component-wise last point in either order
        return None
    return exact


def _moves_free_loops(order: list, free: set, v: str, w: str) -> bool:
    """Whether exchanging v and w changes the relative order of the loops an equation does not
    own (its reduction / overwrite loops). Exchanging two non-adjacent loops moves each across
    the loops between them, so one free loop moving across another free loop changes the
    accumulation order even when the other loop of the pair is spatial."""
    a, b = sorted((order.index(v), order.index(w)))
    swapped = order[:a] + [order[b]] + order[a + 1:b] + [order[a]] + order[b + 1:]
    return [x for x in order if x in free] != [x for x in swapped if x in free]


def _fusable(u: str, v: str, inner: int, eqs) -> bool:
    """Every occurrence of u and v is inside the index term ``u*inner+v``."""
    seen = False

    def visit(e) -> bool:
        nonlocal seen
        if (isinstance(e, BinOp) and e.op == "+" and isinstance(e.rhs, Var) and e.rhs.name == v
                and isinstance(e.lhs, BinOp) and e.lhs.op == "*" and isinstance(e.lhs.lhs, Var)
                and e.lhs.lhs.name == u and isinstance(e.lhs.rhs, Num) and e.lhs.rhs.text == str(inner)):
            seen = True
            return True
        if isinstance(e, Var):
            return e.name not in (u, v)
        kids = (e.operand,) if isinstance(e, Unary) else (e.lhs, e.rhs) if isinstance(e, BinOp) else \
            e.index if isinstance(e, Ref) else getattr(e, "operands", None) or getattr(e, "args", None) or ()
        return all(visit(k) for k in kids)

    ok = all(visit(eq.lhs) and visit(eq.rhs) for _, eq in eqs)
    return ok and seen
