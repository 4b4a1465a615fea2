"""Python facts for the graph-level strategies (rules/graph.egg), declared in rules/leir/sets.egg.

They need whole-program def-use or "for every shared tensor" reasoning that egglog queries
cannot state: whether two bodies may be separated or interleaved (fusion / fission), whether a
producer may be inlined into its readers, and which equations may lose a sub-expression.
All facts depend on the content of the nests they name (plus, for InlineProducer, on def-use
around the single writer), so hash-consed duplicates get the same answer.
"""
from __future__ import annotations

from engine.leir.ast import Compare, Equation, Nest, Ref, Var, refs, walk
from engine.leir.affine import affine, radix_vars
from engine.rewrite.analyses.common import reduce_op


def _accesses(items, outer: tuple):
    """(ref, is_write, enclosing loop vars) of every tensor access under ``items``."""
    for it in items:
        if isinstance(it, Equation):
            yield it.lhs, True, outer
            for sub in it.lhs.index:
                for r in refs(sub):
                    yield r, False, outer
            for r in refs(it.rhs):
                yield r, False, outer
        else:
            yield from _accesses(it.body, outer + tuple(l.var for l in it.loops))


def _owns(index, own: dict, outer: dict) -> bool:
    """Distinct points of the ``own`` loops (outer loops fixed) reach distinct index tuples."""
    extents = dict(outer)
    extents.update(own)
    owned: set = set()
    for entry in index:
        owned |= radix_vars(entry, extents, among=own)
    return owned >= set(own)


def separable(first, second, own: dict, outer: dict) -> bool:
    """Running ``first`` then ``second`` at every point of the ``own`` loops equals running
    ``first`` over all points, then ``second`` over all points (and vice versa).

    Holds when every tensor both parts touch and at least one writes is accessed, everywhere
    in both parts, with one index tuple that mentions only the own and outer loops and
    determines the own-loop point: then each element is touched at exactly one point.
    """
    acc1 = list(_accesses(first, ()))
    acc2 = list(_accesses(second, ()))
    names1 = {r.name for r, _, _ in acc1}
    names2 = {r.name for r, _, _ in acc2}
    written = {r.name for r, w, _ in acc1 + acc2 if w}
    allowed = set(own) | set(outer)
    for x in sorted(names1 & names2 & written):
        idx = {r.index for r, _, _ in acc1 + acc2 if r.name == x}
        if len(idx) != 1:
            return False
        index = next(iter(idx))
        for entry in index:
            for n in walk(entry):
                if isinstance(n, Ref) or (isinstance(n, Var) and n.name not in allowed):
                    return False
        if not _owns(index, own, outer):
            return False
    return True


def _lists(program):
    """(items, enclosing loops as {var: extent}, path of the list's parent) for every body."""
    out = [(program.body, {}, ())]
    stack = [(n, {}, (i,)) for i, n in enumerate(program.body)]
    while stack:
        nest, outer, path = stack.pop(0)
        inner = dict(outer)
        inner.update({l.var: l.extent for l in nest.loops})
        out.append((nest.body, inner, path))
        stack.extend((it, inner, path + (j,)) for j, it in enumerate(nest.body) if isinstance(it, Nest))
    return out


def _value_refs(e):
    """Refs at value positions (not inside indices)."""
    if isinstance(e, Ref):
        yield e
        return
    for n in getattr(e, "args", None) or getattr(e, "operands", None) or \
            ((e.lhs, e.rhs) if hasattr(e, "lhs") else (e.operand,) if hasattr(e, "operand") else ()):
        yield from _value_refs(n)


def _inline_producers(program) -> list[int]:
    """Top-level positions of nests that compute_inline may remove."""
    body = program.body
    buffers = program.info.buffers
    writes = [{eq.lhs.name for _, eq in _eqs(n)} for n in body]
    reads = [{r.name for _, eq in _eqs(n) for r in list(refs(eq.rhs)) + [q for i in eq.lhs.index for q in refs(i)]}
             for n in body]
    in_index: set = set()
    for n in body:
        for _, eq in _eqs(n):
            for e in (eq.lhs, eq.rhs):
                for r in refs(e):
                    for i in r.index:
                        in_index |= {q.name for q in refs(i)}
    out = []
    for i, s in enumerate(body):
        if len(s.body) != 1 or not isinstance(s.body[0], Equation):
            continue
        eq = s.body[0]
        x = eq.lhs.name
        buf = buffers.get(x)
        if buf is None or buf.role != "intermediate" or eq.init is not None or x in in_index:
            continue
        if x in {r.name for r in refs(eq.rhs)}:
            continue
        vs = [e.name for e in eq.lhs.index if isinstance(e, Var)]
        if len(vs) != len(eq.lhs.index) or len(set(vs)) != len(vs) or set(vs) != {l.var for l in s.loops}:
            continue
        if sum(x in w for w in writes) != 1 or any(x in reads[k] for k in range(i + 1)):
            continue
        readers = [k for k in range(i + 1, len(body)) if x in reads[k]]
        if not readers:
            continue
        if any(r.dtype != eq.lhs.dtype for r in _value_refs(eq.rhs)):
            continue
        if any(eq2.lhs.dtype != eq.lhs.dtype for k in readers for _, eq2 in _eqs(body[k])
               if x in {r.name for r in refs(eq2.rhs)}):
            continue
        if any(isinstance(n, Compare) for n in walk(eq.rhs)) and not all(
                all(isinstance(e, Var) for e in r.index)
                for k in readers for _, eq2 in _eqs(body[k]) for r in refs(eq2.rhs) if r.name == x):
            # a guard such as 1<=c<129 protecting a read A_{c-1} stays checkable (leir.md 8,
            # interval refinement) only while c stays a loop variable, not c*2+d
            continue
        inputs = {r.name for r in refs(eq.rhs)} | {x}
        if any(writes[k] & inputs for k in range(i + 1, readers[-1] + 1)):
            continue
        out.append(i)
    return out


