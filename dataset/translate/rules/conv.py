"""Convolutions 1-3-D: stride, padding, dilation, groups (depthwise included), transposed.

Form (leir.md A.4, Appendix B (d)): an optional padding statement
``P=if_then_else(p<=c<p+H&…, x_{…,c-p,…}, 0)`` over the padded shape, then
``O=O+W_{a,f,g,h}*X_{tx,f,c*s+g*d,…}`` over (batch, out-channel, out-spatial…, in-channel,
kernel…). A transposed convolution first writes the zero-stuffed, padded input and then runs
the direct convolution with the flipped kernel.
"""
from __future__ import annotations

from engine.leir.ast import BinOp

from ..emitter import TensorVal
from ..expr import E, between, conj, iadd, imul, isub, ite, lit
from ..registry import rule


def _tuple(v, n: int):
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def _channel(oc, f, groups: int, opg: int, cpg: int):
    if groups == 1:
        return f
    if cpg == 1 and opg == 1:
        return oc
    grp = oc if opg == 1 else BinOp("//", oc, lit(opg))
    return iadd(imul(grp, cpg), f)


def _pad_input(ctx, x: TensorVal, lo, hi, fill):
    """``x`` padded by ``lo``/``hi`` per spatial dim, or ``x`` itself when there is no padding."""
    if not any(lo) and not any(hi):
        return x
    nd = x.rank - 2
    shape = list(x.shape[:2]) + [x.shape[2 + i] + lo[i] + hi[i] for i in range(nd)]
    p = ctx.temp(shape, x.dtype)
    vs, loops = ctx.em.loops(shape, 0)
    conds = [between(lo[i], vs[2 + i], lo[i] + x.shape[2 + i]) for i in range(nd) if lo[i] or hi[i]]
    src = x(*(vs[:2] + [isub(vs[2 + i], lo[i]) for i in range(nd)]))
    ctx.em.stmt(loops, (p(*vs), ite(conj(conds), src, fill)))
    return p


def emit_conv(ctx, x: TensorVal, w: TensorVal, bias, stride, lo, hi, dilation, groups: int,
              out: TensorVal, flip: bool = False, transposed_weight: bool = False):
    nd = x.rank - 2
    p = _pad_input(ctx, x, lo, hi, 0)
    if transposed_weight:
        cpg, opg = w.shape[0] // groups, w.shape[1]
    else:
        cpg, opg = w.shape[1], w.shape[0] // groups
    ks = list(w.shape[2:])
    extents = list(out.shape) + [cpg] + ks
    vs, loops = ctx.em.loops(extents, 0)
    n, oc = vs[0], vs[1]
    o = vs[2:2 + nd]
    f = vs[2 + nd]
    g = vs[3 + nd:]
    ic = _channel(oc, f, groups, opg, cpg)
    sp = [iadd(imul(o[i], stride[i]), imul(g[i], dilation[i])) for i in range(nd)]
    kidx = [BinOp("-", lit(ks[i] - 1), g[i]) if flip else g[i] for i in range(nd)]
    if transposed_weight:
        woc = oc if groups == 1 else (lit(0) if opg == 1 else BinOp("%", oc, lit(opg)))
        wref = w(ic, woc, *kidx)
    else:
        wref = w(oc, f, *kidx)
    xref = p(n, ic, *sp)
    lhs = out(*vs[:2 + nd])
    prod = wref * xref if p is x else xref * wref
    ctx.em.stmt(loops, (lhs, lhs + prod))
    if bias is not None:
        bvs, bl = ctx.em.loops(out.shape, 0)
        ctx.em.stmt(bl, (out(*bvs), out(*bvs) + bias(bvs[1])))
    return out


def _direct(ctx, x, w, bias, stride, padding, dilation, groups):
    nd = x.rank - 2
    if x.rank < 3:
        raise ctx.unsupported("unbatched convolution input")
    stride, dilation = _tuple(stride, nd), _tuple(dilation, nd)
    if isinstance(padding, str):
        if padding == "valid":
            lo = hi = [0] * nd
        elif padding == "same":
            total = [dilation[i] * (w.shape[2 + i] - 1) for i in range(nd)]
            lo = [t // 2 for t in total]
            hi = [t - t // 2 for t in total]
        else:
            raise ctx.unsupported(f"padding={padding!r}")
    else:
        lo = hi = _tuple(padding, nd)
    return emit_conv(ctx, x, w, bias, stride, lo, hi, dilation, groups, ctx.out)


def _transposed(ctx, x, w, bias, stride, padding, output_padding, groups, dilation):
    nd = x.rank - 2
    stride, padding = _tuple(stride, nd), _tuple(padding, nd)
    output_padding, dilation = _tuple(output_padding, nd), _tuple(dilation, nd)
    out = ctx.out
    ks = list(w.shape[2:])
    # zero-stuffed input placed at offset L = d*(k-1)-p inside a buffer of out + d*(k-1)
    lead = [dilation[i] * (ks[i] - 1) - padding[i] for i in range(nd)]
    shape = list(x.shape[:2]) + [out.shape[2 + i] + dilation[i] * (ks[i] - 1) for i in range(nd)]
    z = ctx.temp(shape, x.dtype)
    vs, loops = ctx.em.loops(shape, 0)
    conds, src = [], list(vs[:2])
    for i in range(nd):
        y = vs[2 + i]
        rel = isub(y, lead[i])
        conds.append(between(lead[i], y, lead[i] + (x.shape[2 + i] - 1) * stride[i] + 1))
        if stride[i] > 1:
            conds.append(E(BinOp("%", rel, lit(stride[i]))).eq(0))
            src.append(BinOp("//", rel, lit(stride[i])))
        else:
            src.append(rel)
    ctx.em.stmt(loops, (z(*vs), ite(conj(conds), x(*src), 0)))
    return emit_conv(ctx, z, w, bias, [1] * nd, [0] * nd, [0] * nd, dilation, groups, out,
                     flip=True, transposed_weight=True)


@rule("conv1d", "conv2d", "conv3d")
def _conv(ctx):
    x, w = ctx.tensor(0), ctx.tensor(1)
    return _direct(ctx, x, w, ctx.arg(2), ctx.arg(3, 1), ctx.arg(4, 0), ctx.arg(5, 1), int(ctx.arg(6, 1)))


@rule("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
def _conv_transpose(ctx):
    x, w = ctx.tensor(0), ctx.tensor(1)
    return _transposed(ctx, x, w, ctx.arg(2), ctx.arg(3, 1), ctx.arg(4, 0), ctx.arg(5, 0),
                       int(ctx.arg(6, 1)), ctx.arg(7, 1))


@rule("convolution", "_convolution")
def _convolution(ctx):
    x, w = ctx.tensor(0), ctx.tensor(1)
    bias, stride, padding, dilation = ctx.arg(2), ctx.arg(3), ctx.arg(4), ctx.arg(5)
    transposed, output_padding, groups = ctx.arg(6), ctx.arg(7), int(ctx.arg(8))
    if transposed:
        return _transposed(ctx, x, w, bias, stride, padding, output_padding, groups, dilation)
    return _direct(ctx, x, w, bias, stride, padding, dilation, groups)
