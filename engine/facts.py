"""Python-computed analysis relations, inserted as egglog facts per query.

The relations are declared (with their precondition number) in rules/leir.egg. They are
computed here rather than in egglog because they need negation ("no other equation reads
X"), affine index reasoning or whole-program def-use, which are a few lines of exact Python
and cost microseconds, while egglog queries cannot negate.

Facts about a Nest are keyed by its e-class. Hash-consing gives identical nests one e-class,
so a fact is inserted only when it holds at EVERY position where that nest occurs: a step
expanded to all positions then stays sound.
"""
from __future__ import annotations

from .affine import affine, radix_vars
from .ast import DTYPES, BinOp, Call, Compare, Equation, Nest, Num, Ref, Unary, Var, equations, refs, walk
from .intervals import NotAffine, interval
from .semantics import LOCAL_BYTES_PER_THREAD, SHARED_BYTES_PER_BLOCK, ProgramInfo

REDUCE_OPS = ("+", "-", "*")
EXACT_REDUCE = ("max", "min")


def divisors(n: int) -> list[int]:
    """Every f with 1 < f < n and f | n, ascending (trial division up to sqrt(n))."""
    small, large = [], []
    f = 2
    while f * f <= n:
        if n % f == 0:
            small.append(f)
            if f * f != n:
                large.append(n // f)
        f += 1
    return small + large[::-1]


def cuts(n: int) -> list[int]:
    """Cut points for splitting a reduction range of extent n: the divisors, and n // 2."""
    out = set(divisors(n))
    if n >= 2:
        out.add(n // 2)
    return sorted(out)


# ------------------------------------------------------------------ expressions and indices


def owned_vars(index, extents) -> set[str]:
    """Loop vars that the index tuple determines injectively (``engine.affine.radix_vars``)."""
    out: set[str] = set()
    for entry in index:
        out |= radix_vars(entry, extents)
    return out


def value_vars(e, in_index: bool = False) -> set[str]:
    """Loop variables used as values (outside every tensor index)."""
    if isinstance(e, Var):
        return set() if in_index else {e.name}
    if isinstance(e, Ref):
        out: set[str] = set()
        for i in e.index:
            out |= value_vars(i, True)
        return out
    out = set()
    for c in (e.operand,) if isinstance(e, Unary) else (e.lhs, e.rhs) if isinstance(e, BinOp) else \
            getattr(e, "operands", None) or getattr(e, "args", None) or ():
        out |= value_vars(c, in_index)
    return out


def all_vars(e) -> set[str]:
    return {n.name for n in walk(e) if isinstance(n, Var)}


def reduce_op(eq: Equation) -> str | None:
    """The operator of a pure reduction ``X = X op e`` / ``max(X, e)`` with X not in e."""
    x, r = eq.lhs, eq.rhs
    if isinstance(r, BinOp) and r.op in REDUCE_OPS and r.lhs == x:
        e = r.rhs
        op = r.op
    elif isinstance(r, Call) and r.func in EXACT_REDUCE and r.args[0] == x:
        e = r.args[1]
        op = r.func
    else:
        return None
    if any(ref.name == x.name for ref in refs(e)) or any(ref.name == x.name for i in x.index for ref in refs(i)):
        return None
    return op


def is_update(eq: Equation) -> bool:
    return any(r == eq.lhs for r in refs(eq.rhs))


# ------------------------------------------------------------------ per-nest analyses


def _equations(nest: Nest, outer):
    loops = outer + nest.loops
    for it in nest.body:
        if isinstance(it, Equation):
            yield loops, it
        else:
            yield from _equations(it, loops)


def _all_loops(nest: Nest):
    for l in nest.loops:
        yield l
    for it in nest.body:
        if isinstance(it, Nest):
            yield from _all_loops(it)


def _clean(eqs) -> dict[str, tuple] | None:
    """Write index per tensor written in the nest when every access to it uses that index.

    None when some written tensor is written at two indices or read at another index
    (a dependence across iterations, e.g. a prefix recurrence reading F_{a-1}).
    """
    windex: dict[str, tuple] = {}
    for _, eq in eqs:
        prev = windex.setdefault(eq.lhs.name, eq.lhs.index)
        if prev != eq.lhs.index:
            return None
    for _, eq in eqs:
        for r in list(refs(eq.rhs)) + [r for i in eq.lhs.index for r in refs(i)]:
            if r.name in windex and r.index != windex[r.name]:
                return None
    return windex


def nest_facts(nest: Nest, outer: tuple, top_level: bool) -> set[tuple]:
    """Facts about one occurrence of ``nest`` (enclosing loops ``outer``), without the key."""
    out: set[tuple] = set()
    eqs = list(_equations(nest, outer))
    own = [l.var for l in nest.loops]
    every = list(outer) + list(_all_loops(nest))
    extents = {l.var: l.extent for l in every}
    has_sub = any(isinstance(it, Nest) for it in nest.body)

    for _, eq in eqs:
        out.add(("Writes", eq.lhs.name))
        for r in list(refs(eq.rhs)) + [r for i in eq.lhs.index for r in refs(i)]:
            out.add(("Reads", r.name))

    # (8) reduction axes, index-only vars
    used_as_value: set[str] = set()
    for loops, eq in eqs:
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
        loop_vars = {l.var for l in loops}
        free = loop_vars - own
        if not (v in free and w in free):
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


# ------------------------------------------------------------------ whole program


def program_facts(program, enc):
    """(global facts, {nest key: facts}, pair facts, repeated-expression keys).

    Global facts are tuples (relation, args...); nest facts omit the nest argument; pair
    facts name top-level nests by key.
    """
    expr_counts = enc.counts
    glob: list[tuple] = []
    extents: set[int] = set()
    per_key: dict[int, set] = {}

    def visit(nest, outer, path, top):
        for l in nest.loops:
            extents.add(l.extent)
        return nest_facts(nest, outer, top)

    occurrences: dict[int, list] = {}
    for key, paths in enc.item_paths.items():
        node = enc.orig[key]
        if isinstance(node, Nest):
            occurrences[key] = paths

    def outer_of(path):
        loops: tuple = ()
        items = program.body
        for i in path[:-1]:
            n = items[i]
            loops += n.loops
            items = n.body
        return loops

    for key, paths in occurrences.items():
        node = enc.orig[key]
        acc = None
        for p in paths:
            f = visit(node, outer_of(p), p, len(p) == 1)
            acc = f if acc is None else acc & f
        per_key[key] = acc

    for n in sorted(extents):
        for f in divisors(n):
            glob.append(("Divisor", n, f))
        for c in cuts(n):
            glob.append(("Cut", n, c))
    for name, buf in program.info.buffers.items():
        glob.append(("Intermediate", name) if buf.role == "intermediate" else ("KnownTensor", name))

    # top-level dependences (2) and loop-nest consistency (4)
    body = program.body
    ws = [{eq.lhs.name for _, eq in _equations(n, ())} for n in body]
    rs = [{r.name for _, eq in _equations(n, ()) for r in list(refs(eq.rhs)) +
           [r for i in eq.lhs.index for r in refs(i)]} for n in body]
    keys = [enc.path_key[(i,)] for i in range(len(body))]
    pair: list[tuple] = []
    for i in range(len(body)):
        for j in range(i + 1, len(body)):
            raw, war, waw = ws[i] & rs[j], rs[i] & ws[j], ws[i] & ws[j]
            for x in sorted(raw):
                pair.append(("RAW", keys[i], keys[j], x))
            for x in sorted(war):
                pair.append(("WAR", keys[i], keys[j], x))
            for x in sorted(waw):
                pair.append(("WAW", keys[i], keys[j], x))
            if j == i + 1:
                pair.append(("Adjacent", keys[i], keys[j]))
                if not (raw or war or waw):
                    pair.append(("Independent", keys[i], keys[j]))
                if body[i].loops == body[j].loops:
                    pair.append(("SameLoops", keys[i], keys[j]))
    # (3) operation identity
    rep = [("Repeated", k) for k, c in sorted(expr_counts.items()) if c >= 2]
    attention_facts(program, enc, per_key, pair)  # issue 4B section below
    memory_dce_facts(program, enc, glob, per_key)  # issue 4A section below
    from .facts_graph import graph_facts  # issue 3 part 2: graph level (rules/graph.egg)
    graph_facts(program, enc, per_key, pair)
    partial_facts(program, enc, pair)  # S35 section below (rules/partial.egg)
    return glob, per_key, pair, rep


# ------------------------------------------------------------------ issue 4B: attention family
# Facts for rules/attention.egg (declared in the "issue 4B" section of rules/leir.egg).


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
    found = {eq.lhs.index for _, eq in _equations(nest, ()) if eq.lhs.name == name}
    return next(iter(found)) if len(found) == 1 else None


def _read_indices(nest: Nest, name: str) -> set:
    out = set()
    for _, eq in _equations(nest, ()):
        for r in list(refs(eq.rhs)) + [r for i in eq.lhs.index for r in refs(i)]:
            if r.name == name:
                out.add(r.index)
    return out


def _subst(index: tuple, v: str, new) -> tuple:
    from .ast import transform
    return tuple(transform(e, lambda n: new if isinstance(n, Var) and n.name == v else n) for e in index)


def attention_facts(program, enc, per_key: dict, pair: list) -> None:
    """PrefixAxis / DeadAfter per top-level nest; ReadRenamed / ReadFinal per top-level pair."""
    body = program.body
    keys = [enc.path_key[(i,)] for i in range(len(body))]
    nested = {k for k, paths in enc.item_paths.items() if any(len(p) > 1 for p in paths)}
    inter = {n for n, b in program.info.buffers.items() if b.role == "intermediate"}
    touched = []  # names read or written by each top-level nest
    for n in body:
        names = set()
        for _, eq in _equations(n, ()):
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


# ------------------------------------------------------------------ issue 4A: memory and dce
# Facts for rules/memory.egg and rules/dce.egg (declared in the "issue 4A" section of
# rules/leir.egg): liveness, scopes and ranks of tensors, and the S18 scope legality.


def _refs4a(item):
    """Every tensor reference of an item (both sides, indices included)."""
    for _, eq in _equations(item, ()) if isinstance(item, Nest) else [((), item)]:
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
               for loops, eq in _equations(nest, ()) for l in loops)


def _slice_ok(nest: Nest, rs: list, scope: str, info: ProgramInfo) -> bool:
    """Placement check of ``_scope_ok`` for the buffer accesses ``rs`` inside ``nest`` (a buffer
    of ``info``, or a new copy ``X#`` staged in single-equation ``nest``)."""
    dims = _owned_dims(nest, rs, scope)
    return dims is not None and _fits(nest, rs, dims, scope, info)


def _owned_dims(nest: Nest, rs: list, scope: str) -> list[int] | None:
    """The dimensions of the buffer accessed by ``rs`` that the lowering drops, one per loop
    owning a slice (lowering/tir.py ``_site_for``), or None when it cannot place it in ``scope``."""
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
    inner = [l for l in _all_loops(nest) if l.kind == "B"][lead:]
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


# ---- issue 4A (layouts and cache write): WholeCopy, TensorDim, DimSplit, CacheWriteOK ----
def layout_cache_facts(program, enc, glob: list, per_key: dict) -> None:
    """Facts of the whole-tensor layout copy, the in-place reshape and the cache write."""
    body, info = program.body, program.info
    from .facts_tensor import _in_bounds  # facts_tensor imports this module
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
            box_copy = float_lhs and all(_in_bounds(r, box, shapes) for r in rs) and \
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
# ---- end issue 4A (layouts and cache write) ----


def memory_dce_facts(program, enc, glob: list, per_key: dict) -> None:
    layout_cache_facts(program, enc, glob, per_key)  # issue 4A (layouts and cache write)
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
    ws = [{eq.lhs.name for _, eq in _equations(n, ())} for n in body]
    reads_later = [set() for _ in body]
    acc: set = set()
    for i in range(len(body) - 1, -1, -1):
        reads_later[i] = set(acc)
        acc |= {r.name for _, eq in _equations(body[i], ()) for r in
                list(refs(eq.rhs)) + [r for x in eq.lhs.index for r in refs(x)]}
    dead_at: dict[int, bool] = {}
    for i, n in enumerate(body):
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
        from .facts_tensor import _in_bounds  # over the whole loop box (facts_tensor imports this module)
        box = {l.var: (0, l.extent - 1) for l in n.loops}
        shapes = {b.name: b.shape for b in info.buffers.values()}
        for name in sorted({r.name for r in reads}):
            if name == eq.lhs.name or name in in_index:
                continue
            # the copy runs outside every guard: a guarded (padded) read X_{c-1} under
            # 1<=c<n+1 would be copied, and the copy written, at c-1 = -1
            if not all(_in_bounds(r, box, shapes) for r in reads if r.name == name):
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
    glob.extend(("InexactOK", name) for name in inexact_ok(program))
    for key, node in enc.orig.items():
        if isinstance(node, Nest) and key in enc.item_paths:
            for v in table_vars(node):
                per_key.setdefault(key, set()).add(("TableVar", v))
    # ---- issue 4 (operator/attention InexactOK guard): (InexactWrites s) ----
    inexact = set(inexact_ok(program))
    for key, node in enc.orig.items():
        if isinstance(node, Nest) and key in enc.item_paths and \
                all(eq.lhs.name in inexact for _, eq in _equations(node, ())):
            per_key.setdefault(key, set()).add(("InexactWrites",))
    # ---- end issue 4 ----


def table_vars(nest: Nest) -> list[str]:
    """(TableVar s u): loop u of nest s may index through a precomputed i64 table
    (precompute_indices). The analysis cannot see through a table value, so u must occur in
    no if_then_else of s (its condition would refine the range of an index built from u:
    padded reads c-1 under 1<=c<n+1) and in no index of a read of a tensor s writes at
    another index (a recurrence F_{c-1}, whose order the analysis must see). Sorted."""
    eqs = [eq for _, eq in _equations(nest, ())]
    written: dict[str, set] = {}
    for eq in eqs:
        written.setdefault(eq.lhs.name, set()).add(eq.lhs.index)
    blocked: set[str] = set()
    for eq in eqs:
        for node in [eq.rhs, *eq.lhs.index]:
            for n in walk(node):
                if isinstance(n, Call) and n.func == "if_then_else":
                    blocked |= all_vars(n)
                elif isinstance(n, Ref) and n.name in written and n.index not in written[n.name]:
                    blocked |= {v for i in n.index for v in all_vars(i)}
    return sorted(l.var for l in nest.loops if l.var not in blocked)


FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")


def exact_uses(program) -> set[str]:
    """Tensors whose values flow, through def-use, into an exact use: a comparison operand,
    an index, or the right-hand side of an equation with a non-floating-point result.

    Rounding such a value can flip a comparison (argmax: A >= max(A) holds only for the
    element the max was taken from, bit for bit) or an integer result, so the change is
    not bounded by any tolerance."""
    info = program.info
    eqs = [eq for _, eq in equations(program.body)]
    exact: set[str] = set()
    for eq in eqs:
        for node in [eq.rhs, *eq.lhs.index]:
            for n in walk(node):
                if isinstance(n, Compare):
                    exact |= {r.name for r in refs(n)}
                elif isinstance(n, Ref):
                    exact |= {r.name for i in n.index for r in refs(i)}
        exact |= {r.name for i in eq.lhs.index for r in refs(i)}
        if info.buffers[eq.lhs.name].dtype not in FLOAT_DTYPES:
            exact |= {r.name for r in refs(eq.rhs)}
    grown = True
    while grown:  # backward closure: whatever a statement writing an exact tensor reads
        grown = False
        for eq in eqs:
            if eq.lhs.name in exact:
                new = {r.name for r in refs(eq.rhs)} - exact
                if new:
                    exact |= new
                    grown = True
    return exact


def inexact_ok(program) -> list[str]:
    """(InexactOK X): floating-point tensors none of whose values reach an exact use
    (``exact_uses``), so a reassociating rewrite of an equation writing X changes outputs by
    rounding only. Sorted."""
    exact = exact_uses(program)
    return sorted(name for name, buf in program.info.buffers.items()
                  if buf.dtype in FLOAT_DTYPES and name not in exact)


# ------------------------------------------------------------------ S35: partially_equivalent_then_correct
# Fact for rules/partial.egg (declared in the "S35" section of rules/leir.egg).
from .ast import Compare, transform  # noqa: E402  (S35 section only)


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


def partial_facts(program, enc, pair: list) -> None:
    """(PadConv s0 s1 v c lo n cut) for adjacent top-level s0 (padding along v) and s1 (sliding
    window along c over s0's output): see the S35 section of rules/leir.egg."""
    body = program.body
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