def _eqs(item):
    if isinstance(item, Equation):
        yield (), item
        return
    for it in item.body:
        yield from _eqs(it)


def split_host(nest) -> str | None:
    """"map" / "reduce" when expression_splitting may move value sub-expressions out of ``nest``."""
    if len(nest.body) != 1 or not isinstance(nest.body[0], Equation):
        return None
    eq = nest.body[0]
    x = eq.lhs.name
    in_lhs_index = any(r.name == x for i in eq.lhs.index for r in refs(i))
    if in_lhs_index:
        return None
    if not any(r.name == x for r in refs(eq.rhs)):
        return "map"
    if eq.init is not None and reduce_op(eq) is not None:
        return "reduce"
    return None


def graph_facts(program, enc, found) -> None:
    """The graph-level facts of nests (``found.nests``) and of pairs of nests (``found.pairs``)."""
    per_key, pair = found.nests, found.pairs
    for items, outer, parent in _lists(program):
        for j, it in enumerate(items):
            if not isinstance(it, Nest):
                continue
            key = enc.path_key[parent + (j,)]
            facts = per_key.setdefault(key, set())
            own = {l.var: l.extent for l in it.loops}
            if all(isinstance(b, Equation) for b in it.body):
                facts.add(("FlatNest",))
            for k in range(1, len(it.body)):
                if separable(it.body[:k], it.body[k:], own, outer):
                    facts.add(("FissionCut", k))
            if j + 1 < len(items) and isinstance(items[j + 1], Nest) and items[j + 1].loops == it.loops \
                    and separable(it.body, items[j + 1].body, own, outer):
                pair.append(("Fusible", key, enc.path_key[parent + (j + 1,)]))
    for i, n in enumerate(program.body):
        kind = split_host(n)
        if kind is not None:
            per_key.setdefault(enc.path_key[(i,)], set()).add(("SplitHost", kind))
    for i in _inline_producers(program):
        per_key.setdefault(enc.path_key[(i,)], set()).add(("InlineProducer",))
    reorder_facts(program, enc, pair)


def _range(entry, extents) -> tuple[int, int] | None:
    """(min, max) of an affine index entry over the loop ranges."""
    a = affine(entry, extents)
    if a is None:
        return None
    lo = hi = a.get(1, 0)
    for v, c in a.items():
        if v != 1:
            lo += min(0, c * (extents[v] - 1))
            hi += max(0, c * (extents[v] - 1))
    return lo, hi


def _write_boxes(nest, x):
    """Per write of ``x`` in ``nest``: (equation, per-entry (min, max) or None)."""
    out = []
    for loops, eq in _loops_eqs(nest, ()):
        if eq.lhs.name == x:
            ext = {l.var: l.extent for l in loops}
            out.append((eq, [_range(e, ext) for e in eq.lhs.index]))
    return out


def _loops_eqs(item, outer):
    if isinstance(item, Equation):
        yield outer, item
        return
    for it in item.body:
        yield from _loops_eqs(it, outer + item.loops)


def commute_disjoint(s, t) -> bool:
    """Adjacent statements that only share written tensors, written by plain assignments (no
    init, no read of that tensor in either) into provably disjoint index boxes."""
    def rw(n):
        w, r = set(), set()
        for _, eq in _loops_eqs(n, ()):
            w.add(eq.lhs.name)
            r |= {q.name for q in refs(eq.rhs)} | {q.name for i in eq.lhs.index for q in refs(i)}
        return w, r
    ws, rs = rw(s)
    wt, rt = rw(t)
    shared = ws & wt
    if not shared or ws & rt or rs & wt:
        return False
    for x in shared:
        bs, bt = _write_boxes(s, x), _write_boxes(t, x)
        for eq, _ in bs + bt:
            if eq.init is not None:
                return False
        for _, b1 in bs:
            for _, b2 in bt:
                if not any(r1 and r2 and (r1[1] < r2[0] or r2[1] < r1[0]) for r1, r2 in zip(b1, b2)):
                    return False
    return True


def reorder_facts(program, enc, pair: list) -> None:
    body = program.body
    for i in range(len(body) - 1):
        if commute_disjoint(body[i], body[i + 1]):
            pair.append(("CommuteDisjoint", enc.path_key[(i,)], enc.path_key[(i + 1,)]))
