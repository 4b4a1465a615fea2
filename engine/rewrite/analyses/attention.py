"""Facts for rules/attention.egg: prefix axes and the write/read index shapes of the softmax and
attention family.
"""
from __future__ import annotations

from engine.leir.ast import BinOp, Equation, Nest, Num, Var, refs, transform
from engine.rewrite.analyses.common import (owned_vars, all_vars, nest_equations)




def _prefix_axis(nest: Nest) -> str | None:
    """The only reduction axis of a single-update-equation nest, when prefix-able (PrefixAxis)."""
    if len(nest.body) != 1 or not isinstance(nest.body[0], Equation):
        return None
    eq = nest.body[0]
    x = eq.lhs
    reads = [r for r in refs(eq.rhs) if r.name == x.name]
    if not reads or any(r != x for r in reads) or any(r.name == x.name for i in x.index for r in refs(i)):
        return None
    extents = {l.var: l.extent for l in nest.loops}
    lhs_vars = set().union(*(all_vars(i) for i in x.index)) if x.index else set()
    red = [l for l in nest.loops if l.var not in lhs_vars]
    if len(red) != 1 or red[0].kind != "L":
        return None
    owned = owned_vars(x.index, extents)
    if any(l.var not in owned for l in nest.loops if l is not red[0]):
        return None
    return red[0].var


def _write_index(nest: Nest, name: str):
    """The one index tuple at which ``nest`` writes ``name`` (None: not written, or several)."""
    found = {eq.lhs.index for _, eq in nest_equations(nest, ()) if eq.lhs.name == name}
    return next(iter(found)) if len(found) == 1 else None


def _read_indices(nest: Nest, name: str) -> set:
    out = set()
    for _, eq in nest_equations(nest, ()):
        for r in list(refs(eq.rhs)) + [r for i in eq.lhs.index for r in refs(i)]:
            if r.name == name:
                out.add(r.index)
    return out


def _subst(index: tuple, v: str, new) -> tuple:
    return tuple(transform(e, lambda n: new if isinstance(n, Var) and n.name == v else n) for e in index)


def attention_facts(program, enc, found) -> None:
    """PrefixAxis / DeadAfter per top-level nest; ReadRenamed / ReadFinal per top-level pair."""
    per_key, pair = found.nests, found.pairs
    body = program.body
    keys = [enc.path_key[(i,)] for i in range(len(body))]
    nested = {k for k, paths in enc.item_paths.items() if any(len(p) > 1 for p in paths)}
    inter = {n for n, b in program.info.buffers.items() if b.role == "intermediate"}
    touched = []  # names read or written by each top-level nest
    for n in body:
        names = set()
        for _, eq in nest_equations(n, ()):
            names.add(eq.lhs.name)
            names |= {r.name for r in list(refs(eq.rhs)) + [r for i in eq.lhs.index for r in refs(i)]}
        touched.append(names)
    occ: dict[int, set] = {}
    for i, n in enumerate(body):
        f: set = set()
        r = _prefix_axis(n)
        if r is not None:
            f.add(("PrefixAxis", r))
        later = set().union(*touched[i + 1:]) if i + 1 < len(body) else set()
        for x in sorted(touched[i] & inter - later):
            f.add(("DeadAfter", x))
        k = keys[i]
        occ[k] = f if k not in occ else occ[k] & f
    for k, f in occ.items():
        if k not in nested:
            per_key.setdefault(k, set()).update(f)
    for i, s in enumerate(body):
        for j in range(i + 1, len(body)):
            t = body[j]
            for x in sorted(touched[i] & touched[j]):
                ix = _write_index(s, x)
                reads = _read_indices(t, x)
                if ix is None or len(reads) != 1 or _write_index(t, x) is not None:
                    continue
                (jx,) = reads
                vars_ = sorted(set().union(*(all_vars(e) for e in ix))) if ix else []
                for v in vars_:
                    for w in sorted({v} | set().union(*(all_vars(e) for e in jx)) if jx else {v}):
                        if _subst(ix, v, Var(w)) == jx:
                            pair.append(("ReadRenamed", keys[i], keys[j], x, v, w))
                last = ix[-1] if ix else None
                if isinstance(last, Var) and all(last.name not in all_vars(e) for e in ix[:-1]):
                    loop = next((l for l in s.loops if l.var == last.name and l.kind == "L"), None)
                    prev = _subst(ix, last.name, BinOp("-", last, Num("1")))
                    if loop is not None and _read_indices(s, x) <= {ix, prev} \
                            and jx == _subst(ix, last.name, Num(str(loop.extent - 1))):
                        pair.append(("ReadFinal", keys[i], keys[j], x, last.name))
