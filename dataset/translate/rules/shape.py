"""Data movement: view/reshape, permute/transpose, expand, slice/select, cat/stack, split, flip.

Every rule is one or more copy statements that differ only in index arithmetic (leir.md
A.4). Reshapes loop over the finer side of each group of merged/split dims, so a split reads
``x_{…,c*16+d}`` and a merge writes ``O_{…,c*16+d}`` as the reference does; transposes loop
over the input and permute the written subscript.
"""
from __future__ import annotations

from engine.leir.ast import BinOp

from ..emitter import TensorVal
from ..expr import between, conj, iadd, imul, isub, ite, linear, lit
from ..registry import StackedPiece, rule
from .common import bidx, norm_dim


def _groups(a, b):
    """Pair up runs of dims of shapes ``a`` and ``b`` with equal products."""
    i = j = 0
    out = []
    while i < len(a) or j < len(b):
        gi, gj, pa, pb = [], [], 1, 1
        if i < len(a):
            gi.append(i); pa *= a[i]; i += 1  # noqa: E702
        if j < len(b):
            gj.append(j); pb *= b[j]; j += 1  # noqa: E702
        while pa != pb:
            if pa < pb and i < len(a):
                gi.append(i); pa *= a[i]; i += 1  # noqa: E702
            elif j < len(b):
                gj.append(j); pb *= b[j]; j += 1  # noqa: E702
            else:
                raise ValueError(f"cannot reshape {a} to {b}")
        out.append((gi, gj))
    return out


def _strides(shape):
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= s
    return st[::-1]


def _delinearize(lin, shape):
    """Subscripts of the row-major position ``lin`` in ``shape``."""
    if len(shape) == 1:
        return [lin]
    out = []
    for k, st in enumerate(_strides(shape)):
        e = lin if st == 1 else BinOp("//", lin, lit(st))
        if k > 0:
            e = BinOp("%", e, lit(shape[k]))
        out.append(e)
    return out


def emit_reshape(ctx, x: TensorVal, out: TensorVal):
    groups = _groups(list(x.shape), list(out.shape))
    extents, plan = [], []
    for gi, gj in groups:
        loop_in = len(gi) > len(gj)
        side = gi if loop_in else gj
        shape = [(x.shape if loop_in else out.shape)[d] for d in side]
        plan.append((gi, gj, loop_in, len(extents), shape))
        extents += shape
    vs, loops = ctx.em.loops(extents, 0)
    in_idx, out_idx = [], []
    for gi, gj, loop_in, start, shape in plan:
        lv = vs[start:start + len(shape)]
        lin = linear(zip(lv, _strides(shape)))
        if loop_in:
            in_idx += lv
            other = [out.shape[d] for d in gj]
            out_idx += _delinearize(lin, other) if other else []
        else:
            out_idx += lv
            other = [x.shape[d] for d in gi]
            in_idx += _delinearize(lin, other) if other else []
    ctx.em.stmt(loops, (out(*out_idx), x(*in_idx)))
    return out


@rule("view", "reshape", "_unsafe_view", "flatten", "unflatten", "squeeze", "unsqueeze", "view_as",
      "reshape_as", "_reshape_alias", "ravel", "view_copy", "squeeze_copy", "unsqueeze_copy")
def _reshape(ctx):
    return emit_reshape(ctx, ctx.tensor(0), ctx.out)


def emit_permute(ctx, x: TensorVal, perm, out: TensorVal):
    vs, loops = ctx.em.loops(x.shape, 0)
    ctx.em.stmt(loops, (out(*[vs[p] for p in perm]), x(*vs)))
    return out


@rule("permute", "permute_copy")
def _permute(ctx):
    x = ctx.tensor(0)
    return emit_permute(ctx, x, [norm_dim(d, x.rank) for d in ctx.arg(1)], ctx.out)


