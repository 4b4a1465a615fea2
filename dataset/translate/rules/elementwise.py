"""Element-wise arithmetic, comparisons, selects and activations (leir.md Appendix A.4).

Closed forms follow the reference translator (relu = max(x,0), sigmoid = 1/(1+exp(-x)),
exact GELU with erf, SELU/ELU/HardSigmoid/HardTanh/HardSwish as written there). Where the
reference form overflows in finite precision we use an equivalent stable form instead:
tanh = 1-2/(exp(2x)+1) (the reference's (e^x-e^-x)/(e^x+e^-x) gives inf/inf = NaN for
|x| > 11 in f16), softplus = max(x,0)+log(1+exp(-|x|)) under torch's threshold.
"""
from __future__ import annotations

import math

from ..emitter import TensorVal
from ..expr import E, erf, exp, fabs, ite, lit, log, sqrt, vmax, vmin
from ..registry import rule
from .common import operand


def _unary(ctx, fn):
    x = ctx.tensor(0)
    out = ctx.out
    ctx.em.map(out, lambda vs: fn(operand(x, vs, out.shape)))
    return out


def _binary(ctx, fn, a, b):
    out = ctx.out
    ctx.em.map(out, lambda vs: fn(operand(a, vs, out.shape), operand(b, vs, out.shape)))
    return out


def _scalar_ok(ctx, v, what="operand"):
    if isinstance(v, (TensorVal, int, float, bool)):
        return v
    raise ctx.unsupported(f"{what} {v!r}")


def tanh_expr(x: E) -> E:
    """tanh(x) without overflow: 1-2/(exp(2x)+1)."""
    return 1 - 2 / (exp(2 * x) + 1)


def softplus_expr(x: E, beta=1, threshold=20) -> E:
    """torch's softplus: x above the threshold, else log(1+exp(beta*x))/beta (stable form)."""
    bx = x if beta == 1 else beta * x
    soft = vmax(bx, 0) + log(1 + exp(-fabs(bx)))
    if beta != 1:
        soft = soft / beta
    return ite(bx.gt(threshold), x, soft)


# ------------------------------------------------------------------ arithmetic

@rule("add")
def _add(ctx):
    a, b = _scalar_ok(ctx, ctx.arg(0)), _scalar_ok(ctx, ctx.arg(1))
    alpha = ctx.kwarg("alpha", 1)
    if alpha != 1:
        return _binary(ctx, lambda x, y: x + alpha * y, a, b)
    return _binary(ctx, lambda x, y: x + y, a, b)


@rule("sub")
def _sub(ctx):
    a, b = _scalar_ok(ctx, ctx.arg(0)), _scalar_ok(ctx, ctx.arg(1))
    alpha = ctx.kwarg("alpha", 1)
    if alpha != 1:
        return _binary(ctx, lambda x, y: x - alpha * y, a, b)
    return _binary(ctx, lambda x, y: x - y, a, b)


@rule("rsub")
def _rsub(ctx):
    a, b = _scalar_ok(ctx, ctx.arg(0)), _scalar_ok(ctx, ctx.arg(1))
    alpha = ctx.kwarg("alpha", 1)
    if alpha != 1:
        return _binary(ctx, lambda x, y: y - alpha * x, a, b)
    return _binary(ctx, lambda x, y: y - x, a, b)


@rule("mul")
def _mul(ctx):
    return _binary(ctx, lambda x, y: x * y, _scalar_ok(ctx, ctx.arg(0)), _scalar_ok(ctx, ctx.arg(1)))


@rule("div")
def _div(ctx):
    mode = ctx.kwarg("rounding_mode", None)
    if mode is not None:
        raise ctx.unsupported(f"rounding_mode={mode!r} (LEIR has no floor/trunc)")
    return _binary(ctx, lambda x, y: x / y, _scalar_ok(ctx, ctx.arg(0)), _scalar_ok(ctx, ctx.arg(1)))


@rule("pow")
def _pow(ctx):
    a, b = _scalar_ok(ctx, ctx.arg(0)), _scalar_ok(ctx, ctx.arg(1))
    if b == 0.5:
        return _binary(ctx, lambda x, y: sqrt(x), a, b)
    return _binary(ctx, lambda x, y: x ** y, a, b)


