"""Facts for rules/memory.egg and rules/dce.egg: liveness, scopes and ranks of tensors, the S18
scope legality with its size limits, layouts, cache copies, precomputed index tables.
"""
from __future__ import annotations

from engine.leir.ast import DTYPES, Call, Equation, Nest, Ref, Var, refs, walk
from engine.leir.intervals import NotAffine, interval
from engine.leir.semantics import LOCAL_BYTES_PER_THREAD, SHARED_BYTES_PER_BLOCK, ProgramInfo
from engine.rewrite.analyses.common import (divisors, all_vars, nest_equations, nest_loops, in_bounds)
from engine.rewrite.analyses.values import FLOAT_DTYPES


# ------------------------------------------------------------------ memory and dce
# Facts for rules/memory.egg and rules/dce.egg (declared in rules/leir/values.egg and
# indices.egg): liveness, scopes and ranks of tensors, and the S18 scope legality.


def _refs4a(item):
    """Every tensor reference of an item (both sides, indices included)."""
    for _, eq in nest_equations(item, ()) if isinstance(item, Nest) else [((), item)]:
        yield eq.lhs
        for r in [r for i in eq.lhs.index for r in refs(i)] + list(refs(eq.rhs)):
            yield r


def _scope_ok(nest: Nest, name: str, scope: str, info: ProgramInfo) -> bool:
    """S18 decision (b): may ``name``, used only inside top-level ``nest``, live in ``scope``?

    Mirrors where the TIR lowering allocates a shared/local buffer: under the statement's
    leading bound loops (all of them for local; for shared, up to the last blockIdx loop of
    that prefix, and there must be one), each of which must index the buffer by itself in one
    fixed dimension (every thread / block owns its slice; the thread loops of a shared buffer's
    block share it); a local buffer must not be touched under any further bound loop, and a
    shared one under no further blockIdx loop. The lowering allocates in the deepest nest
    holding every access, so accesses confined to one sub-nest (whose enclosing plain loops
    would then have to own slices too) are refused. The slice must fit the block's / thread's
    memory (``_fits``).
    """
    users = [it for it in nest.body if any(r.name == name for r in _refs4a(it))]
    if len(users) == 1 and isinstance(users[0], Nest):
        return False
    return _slice_ok(nest, [r for r in _refs4a(nest) if r.name == name], scope, info)


def _cross_bound_reduction(nest: Nest) -> bool:
    """Does an equation of ``nest`` write one element from several iterations of a bound loop
    (a cross-thread / cross-block reduction)? TVM 0.27 lowers one only when nothing sits between
    its bound loops and its block, and the s/l allocation wrapper would."""
    return any(l.kind == "B" and l.var not in {v for x in eq.lhs.index for v in all_vars(x)}
               for loops, eq in nest_equations(nest, ()) for l in loops)


def _slice_ok(nest: Nest, rs: list, scope: str, info: ProgramInfo) -> bool:
    """Placement check of ``_scope_ok`` for the buffer accesses ``rs`` inside ``nest`` (a buffer
    of ``info``, or a new copy ``X#`` staged in single-equation ``nest``)."""
    dims = _owned_dims(nest, rs, scope)
    return dims is not None and _fits(nest, rs, dims, scope, info)