@rule("transpose", "swapaxes", "swapdims", "transpose_copy")
def _transpose(ctx):
    x = ctx.tensor(0)
    d0, d1 = norm_dim(ctx.arg(1), x.rank), norm_dim(ctx.arg(2), x.rank)
    perm = list(range(x.rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return emit_permute(ctx, x, perm, ctx.out)


@rule("t", "numpy_T", "mT", "adjoint")
def _t(ctx):
    x = ctx.tensor(0)
    perm = list(range(x.rank))
    if x.rank >= 2:
        perm[-1], perm[-2] = perm[-2], perm[-1]
    return emit_permute(ctx, x, perm, ctx.out)


@rule("expand", "broadcast_to", "expand_copy")
def _expand(ctx):
    x, out = ctx.tensor(0), ctx.out
    ctx.em.map(out, lambda vs: x(*bidx(x, vs, out.shape)))
    return out


@rule("slice", "narrow", "slice_copy")
def _slice(ctx):
    x, out = ctx.tensor(0), ctx.out
    name = ctx.node.target._overloadpacket.__name__
    d = norm_dim(ctx.arg(1, 0), x.rank)
    if name == "narrow":
        start, step = ctx.arg(2), 1
    else:
        start, step = ctx.arg(2) or 0, ctx.arg(4, 1) or 1
    if start < 0:
        start += x.shape[d]
    start = max(0, min(start, x.shape[d]))

    def fn(vs):
        idx = list(vs)
        idx[d] = iadd(imul(vs[d], step), start)
        return x(*idx)
    ctx.em.map(out, fn)
    return out


@rule("select", "select_copy")
def _select(ctx):
    x, out = ctx.tensor(0), ctx.out
    d = norm_dim(ctx.arg(1), x.rank)
    k = ctx.arg(2)
    k = k + x.shape[d] if k < 0 else k
    ctx.em.map(out, lambda vs: x(*(list(vs[:d]) + [lit(k)] + list(vs[d:]))))
    return out


@rule("cat", "concat", "concatenate")
def _cat(ctx):
    ts = [t for t in ctx.arg(0) if isinstance(t, TensorVal) and 0 not in t.shape]
    out = ctx.out
    d = norm_dim(ctx.arg(1, 0), out.rank)
    off = 0
    for t in ts:
        vs, loops = ctx.em.loops(t.shape, 0)
        idx = list(vs)
        idx[d] = iadd(vs[d], off)
        ctx.em.stmt(loops, (out(*idx), t(*vs)))
        off += t.shape[d]
    return out


@rule("stack")
def _stack(ctx):
    ts = list(ctx.arg(0))
    out = ctx.out
    d = norm_dim(ctx.arg(1, 0), out.rank)
    for k, t in enumerate(ts):
        vs, loops = ctx.em.loops(t.shape, 0)
        ctx.em.stmt(loops, (out(*(list(vs[:d]) + [lit(k)] + list(vs[d:]))), t(*vs)))
    return out


def _split_sizes(ctx, x: TensorVal, name: str):
    if name == "unbind":
        d = norm_dim(ctx.arg(1, 0), x.rank)
        return d, None
    if name == "chunk":
        n, d = ctx.arg(1), norm_dim(ctx.arg(2, 0), x.rank)
        size = -(-x.shape[d] // n)
        sizes = [min(size, x.shape[d] - i) for i in range(0, x.shape[d], size)]
        return d, sizes
    if name == "tensor_split":
        raise ctx.unsupported("tensor_split")
    spec, d = ctx.arg(1), norm_dim(ctx.arg(2, 0), x.rank)
    if isinstance(spec, int):
        sizes = [min(spec, x.shape[d] - i) for i in range(0, x.shape[d], spec)]
    else:
        sizes = list(spec)
    return d, sizes


@rule("split", "split_with_sizes", "chunk", "unbind")
def _split(ctx):
    x = ctx.tensor(0)
    name = ctx.node.target._overloadpacket.__name__
    d, sizes = _split_sizes(ctx, x, name)
    if sizes is None:  # unbind: pieces drop the dim
        piece = tuple(s for i, s in enumerate(x.shape) if i != d)
        n = x.shape[d]
        base = TensorVal(ctx.out_name, x.dtype, (n,) + piece)
        for k in range(n):
            vs, loops = ctx.em.loops(piece, 0)
            ctx.em.stmt(loops, (base(lit(k), *vs), x(*(list(vs[:d]) + [lit(k)] + list(vs[d:])))))
        return tuple(StackedPiece(base, k) for k in range(n))
    if len(set(sizes)) == 1:  # the reference's stacked form D_{k,…}
        piece = tuple(sizes[0] if i == d else s for i, s in enumerate(x.shape))
        base = TensorVal(ctx.out_name, x.dtype, (len(sizes),) + piece)
        for k in range(len(sizes)):
            vs, loops = ctx.em.loops(piece, 0)
            idx = list(vs)
            idx[d] = iadd(vs[d], k * sizes[0])
            ctx.em.stmt(loops, (base(lit(k), *vs), x(*idx)))
        return tuple(StackedPiece(base, k) for k in range(len(sizes)))
    pieces, off = [], 0
    for s in sizes:
        shape = tuple(s if i == d else e for i, e in enumerate(x.shape))
        t = ctx.temp(shape, x.dtype)
        vs, loops = ctx.em.loops(shape, 0)
        idx = list(vs)
        idx[d] = iadd(vs[d], off)
        ctx.em.stmt(loops, (t(*vs), x(*idx)))
        pieces.append(t)
        off += s
    return tuple(pieces)


@rule("flip")
def _flip(ctx):
    x, out = ctx.tensor(0), ctx.out
    dims = [norm_dim(d, x.rank) for d in ctx.arg(1)]

    def fn(vs):
        idx = list(vs)
        for d in dims:
            idx[d] = BinOp("-", lit(x.shape[d] - 1), vs[d])
        return x(*idx)
    ctx.em.map(out, fn)
    return out


@rule("repeat", "tile")
def _repeat(ctx):
    x, out = ctx.tensor(0), ctx.out
    off = out.rank - x.rank

    def fn(vs):
        idx = []
        for j, s in enumerate(x.shape):
            v = vs[off + j]
            idx.append(lit(0) if s == 1 else (v if out.shape[off + j] == s else BinOp("%", v, lit(s))))
        return x(*idx)
    ctx.em.map(out, fn)
    return out


@rule("constant_pad_nd", "pad")
def _pad(ctx):
    x, out = ctx.tensor(0), ctx.out
    pad = list(ctx.arg(1))
    value = ctx.arg(2, 0) or 0
    name = ctx.node.target._overloadpacket.__name__
    if name == "pad" and ctx.arg(2, "constant") not in ("constant", None):
        raise ctx.unsupported(f"pad mode {ctx.arg(2)!r}")
    if name == "pad":
        value = ctx.arg(3, 0) or 0
    if any(p < 0 for p in pad):
        raise ctx.unsupported("negative padding")
    lo = [0] * x.rank
    for i in range(len(pad) // 2):
        lo[x.rank - 1 - i] = pad[2 * i]
    vs, loops = ctx.em.loops(out.shape, 0)
    conds = [between(lo[d], vs[d], lo[d] + x.shape[d]) for d in range(x.rank) if out.shape[d] != x.shape[d]
             or lo[d]]
    src = x(*[isub(vs[d], lo[d]) for d in range(x.rank)])
    ctx.em.stmt(loops, (out(*vs), ite(conj(conds), src, value) if conds else src))
    return out


@rule("index_select")
def _index_select(ctx):
    x, out = ctx.tensor(0), ctx.out
    d = norm_dim(ctx.arg(1), x.rank)
    index = ctx.tensor(2)

    def fn(vs):
        idx = list(vs)
        idx[d] = index(vs[d]).node
        return x(*idx)
    ctx.em.map(out, fn)
    return out


@rule("gather")
def _gather(ctx):
    x, out = ctx.tensor(0), ctx.out
    d = norm_dim(ctx.arg(1), x.rank)
    index = ctx.tensor(2)

    def fn(vs):
        idx = list(vs)
        idx[d] = index(*vs).node
        return x(*idx)
    ctx.em.map(out, fn)
    return out


@rule("broadcast_tensors")
def _broadcast_tensors(ctx):
    ts = list(ctx.arg(0))
    shapes = [tuple(t.shape) for t in ts]
    rank = max(len(s) for s in shapes)
    target = []
    for k in range(rank):
        dims = [s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0]
        target.append(max(dims))
    target = tuple(target)
    out = []
    for t in ts:
        if tuple(t.shape) == target:
            out.append(t)
            continue
        e = ctx.temp(target, t.dtype)
        ctx.em.map(e, lambda vs, t=t: t(*bidx(t, vs, target)))
        out.append(e)
    return tuple(out)