@rule("maximum", "fmax")
def _maximum(ctx):
    return _binary(ctx, vmax, ctx.tensor(0), ctx.tensor(1))


@rule("minimum", "fmin")
def _minimum(ctx):
    return _binary(ctx, vmin, ctx.tensor(0), ctx.tensor(1))


_CMP = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


@rule(*_CMP)
def _compare(ctx):
    meth = _CMP[ctx.node.target._overloadpacket.__name__]
    a, b = _scalar_ok(ctx, ctx.arg(0)), _scalar_ok(ctx, ctx.arg(1))
    return _binary(ctx, lambda x, y: ite(getattr(x, meth)(y), 1, 0), a, b)


@rule("logical_not", "bitwise_not")
def _not(ctx):
    x = ctx.tensor(0)
    if x.dtype != "bool":
        raise ctx.unsupported("logical_not of a non-bool tensor")
    return _unary(ctx, lambda v: ite(v, 0, 1))


@rule("where")
def _where(ctx):
    c, a, b = ctx.arg(0), _scalar_ok(ctx, ctx.arg(1)), _scalar_ok(ctx, ctx.arg(2))
    out = ctx.out
    ctx.em.map(out, lambda vs: ite(operand(c, vs, out.shape), operand(a, vs, out.shape),
                                   operand(b, vs, out.shape)))
    return out


@rule("masked_fill")
def _masked_fill(ctx):
    x, mask, value = ctx.tensor(0), ctx.tensor(1), _scalar_ok(ctx, ctx.arg(2), "fill value")
    out = ctx.out
    ctx.em.map(out, lambda vs: ite(operand(mask, vs, out.shape), operand(value, vs, out.shape),
                                   operand(x, vs, out.shape)))
    return out


@rule("clamp", "clip")
def _clamp(ctx):
    x, lo, hi = ctx.tensor(0), ctx.arg(1), ctx.arg(2)
    out = ctx.out

    def fn(vs):
        v = operand(x, vs, out.shape)
        if lo is not None:
            v = vmax(v, operand(lo, vs, out.shape))
        if hi is not None:
            v = vmin(v, operand(hi, vs, out.shape))
        return v
    if lo is None and hi is None:
        raise ctx.fail("clamp needs min or max")
    ctx.em.map(out, fn)
    return out


@rule("clamp_min")
def _clamp_min(ctx):
    return _binary(ctx, vmax, ctx.tensor(0), _scalar_ok(ctx, ctx.arg(1)))


@rule("clamp_max")
def _clamp_max(ctx):
    return _binary(ctx, vmin, ctx.tensor(0), _scalar_ok(ctx, ctx.arg(1)))


# ------------------------------------------------------------------ math functions

@rule("neg")
def _neg(ctx): return _unary(ctx, lambda x: -x)


@rule("abs")
def _abs(ctx): return _unary(ctx, fabs)


@rule("exp")
def _exp(ctx): return _unary(ctx, exp)


@rule("expm1")
def _expm1(ctx): return _unary(ctx, lambda x: exp(x) - 1)


@rule("log")
def _log(ctx): return _unary(ctx, log)


@rule("log1p")
def _log1p(ctx): return _unary(ctx, lambda x: log(1 + x))


@rule("log2")
def _log2(ctx): return _unary(ctx, lambda x: log(x) / math.log(2))


@rule("log10")
def _log10(ctx): return _unary(ctx, lambda x: log(x) / math.log(10))


@rule("sqrt")
def _sqrt(ctx): return _unary(ctx, sqrt)


@rule("rsqrt")
def _rsqrt(ctx): return _unary(ctx, lambda x: 1 / sqrt(x))


@rule("reciprocal")
def _reciprocal(ctx): return _unary(ctx, lambda x: 1 / x)


@rule("square")
def _square(ctx): return _unary(ctx, lambda x: x ** 2)


@rule("erf")
def _erf(ctx): return _unary(ctx, erf)


# ------------------------------------------------------------------ activations