def _owned_dims(nest: Nest, rs: list, scope: str) -> list[int] | None:
    """The dimensions of the buffer accessed by ``rs`` that the lowering drops, one per loop
    owning a slice (lowering/tir/placement.py ``_site_for``), or None when it cannot place it in ``scope``."""
    if _cross_bound_reduction(nest):
        return None
    lead = 0
    while lead < len(nest.loops) and nest.loops[lead].kind == "B":
        lead += 1
    owners = nest.loops[:lead]
    if scope == "s":
        # S18 (b): shared memory holds the slice of one block, so it needs a blockIdx loop;
        # the block's thread loops (kept dimensions) share it
        blocks = [k for k in range(lead) if nest.loops[k].var.startswith("b")]
        if not blocks:
            return None
        lead = blocks[-1] + 1
        owners = [l for l in nest.loops[:lead] if l.var.startswith("b")]
    used: list[int] = []
    for l in owners:
        dims = [d for d in range(len(rs[0].index)) if d not in used and
                all(len(r.index) == len(rs[0].index) and r.index[d] == Var(l.var) for r in rs)]
        if not dims:
            return None
        used.append(dims[0])
    inner = [l for l in nest_loops(nest) if l.kind == "B"][lead:]
    if scope == "l":
        return None if inner else sorted(used)
    return None if any(l.var.startswith("b") for l in inner) else sorted(used)


def _fits(nest: Nest, rs: list, dims: list[int], scope: str, info: ProgramInfo) -> bool:
    """Do the kernel's ``scope`` buffers, this slice included, fit one block's static shared
    memory ("s") or one thread's local memory ("l")? A larger one builds to CUDA source but
    ptxas refuses it ("uses too much shared data") or the launch fails. Every scoped buffer of
    the statement is allocated in it at once, so their slices add up."""
    limit = SHARED_BYTES_PER_BLOCK if scope == "s" else LOCAL_BYTES_PER_THREAD
    total = _alloc_bytes(_buffer_shape(nest, rs, info), dims, rs[0].dtype)
    others = sorted({r.name for r in _refs4a(nest) if r.scope == scope} - {rs[0].name})
    for name in others:
        buf = info.buffers.get(name)
        if buf is None or buf.role != "intermediate":
            continue
        ors = [r for r in _refs4a(nest) if r.name == name]
        total += _alloc_bytes(buf.shape, _owned_dims(nest, ors, scope) or [], buf.dtype)
    return total <= limit


def _buffer_shape(nest: Nest, rs: list, info: ProgramInfo) -> tuple[int, ...]:
    """Shape the lowering allocates for the buffer of ``rs``: its inferred one, or for a new copy
    ``X#`` in single-equation ``nest`` the inferred one of its accesses (largest index + 1 over the
    loop box), X's own shape where an index is not affine."""
    buf = info.buffers.get(rs[0].name)
    if buf is not None:
        return buf.shape
    whole = info.buffers[rs[0].name.rstrip("#")].shape
    box = {l.var: (0, l.extent - 1) for l in nest.loops}
    shape = []
    for k, n in enumerate(whole):
        try:
            hi = [interval(r.index[k], box) for r in rs]
        except (NotAffine, KeyError, ZeroDivisionError):
            hi = [None]
        shape.append(n if any(iv is None for iv in hi) else max(iv[1] for iv in hi) + 1)
    return tuple(shape)


# TVM emits every shared/local array as `alignas(64) <type> name[n]`
_ALLOC_ALIGN = 64


