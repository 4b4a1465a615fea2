"""Python facts for tensor_split_to_decouple_operators (S6) and tensor_concat_to_fuse_operators
(S5) in rules/graph.egg, declared in rules/leir/slices.egg.

Both strategies copy tensor reads into slice buffers outside the guard that protected them,
so they need bounds reasoning on each moved read (intervals over the whole loop box), a
per-read buffer-size limit and, for concat, a comparison of two equations modulo tensor names
with a hardware-limit check on the joined axis: exact "for every read" tests that egglog
queries cannot state. Everything else (the cut points, the rewrite itself) stays in the rules.
"""
from __future__ import annotations

from engine.leir.ast import BinOp, Call, Compare, Equation, Num, Ref, Unary, Var, refs
from engine.rewrite.analyses.common import in_bounds, reduce_op

LIMIT = 2 ** 31
THREAD_LIMIT = {"tx": 1024, "ty": 1024, "tz": 64}
BLOCK_LIMIT = {"bx": 2 ** 31 - 1, "by": 65535, "bz": 65535}


def _vars(e) -> set[str]:
    out: set[str] = set()
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, Var):
            out.add(n.name)
        elif isinstance(n, Ref):
            stack.extend(n.index)
        elif isinstance(n, Unary):
            stack.append(n.operand)
        elif isinstance(n, BinOp):
            stack.extend((n.lhs, n.rhs))
        elif isinstance(n, (Call, Compare)):
            stack.extend(getattr(n, "args", None) or getattr(n, "operands", None) or ())
    return out


def _children(e) -> tuple:
    if isinstance(e, Unary):
        return (e.operand,)
    if isinstance(e, BinOp):
        return (e.lhs, e.rhs)
    if isinstance(e, Call):
        return tuple(e.args)
    if isinstance(e, Compare):
        return tuple(e.operands)
    return ()


def moved_reads(e, v: str) -> list[Ref]:
    """The reads the rules' traversal (SlicedReadsE / SliceCopiesE) replaces by slices: outermost refs whose index
    mentions ``v``, in left-to-right order (one per occurrence)."""
    if isinstance(e, Ref):
        return [e] if v in _vars(e) else []
    out: list[Ref] = []
    for c in _children(e):
        out.extend(moved_reads(c, v))
    return out


def _size(vs: set, extents: dict) -> int:
    p = 1
    for v in vs:
        p *= extents[v]
    return p


def _form(nest) -> str | None:
    """"map" (X_I = e, X unread) or "reduce" (X_I = X_I op e with its init) for a top-level
    single-equation nest that is not a pure copy."""
    if len(nest.body) != 1 or not isinstance(nest.body[0], Equation):
        return None
    eq = nest.body[0]
    x = eq.lhs
    if any(r.name == x.name for i in x.index for r in refs(i)):
        return None
    if not any(r.name == x.name for r in refs(eq.rhs)):
        return None if isinstance(eq.rhs, Ref) else "map"
    if eq.init is not None and reduce_op(eq) is not None:
        return "reduce"
    return None


def _operand(eq: Equation, form: str):
    """The expression the rules slice: the RHS of a map, ``e`` of ``X op e`` / ``op(X, e)``."""
    if form == "map":
        return eq.rhs
    return eq.rhs.rhs if isinstance(eq.rhs, BinOp) else eq.rhs.args[1]


def _plain_once(index, v: str) -> bool:
    """``v`` occurs in the index exactly once, as a whole entry."""
    return sum(isinstance(e, Var) and e.name == v for e in index) == 1 and \
        sum(v in _vars(e) for e in index) == 1


def split_axes(nest, shapes: dict) -> list[tuple[str, str]]:
    """(loop var, "spatial" | "reduction") sites of S6 in a top-level nest."""
    form = _form(nest)
    if form is None:
        return []
    eq = nest.body[0]
    e = _operand(eq, form)
    extents = {l.var: l.extent for l in nest.loops}
    env = {l.var: (0, l.extent - 1) for l in nest.loops}
    out = []
    lhs_vars = set().union(*(_vars(i) for i in eq.lhs.index)) if eq.lhs.index else set()
    for l in nest.loops:
        v = l.var
        if l.extent < 2:
            continue
        if _plain_once(eq.lhs.index, v):
            kind = "spatial"
        elif form == "reduce" and v not in lhs_vars and l.kind == "L":
            kind = "reduction"
        else:
            continue
        reads = moved_reads(e, v)
        if not reads:
            continue
        if all(in_bounds(r, env, shapes) and _size(_vars(r), extents) < LIMIT for r in reads):
            out.append((v, kind))
    return out