@rule("relu")
def _relu(ctx): return _unary(ctx, lambda x: vmax(x, 0))


@rule("relu6")
def _relu6(ctx): return _unary(ctx, lambda x: vmin(vmax(x, 0), 6))


@rule("leaky_relu")
def _leaky_relu(ctx):
    s = ctx.arg(1, 0.01)
    return _unary(ctx, lambda x: ite(x.lt(0), s * x, x))


@rule("sigmoid")
def _sigmoid(ctx): return _unary(ctx, lambda x: 1 / (1 + exp(-x)))


@rule("log_sigmoid", "log_sigmoid_forward")
def _log_sigmoid(ctx): return _unary(ctx, lambda x: -(vmax(-x, 0) + log(1 + exp(-fabs(x)))))


@rule("tanh")
def _tanh(ctx): return _unary(ctx, tanh_expr)


@rule("silu")
def _silu(ctx): return _unary(ctx, lambda x: x / (1 + exp(-x)))


@rule("gelu")
def _gelu(ctx):
    approx = ctx.kwarg("approximate", "none")
    if approx == "none":
        return _unary(ctx, lambda x: x * 0.5 * (1 + erf(x / sqrt(2))))
    x = ctx.tensor(0)
    out = ctx.out
    u = ctx.temp(out.shape)
    ctx.em.map(u, lambda vs: sqrt(0.6366197723675814) * (x(*vs) + 0.044715 * x(*vs) ** 3))
    ctx.em.map(out, lambda vs: x(*vs) * 0.5 * (1 + tanh_expr(u(*vs))))
    return out


@rule("selu")
def _selu(ctx):
    return _unary(ctx, lambda x: 1.0507009873554805 * (vmax(0, x) + vmin(0, 1.6732632423543772 * (exp(x) - 1))))


@rule("elu")
def _elu(ctx):
    alpha, scale, iscale = ctx.arg(1, 1.0), ctx.arg(2, 1), ctx.arg(3, 1)

    def fn(x):
        xi = x if iscale == 1 else iscale * x
        neg = alpha * (exp(xi) - 1)
        pos = x
        if scale != 1:
            neg, pos = scale * neg, scale * x
        return ite(x.lt(0), neg, pos)
    return _unary(ctx, fn)


@rule("celu")
def _celu(ctx):
    alpha = ctx.arg(1, 1.0)
    return _unary(ctx, lambda x: vmax(0, x) + vmin(0, alpha * (exp(x / alpha) - 1)))


@rule("softplus")
def _softplus(ctx):
    beta, threshold = ctx.arg(1, 1), ctx.arg(2, 20)
    return _unary(ctx, lambda x: softplus_expr(x, beta, threshold))


@rule("hardtanh")
def _hardtanh(ctx):
    lo, hi = ctx.arg(1, -1.0), ctx.arg(2, 1.0)
    return _unary(ctx, lambda x: vmin(vmax(x, lo), hi))


@rule("hardsigmoid")
def _hardsigmoid(ctx): return _unary(ctx, lambda x: vmax(0, vmin(1, (x + 3) / 6)))


@rule("hardswish")
def _hardswish(ctx): return _unary(ctx, lambda x: x * vmin(vmax(x + 3, 0), 6) / 6)


@rule("softsign")
def _softsign(ctx): return _unary(ctx, lambda x: x / (1 + fabs(x)))


@rule("mish")
def _mish(ctx):
    x = ctx.tensor(0)
    out = ctx.out
    sp = ctx.temp(out.shape)
    ctx.em.map(sp, lambda vs: softplus_expr(x(*vs)))
    ctx.em.map(out, lambda vs: x(*vs) * tanh_expr(sp(*vs)))
    return out


@rule("fill", "zeros_like", "ones_like", "full_like")
def _fill(ctx):
    name = ctx.node.target._overloadpacket.__name__
    value = {"zeros_like": 0, "ones_like": 1}.get(name)
    if value is None:
        value = ctx.arg(1)
    if not isinstance(value, (int, float, bool)):
        raise ctx.unsupported(f"fill value {value!r}")
    out = ctx.out
    ctx.em.map(out, lambda vs: E(lit(value)))
    return out
