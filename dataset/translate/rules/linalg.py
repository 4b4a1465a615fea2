"""Matrix products (matmul, mm, bmm, linear, addmm, baddbmm, einsum) and diag/triu/tril.

Form (leir.md A.4): one statement ``O_i = O_i + X_{…,r} * Y_{r,…}`` whose loops are the output
dims (the first bound to ``tx``) followed by the contracted dim; batch dims broadcast with
index 0 and trailing alignment. A bias is a second, in-place statement ``O = O + b``.
"""
from __future__ import annotations

from ..emitter import TensorVal
from ..expr import E, iadd, ite, lit
from ..registry import rule
from .common import bidx


def _batch_index(t: TensorVal, nmat: int, vs, out_batch):
    """Subscript for ``t``'s leading (batch) dims, broadcast against ``out_batch``."""
    nb = t.rank - nmat
    if nb <= 0:
        return []
    sub = TensorVal(t.name, t.dtype, t.shape[:nb])
    return bidx(sub, vs[:len(out_batch)], out_batch)


def emit_matmul(ctx, out: TensorVal, a: TensorVal, b: TensorVal, alpha=1):
    """``out = a @ b`` with numpy/torch matmul semantics (1-D operands included)."""
    if a.rank == 0 or b.rank == 0:
        raise ctx.fail("matmul of a 0-d tensor")
    k = a.shape[-1]
    kb = b.shape[0] if b.rank == 1 else b.shape[-2]
    if k != kb:
        raise ctx.fail(f"matmul contraction sizes differ: {a.shape} @ {b.shape}")
    n = out.rank
    vs, loops = ctx.em.loops(list(out.shape) + [k], 0)
    r = vs[n]
    nb = n - (a.rank > 1) - (b.rank > 1)
    out_batch = out.shape[:nb]
    if a.rank == 1:
        ai = [r]
    else:
        row = vs[nb]
        ai = _batch_index(a, 2, vs, out_batch) + [row, r]
    if b.rank == 1:
        bi = [r]
    else:
        col = vs[n - 1]
        bi = _batch_index(b, 2, vs, out_batch) + [r, col]
    prod = a(*ai) * b(*bi)
    if alpha != 1:
        prod = alpha * prod
    ctx.em.stmt(loops, (out(*vs[:n]), out(*vs[:n]) + prod))


def emit_bias(ctx, out: TensorVal, bias, beta=1):
    """In-place ``out = out + beta*bias`` (broadcast)."""
    if bias is None or beta == 0:
        return
    vs, loops = ctx.em.loops(out.shape, 0)
    term = bias(*bidx(bias, vs, out.shape)) if isinstance(bias, TensorVal) else E(lit(bias))
    if beta != 1:
        term = beta * term
    ctx.em.stmt(loops, (out(*vs), out(*vs) + term))