def _same_modulo_names(a, b, v: str, pairs: list) -> bool:
    """``a`` and ``b`` agree except for reads whose index mentions ``v`` (collected in ``pairs``
    as (a-read, b-read): same dtype, same index, names may differ); other reads are equal."""
    if isinstance(a, Ref) or isinstance(b, Ref):
        if not (isinstance(a, Ref) and isinstance(b, Ref)):
            return False
        if v in _vars(a) or v in _vars(b):
            if a.index != b.index or a.dtype != b.dtype:
                return False
            pairs.append((a, b))
            return True
        return a == b
    if isinstance(a, Var) or isinstance(a, Num):
        return a == b and not (isinstance(a, Var) and a.name == v)
    if type(a) is not type(b):
        return False
    if isinstance(a, Unary) and a.op != b.op:
        return False
    if isinstance(a, BinOp) and a.op != b.op:
        return False
    if isinstance(a, Call) and a.func != b.func:
        return False
    if isinstance(a, Compare) and a.ops != b.ops:
        return False
    ca, cb = _children(a), _children(b)
    return len(ca) == len(cb) and all(_same_modulo_names(x, y, v, pairs) for x, y in zip(ca, cb))


def _hw_ok(loops, v: str, joined: int) -> bool:
    threads = 1
    for l in loops:
        n = joined if l.var == v else l.extent
        if l.kind == "B":
            tag = l.var[:2]
            if tag in THREAD_LIMIT:
                if n > THREAD_LIMIT[tag]:
                    return False
                threads *= n
            elif tag in BLOCK_LIMIT and n > BLOCK_LIMIT[tag]:
                return False
    return threads <= 1024


def concat_axes(s, t, shapes: dict) -> list[str]:
    """Loop vars along which S5 may join the adjacent top-level nests ``s`` and ``t``."""
    fs, ft = _form(s), _form(t)
    if fs is None or fs != ft or len(s.loops) != len(t.loops):
        return []
    e1, e2 = s.body[0], t.body[0]
    x, y = e1.lhs, e2.lhs
    if x.name == y.name or x.index != y.index or x.dtype != y.dtype:
        return []
    if fs == "reduce":
        o1 = e1.rhs.op if isinstance(e1.rhs, BinOp) else e1.rhs.func
        o2 = e2.rhs.op if isinstance(e2.rhs, BinOp) else e2.rhs.func
        if o1 != o2 or type(e1.rhs) is not type(e2.rhs):
            return []
    if x.name in {r.name for r in refs(e2.rhs)}:
        return []
    a, b = _operand(e1, fs), _operand(e2, fs)
    out = []
    for pos, (l1, l2) in enumerate(zip(s.loops, t.loops)):
        v = l1.var
        if (l1.kind, l1.var) != (l2.kind, l2.var):
            return []
        if any(p != pos and (m1 != m2) for p, (m1, m2) in enumerate(zip(s.loops, t.loops))):
            continue
        if not _plain_once(x.index, v):
            continue
        pairs: list = []
        if not _same_modulo_names(a, b, v, pairs) or not pairs:
            continue
        joined = l1.extent + l2.extent
        ext = {l.var: l.extent for l in s.loops}
        ext[v] = joined
        env1 = {l.var: (0, l.extent - 1) for l in s.loops}
        env2 = {l.var: (0, l.extent - 1) for l in t.loops}
        if not _hw_ok(s.loops, v, joined):
            continue
        if not all(in_bounds(r1, env1, shapes) and in_bounds(r2, env2, shapes) and
                   _size(_vars(r1), ext) < LIMIT for r1, r2 in pairs):
            continue
        out.append(v)
    return out


def tensor_facts(program, enc, found) -> None:
    """TensorSplitAxis (per top-level nest) and TensorConcatAxis (per adjacent top-level pair) facts."""
    per_key, pair = found.nests, found.pairs
    shapes = {n: b.shape for n, b in program.info.buffers.items()}
    body = program.body
    for i, n in enumerate(body):
        key = enc.path_key[(i,)]
        for v, kind in split_axes(n, shapes):
            per_key.setdefault(key, set()).add(("TensorSplitAxis", v, kind))
        if i + 1 < len(body):
            for v in concat_axes(n, body[i + 1], shapes):
                pair.append(("TensorConcatAxis", key, enc.path_key[(i + 1,)], v))
