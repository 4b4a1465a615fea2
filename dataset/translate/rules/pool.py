"""Max and average pooling 1-3-D (padding, dilation, ceil mode) and divisible adaptive pooling.

Form (leir.md A.4): an optional padding statement filled with -inf (max) or 0 (average),
then ``O=max(O, P_{…,c*s+f*d,…})`` or a window sum followed by a division by the window
count (a literal when every window has the same count, else min/max of the indices).
"""
from __future__ import annotations

from ..emitter import TensorVal
from ..expr import E, between, conj, iadd, imul, isub, ite, lit, vmax, vmin
from ..registry import rule


def _tuple(v, n: int):
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return None
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def _pad(ctx, x: TensorVal, nd: int, lo, hi, fill):
    if not any(lo) and not any(hi):
        return x
    lead = x.rank - nd
    shape = list(x.shape[:lead]) + [x.shape[lead + i] + lo[i] + hi[i] for i in range(nd)]
    p = ctx.temp(shape, x.dtype)
    vs, loops = ctx.em.loops(shape, 0)
    conds = [between(lo[i], vs[lead + i], lo[i] + x.shape[lead + i]) for i in range(nd) if lo[i] or hi[i]]
    src = x(*(vs[:lead] + [isub(vs[lead + i], lo[i]) for i in range(nd)]))
    ctx.em.stmt(loops, (p(*vs), ite(conj(conds), src, fill)))
    return p


def _params(ctx, nd: int, k, s, p, d, out: TensorVal, x: TensorVal):
    k = _tuple(k, nd)
    s = _tuple(s, nd) or list(k)
    p = _tuple(p, nd) or [0] * nd
    d = _tuple(d, nd) or [1] * nd
    lead = x.rank - nd
    hi = []
    for i in range(nd):
        need = (out.shape[lead + i] - 1) * s[i] + (k[i] - 1) * d[i] + 1
        hi.append(max(need - x.shape[lead + i] - p[i], p[i]) if p[i] else max(need - x.shape[lead + i], 0))
    return k, s, p, d, hi


def _window(ctx, src: TensorVal, dst: TensorVal, nd: int, k, s, d, combine):
    lead = dst.rank - nd
    vs, loops = ctx.em.loops(list(dst.shape) + list(k), 0)
    o, g = vs[:dst.rank], vs[dst.rank:]
    idx = list(o[:lead]) + [iadd(imul(o[lead + i], s[i]), imul(g[i], d[i])) for i in range(nd)]
    lhs = dst(*o)
    ctx.em.stmt(loops, (lhs, combine(lhs, src(*idx))))


def _max_pool(ctx, nd: int):
    x = ctx.tensor(0)
    out = ctx.out if ctx.out is not None else None
    if out is None:  # max_poolNd_with_indices: values only
        raise ctx.unsupported("max pooling with indices")
    k, s, p, d, hi = _params(ctx, nd, ctx.arg(1), ctx.arg(2), ctx.arg(3), ctx.arg(4), out, x)
    src = _pad(ctx, x, nd, p, hi, -float("inf"))
    _window(ctx, src, out, nd, k, s, d, vmax)
    return out


@rule("max_pool1d")
def _mp1(ctx): return _max_pool(ctx, 1)


@rule("max_pool2d")
def _mp2(ctx): return _max_pool(ctx, 2)


@rule("max_pool3d")
def _mp3(ctx): return _max_pool(ctx, 3)


def _avg_pool(ctx, nd: int):
    x = ctx.tensor(0)
    out = ctx.out
    ceil_mode = ctx.arg(4, False)
    include_pad = ctx.arg(5, True)
    divisor = ctx.arg(6) if nd > 1 else None
    k, s, p, d, hi = _params(ctx, nd, ctx.arg(1), ctx.arg(2), ctx.arg(3), 1, out, x)
    del ceil_mode  # the output shape already reflects it
    lead = x.rank - nd
    src = _pad(ctx, x, nd, p, hi, 0)
    total = ctx.temp(out.shape)
    _window(ctx, src, total, nd, k, s, d, lambda a, b: a + b)
    vs, loops = ctx.em.loops(out.shape, 0)
    if divisor:
        count = E(lit(int(divisor)))
    else:
        const, factors = 1, []
        for i in range(nd):
            H = x.shape[lead + i]
            counts = set()
            for o in range(out.shape[lead + i]):
                hs = o * s[i] - p[i]
                he = min(hs + k[i], H + p[i])
                c = he - hs
                if not include_pad:
                    c = min(he, H) - max(hs, 0)
                counts.add(c)
            if len(counts) == 1:
                const *= counts.pop()
                continue
            o = vs[lead + i]
            os_ = E(imul(o, s[i]))
            if include_pad:
                factors.append(vmin(k[i], (H + 2 * p[i]) - os_))
            else:
                start = E(isub(imul(o, s[i]), p[i]))
                factors.append(vmin(start + k[i], H) - vmax(start, 0))
        count = None
        for f in factors:
            count = f if count is None else count * f
        if count is None:
            count = E(lit(const))
        elif const != 1:
            count = count * const
    ctx.em.stmt(loops, (out(*vs), total(*vs) / count))
    return out


@rule("avg_pool1d")
def _ap1(ctx): return _avg_pool(ctx, 1)


@rule("avg_pool2d")
def _ap2(ctx): return _avg_pool(ctx, 2)


@rule("avg_pool3d")
def _ap3(ctx): return _avg_pool(ctx, 3)


def _adaptive(ctx, nd: int, is_max: bool):
    x = ctx.tensor(0)
    out = ctx.out
    if out is None:
        raise ctx.unsupported("adaptive max pooling with indices")
    lead = x.rank - nd
    k = []
    for i in range(nd):
        H, O = x.shape[lead + i], out.shape[lead + i]
        if H % O:
            raise ctx.unsupported(f"adaptive pooling from {H} to {O} (not divisible)")
        k.append(H // O)
    if is_max:
        _window(ctx, x, out, nd, k, k, [1] * nd, vmax)
        return out
    total = ctx.temp(out.shape)
    _window(ctx, x, total, nd, k, k, [1] * nd, lambda a, b: a + b)
    n = 1
    for v in k:
        n *= v
    ctx.em.map(out, lambda vs: total(*vs) / n)
    return out


@rule("adaptive_avg_pool1d")
def _aap1(ctx): return _adaptive(ctx, 1, False)


@rule("adaptive_avg_pool2d", "_adaptive_avg_pool2d")
def _aap2(ctx): return _adaptive(ctx, 2, False)


@rule("adaptive_avg_pool3d", "_adaptive_avg_pool3d")
def _aap3(ctx): return _adaptive(ctx, 3, False)


@rule("adaptive_max_pool1d")
def _amp1(ctx): return _adaptive(ctx, 1, True)