def _alloc_bytes(shape, dims: list[int], dtype: str) -> int:
    """Bytes of one allocated slice (``dims`` dropped), rounded up to TVM's array alignment."""
    n = _elem_bytes(dtype)
    for d, m in enumerate(shape):
        if d not in dims:
            n *= m
    return -(-n // _ALLOC_ALIGN) * _ALLOC_ALIGN


def _elem_bytes(dtype: str) -> int:
    """Bytes of one element as the CUDA source stores it (bool: one byte)."""
    name = DTYPES[dtype]
    return 1 if name == "bool" else int("".join(c for c in name if c.isdigit())) // 8


# ---- layouts and cache write: WholeCopy, TensorDim, DimSplit, CacheWriteOK ----
def layout_cache_facts(program, enc, glob: list, per_key: dict) -> None:
    """Facts of the whole-tensor layout copy, the in-place reshape and the cache write."""
    body, info = program.body, program.info
    shapes = {b.name: b.shape for b in info.buffers.values()}
    dims: set = set()
    for i, n in enumerate(body):
        key = enc.path_key[(i,)]
        if len(n.body) != 1 or not isinstance(n.body[0], Equation) or \
                any(enc.path_key.get((j,)) == key for j in range(i)):
            continue
        eq = n.body[0]
        in_index = {q.name for r in [eq.lhs, *refs(eq.rhs)] for x in r.index for q in refs(x)}
        box = {l.var: (0, l.extent - 1) for l in n.loops}
        float_lhs = info.buffers[eq.lhs.name].dtype in FLOAT_DTYPES
        reads = list(refs(eq.rhs))
        for name in sorted({r.name for r in reads} - in_index - {eq.lhs.name}):
            rs = [r for r in reads if r.name == name]
            box_copy = float_lhs and all(in_bounds(r, box, shapes) for r in rs) and \
                all(isinstance(x, Var) for r in rs for x in r.index)
            size = 1
            for m in shapes[name]:
                size *= m
            if not box_copy and shapes[name] and size < 2 ** 31:
                per_key.setdefault(key, set()).add(("WholeCopy", name))
                dims.add(name)
        # cache write: X read in e only at I (an accumulator, so with its init) and in no index
        x, own = eq.lhs.name, [r for r in reads if r.name == eq.lhs.name]
        if x in in_index or any(r.index != eq.lhs.index for r in own) or (own and not eq.init):
            continue
        rs = [Ref(x + "#", eq.lhs.dtype, eq.lhs.scope, eq.lhs.index)]
        for sc in ("l", "s"):
            if _slice_ok(n, rs, sc, info):
                per_key.setdefault(key, set()).add(("CacheWriteOK", sc))
    for name, buf in sorted(info.buffers.items()):
        if name in dims:
            glob.extend(("TensorDim", name, k, m) for k, m in enumerate(buf.shape))
        if buf.role == "intermediate":
            glob.extend(("DimSplit", name, k, f) for k, m in enumerate(buf.shape) for f in divisors(m))


def memory_dce_facts(program, enc, found) -> None:
    """The facts of rules/memory.egg and rules/dce.egg: scopes, copies, caches, dead tensors."""
    glob, per_key = found.glob, found.nests
    layout_cache_facts(program, enc, glob, per_key)
    body = program.body
    info = program.info
    users: dict[str, list[int]] = {}
    scopes: dict[str, set] = {}
    ranks: dict[str, set] = {}
    for i, nest in enumerate(body):
        for r in _refs4a(nest):
            lst = users.setdefault(r.name, [])
            if not lst or lst[-1] != i:
                lst.append(i)
            scopes.setdefault(r.name, set()).add(r.scope)
            ranks.setdefault(r.name, set()).add(len(r.index))
    keys = [enc.path_key[(i,)] for i in range(len(body))]
    for name in sorted(users):
        if len(scopes[name]) == 1:
            glob.append(("TensorScope", name, next(iter(scopes[name]))))
        if len(ranks[name]) == 1:
            glob.append(("TensorRank", name, next(iter(ranks[name]))))
        first = users[name][0]
        if all(enc.path_key[(j,)] != keys[first] for j in range(first)):
            per_key.setdefault(keys[first], set()).add(("FirstUse", name))
        buf = info.buffers.get(name)
        if buf is None or buf.role != "intermediate":
            continue
        glob.append(("ScopeOK", name, "g"))
        if len(users[name]) == 1:
            for sc in ("l", "s"):
                if _scope_ok(body[users[name][0]], name, sc, info):
                    glob.append(("ScopeOK", name, sc))
    # dead statements: every tensor written is an intermediate that no later statement reads
    ws = [{eq.lhs.name for _, eq in nest_equations(n, ())} for n in body]
    reads_later = [set() for _ in body]
    acc: set = set()
    for i in range(len(body) - 1, -1, -1):
        reads_later[i] = set(acc)
        acc |= {r.name for _, eq in nest_equations(body[i], ()) for r in
                list(refs(eq.rhs)) + [r for x in eq.lhs.index for r in refs(x)]}
    dead_at: dict[int, bool] = {}
    for i in range(len(body)):
        dead = all(info.buffers[x].role == "intermediate" and x not in reads_later[i] for x in ws[i])
        k = keys[i]
        dead_at[k] = dead_at.get(k, True) and dead
    # cache reads (CacheOK s X sc): top-level single-equation nest s reads X (never writes it,
    # never inside an index); a copy N of X's read index, made in s itself, may live in sc.
    for i, n in enumerate(body):
        if len(n.body) != 1 or not isinstance(n.body[0], Equation) or keys[i] != enc.path_key[(i,)]:
            continue
        eq = n.body[0]
        if info.buffers[eq.lhs.name].dtype not in ("f16", "bf16", "f32", "f64"):
            continue
        in_index = {r.name for x in [*eq.lhs.index] for r in refs(x)}
        for r in refs(eq.rhs):
            for x in r.index:
                in_index |= {q.name for q in refs(x)}
        reads = [r for r in refs(eq.rhs)]
        box = {l.var: (0, l.extent - 1) for l in n.loops}
        shapes = {b.name: b.shape for b in info.buffers.values()}
        for name in sorted({r.name for r in reads}):
            if name == eq.lhs.name or name in in_index:
                continue
            # the copy runs outside every guard: a guarded (padded) read X_{c-1} under
            # 1<=c<n+1 would be copied, and the copy written, at c-1 = -1
            if not all(in_bounds(r, box, shapes) for r in reads if r.name == name):
                continue
            # the read may be box-copied at all (layout_transformation/transpose, into g)
            per_key.setdefault(keys[i], set()).add(("CopyOK", name))
            rs = [Ref(name + "#", r.dtype, r.scope, r.index) for r in reads if r.name == name]
            for sc in ("l", "s"):
                if _slice_ok(n, rs, sc, info):
                    per_key.setdefault(keys[i], set()).add(("CacheOK", name, sc))
    for k, dead in dead_at.items():
        if dead and all(len(p) == 1 for p in enc.item_paths.get(k, ())):
            per_key.setdefault(k, set()).add(("Dead",))
    for key, node in enc.orig.items():
        if isinstance(node, Nest) and key in enc.item_paths:
            for v in table_vars(node):
                per_key.setdefault(key, set()).add(("TableVar", v))


def table_vars(nest: Nest) -> list[str]:
    """(TableVar s u): loop u of nest s may index through a precomputed i64 table
    (precompute_indices). The analysis cannot see through a table value, so u must occur in
    no if_then_else of s (its condition would refine the range of an index built from u:
    padded reads c-1 under 1<=c<n+1) and in no index of a read of a tensor s writes at
    another index (a recurrence F_{c-1}, whose order the analysis must see). Nor may u occur
    in a compound entry of a reduction's written index (X_{c*4+a} = X_{c*4+a} + ...): the
    rule replaces the entry everywhere, and a reduction through a table index has no
    expressible initialisation (its elements are known only at run time; lowering.tir
    refuses it). Sorted."""
    eqs = [eq for _, eq in nest_equations(nest, ())]
    written: dict[str, set] = {}
    for eq in eqs:
        written.setdefault(eq.lhs.name, set()).add(eq.lhs.index)
    blocked: set[str] = set()
    for eq in eqs:
        if eq.init is not None:
            blocked |= {v for i in eq.lhs.index if not isinstance(i, Var) for v in all_vars(i)}
        for node in [eq.rhs, *eq.lhs.index]:
            for n in walk(node):
                if isinstance(n, Call) and n.func == "if_then_else":
                    blocked |= all_vars(n)
                elif isinstance(n, Ref) and n.name in written and n.index not in written[n.name]:
                    blocked |= {v for i in n.index for v in all_vars(i)}
    return sorted(l.var for l in nest.loops if l.var not in blocked)