@rule("matmul", "mm", "bmm", "mv", "dot", "vdot", "inner")
def _matmul(ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    emit_matmul(ctx, ctx.out, a, b)
    return ctx.out


@rule("linear")
def _linear(ctx):
    x, w = ctx.tensor(0), ctx.tensor(1)
    bias = ctx.arg(2)
    out = ctx.out
    k = x.shape[-1]
    n = out.rank
    vs, loops = ctx.em.loops(list(out.shape) + [k], 0)
    r = vs[n]
    xi = vs[:n - 1] + [r] if x.rank > 1 else [r]
    wi = [vs[n - 1], r] if w.rank == 2 else [r]
    lhs = out(*vs[:n])
    ctx.em.stmt(loops, (lhs, lhs + x(*xi) * w(*wi)))
    emit_bias(ctx, out, bias)
    return out


@rule("addmm", "baddbmm", "addmv", "addbmm")
def _addmm(ctx):
    bias, a, b = ctx.arg(0), ctx.tensor(1), ctx.tensor(2)
    beta, alpha = ctx.kwarg("beta", 1), ctx.kwarg("alpha", 1)
    if ctx.node.target._overloadpacket.__name__ == "addbmm":
        raise ctx.unsupported("addbmm (sum over the batch)")
    emit_matmul(ctx, ctx.out, a, b, alpha)
    emit_bias(ctx, ctx.out, bias, beta)
    return ctx.out


@rule("einsum")
def _einsum(ctx):
    eq = ctx.arg(0)
    ops = ctx.arg(1)
    if not all(isinstance(t, TensorVal) for t in ops) or len(ops) not in (1, 2):
        raise ctx.unsupported("einsum with other than one or two tensor operands")
    eq = eq.replace(" ", "")
    if "..." in eq:
        raise ctx.unsupported("einsum with '...'")
    lhs, _, rhs = eq.partition("->")
    specs = lhs.split(",")
    if not _:
        counts = {}
        for s in specs:
            for ch in s:
                counts[ch] = counts.get(ch, 0) + 1
        rhs = "".join(sorted(ch for ch, c in counts.items() if c == 1))
    sizes = {}
    for s, t in zip(specs, ops):
        if len(s) != t.rank:
            raise ctx.fail(f"einsum operand '{s}' does not match rank {t.rank}")
        for ch, d in zip(s, t.shape):
            sizes[ch] = max(sizes.get(ch, 1), d)
    contracted = []
    for s in specs:
        for ch in s:
            if ch not in rhs and ch not in contracted:
                contracted.append(ch)
    letters = list(rhs) + contracted
    vs, loops = ctx.em.loops([sizes[c] for c in letters], 0)
    v = dict(zip(letters, vs))
    out = ctx.out
    terms = [t(*[v[ch] if t.shape[i] == sizes[ch] else lit(0) for i, ch in enumerate(s)])
             for s, t in zip(specs, ops)]
    prod = terms[0] if len(terms) == 1 else terms[0] * terms[1]
    lhs_ref = out(*[v[ch] for ch in rhs])
    if contracted:
        ctx.em.stmt(loops, (lhs_ref, lhs_ref + prod))
    else:
        ctx.em.stmt(loops, (lhs_ref, prod))
    return out


@rule("diag", "diag_embed", "diagonal")
def _diag(ctx):
    name = ctx.node.target._overloadpacket.__name__
    x = ctx.tensor(0)
    off = ctx.arg(1, 0) or 0
    out = ctx.out
    if name == "diag" and x.rank == 1:
        if off != 0:
            raise ctx.unsupported("diag of a vector with a nonzero offset")
        ctx.em.map(out, lambda vs: ite(E(vs[1]).eq(vs[0]), x(vs[1]), 0))
        return out
    if name in ("diag", "diagonal") and x.rank == 2:
        if name == "diagonal" and (ctx.arg(2, 0), ctx.arg(3, 1)) not in ((0, 1), (-2, -1)):
            raise ctx.unsupported("diagonal over dims other than the last two")
        if off >= 0:
            ctx.em.map(out, lambda vs: x(vs[0], iadd(vs[0], off)))
        else:
            ctx.em.map(out, lambda vs: x(iadd(vs[0], -off), vs[0]))
        return out
    raise ctx.unsupported(f"{name} of a rank-{x.rank} tensor")


def _tri(ctx, upper: bool):
    x = ctx.tensor(0)
    k = ctx.arg(1, 0) or 0
    out = ctx.out
    if x.rank < 2:
        raise ctx.fail("triu/tril needs at least 2 dims")

    def fn(vs):
        row, col = E(iadd(vs[-2], k)), vs[-1]
        cond = row.le(col) if upper else row.ge(col)
        return ite(cond, x(*vs), 0)
    ctx.em.map(out, fn)
    return out


@rule("triu")
def _triu(ctx): return _tri(ctx, True)


@rule("tril")
def _tril(ctx): return _tri(ctx, False)
