"""Reductions over dimensions, arg-extrema, norms, variance, scans and (log-)softmax.

A reduction loops over the input's full shape in dimension order and writes the kept
dimensions (index 0 at a reduced position under keepdim); the initialisation is implicit
(``X=X+…`` gives 0, ``max(X,…)`` gives -inf, …). ``tx`` binds the first kept dimension.
Decisions: argmax/argmin return the first extremum (as torch does) and logsumexp is
max-stabilised (leir.md A.4).
"""
from __future__ import annotations

from ..emitter import TensorVal
from ..expr import E, exp, fabs, ite, lit, log, sqrt, vmax, vmin
from ..registry import rule
from .common import norm_dim, norm_dims


def _bind(rank: int, dims: list[int]) -> int:
    kept = [i for i in range(rank) if i not in dims]
    return kept[0] if kept else 0


def kept_index(vs, rank: int, dims: list[int], keepdim: bool):
    out = []
    for i in range(rank):
        if i in dims:
            if keepdim:
                out.append(lit(0))
        else:
            out.append(vs[i])
    return out


def reduce_into(ctx, dst: TensorVal, x: TensorVal, dims, keepdim: bool, combine, body=None, bind=None):
    """``dst = combine(dst, body(x_i))`` over x's full shape (one statement)."""
    vs, loops = ctx.em.loops(x.shape, _bind(x.rank, dims) if bind is None else bind)
    term = x(*vs) if body is None else body(x(*vs), vs)
    lhs = dst(*kept_index(vs, x.rank, dims, keepdim))
    ctx.em.stmt(loops, (lhs, combine(lhs, term)))


def _count(x: TensorVal, dims) -> int:
    n = 1
    for d in dims:
        n *= x.shape[d]
    return n


def _reduced_shape(x: TensorVal, dims, keepdim: bool):
    return tuple(1 if i in dims else s for i, s in enumerate(x.shape) if keepdim or i not in dims)


def _add(a, b): return a + b


def _mul(a, b): return a * b


def _dims_keep(ctx, dim_arg=1, keep_arg=2):
    x = ctx.tensor(0)
    dims = norm_dims(ctx.arg(dim_arg), x.rank)
    keep = bool(ctx.arg(keep_arg, False))
    return x, dims, keep


@rule("sum")
def _sum(ctx):
    x, dims, keep = _dims_keep(ctx)
    if x.rank == 0:
        ctx.em.map(ctx.out, lambda vs: x())
        return ctx.out
    reduce_into(ctx, ctx.out, x, dims, keep, _add)
    return ctx.out


@rule("mean")
def _mean(ctx):
    x, dims, keep = _dims_keep(ctx)
    out = ctx.out
    t = ctx.temp(_reduced_shape(x, dims, keep))
    reduce_into(ctx, t, x, dims, keep, _add)
    n = _count(x, dims)
    ctx.em.map(out, lambda vs: t(*vs) / n)
    return out


def _reduce_rule(combine):
    """A reduction straight into the output with ``combine`` (no temporary needed)."""
    def fn(ctx):
        x, dims, keep = _dims_keep(ctx)
        reduce_into(ctx, ctx.out, x, dims, keep, combine)
        return ctx.out
    return fn


# ATen op packet -> combiner, for reductions that write the output directly
for _name, _combine in (("prod", _mul), ("amax", vmax), ("amin", vmin)):
    rule(_name)(_reduce_rule(_combine))


def _arg_extremum(ctx, x: TensorVal, dims, keep, out_idx: TensorVal, ext: TensorVal, is_max: bool):
    """``ext`` = the extremum, ``out_idx`` = the index of its first occurrence."""
    reduce_into(ctx, ext, x, dims, keep, vmax if is_max else vmin)
    count = _count(x, dims)
    # position along the reduced dims, row-major (a single dim for argmax(dim=k))
    ctx.em.map(out_idx, lambda vs: E(lit(count)))
    vs, loops = ctx.em.loops(x.shape, _bind(x.rank, dims))
    pos, stride = lit(0), 1
    from ..expr import iadd, imul
    for d in reversed(dims):
        pos = iadd(imul(vs[d], stride), pos)
        stride *= x.shape[d]
    lhs = out_idx(*kept_index(vs, x.rank, dims, keep))
    exti = ext(*kept_index(vs, x.rank, dims, keep))
    ctx.em.stmt(loops, (lhs, vmin(lhs, ite(x(*vs).eq(exti), pos, count))))


def _argmaxmin(ctx, is_max: bool):
    x = ctx.tensor(0)
    dim = ctx.arg(1)
    keep = bool(ctx.arg(2, False))
    dims = list(range(x.rank)) if dim is None else [norm_dim(dim, x.rank)]
    ext = ctx.temp(_reduced_shape(x, dims, keep), x.dtype)
    _arg_extremum(ctx, x, dims, keep, ctx.out, ext, is_max)
    return ctx.out


@rule("argmax")
def _argmax(ctx): return _argmaxmin(ctx, True)


@rule("argmin")
def _argmin(ctx): return _argmaxmin(ctx, False)


def _max_min(ctx, is_max: bool):
    overload = ctx.node.target._overloadname
    if overload in ("other", "out") or (len(ctx.node.args) > 1 and isinstance(ctx.arg(1), TensorVal)):
        a, b = ctx.tensor(0), ctx.tensor(1)
        from .common import operand
        out = ctx.out
        f = vmax if is_max else vmin
        ctx.em.map(out, lambda vs: f(operand(a, vs, out.shape), operand(b, vs, out.shape)))
        return out
    x = ctx.tensor(0)
    if overload == "default":
        reduce_into(ctx, ctx.out, x, list(range(x.rank)), False, vmax if is_max else vmin)
        return ctx.out
    dims = [norm_dim(ctx.arg(1), x.rank)]
    keep = bool(ctx.arg(2, False))
    shape = _reduced_shape(x, dims, keep)
    users = {u.args[1] for u in ctx.node.users if len(u.args) > 1}
    values = TensorVal(ctx.out_name, x.dtype, shape)
    indices = TensorVal(ctx.em.fresh_name(), "i64", shape) if 1 in users else None
    if indices is not None:
        _arg_extremum(ctx, x, dims, keep, indices, values, is_max)
    else:
        reduce_into(ctx, values, x, dims, keep, vmax if is_max else vmin)
    return (values, indices)


@rule("max")
def _max(ctx): return _max_min(ctx, True)


@rule("min")
def _min(ctx): return _max_min(ctx, False)


@rule("logsumexp")
def _logsumexp(ctx):
    x, dims, keep = _dims_keep(ctx)
    out = ctx.out
    shape = _reduced_shape(x, dims, keep)
    m = ctx.temp(shape)
    s = ctx.temp(shape)
    reduce_into(ctx, m, x, dims, keep, vmax)
    reduce_into(ctx, s, x, dims, keep, _add,
                body=lambda xv, vs: exp(xv - m(*kept_index(vs, x.rank, dims, keep))))
    ctx.em.map(out, lambda vs: m(*vs) + log(s(*vs)))
    return out


def emit_norm(ctx, x: TensorVal, p, dims, keep, out: TensorVal):
    if p in (float("inf"),):
        reduce_into(ctx, out, x, dims, keep, vmax, body=lambda xv, vs: fabs(xv))
        return out
    if p in (float("-inf"),):
        reduce_into(ctx, out, x, dims, keep, vmin, body=lambda xv, vs: fabs(xv))
        return out
    if p == 1:
        reduce_into(ctx, out, x, dims, keep, _add, body=lambda xv, vs: fabs(xv))
        return out
    if p == 0:
        raise ctx.unsupported("the 0-norm")
    t = ctx.temp(out.shape)
    if p == 2:
        reduce_into(ctx, t, x, dims, keep, _add, body=lambda xv, vs: xv ** 2)
        ctx.em.map(out, lambda vs: sqrt(t(*vs)))
    else:
        reduce_into(ctx, t, x, dims, keep, _add, body=lambda xv, vs: fabs(xv) ** p)
        ctx.em.map(out, lambda vs: t(*vs) ** (1.0 / p))
    return out


@rule("linalg_vector_norm")
def _vector_norm(ctx):
    x = ctx.tensor(0)
    p = ctx.arg(1, 2)
    dims = norm_dims(ctx.arg(2), x.rank)
    keep = bool(ctx.arg(3, False))
    return emit_norm(ctx, x, p, dims, keep, ctx.out)


@rule("norm", "frobenius_norm")
def _norm(ctx):
    x = ctx.tensor(0)
    name = ctx.node.target._overloadpacket.__name__
    if name == "frobenius_norm":
        p, dims, keep = 2, norm_dims(ctx.arg(1), x.rank), bool(ctx.arg(2, False))
    else:
        p = ctx.arg(1, 2)
        p = 2 if p in (None, "fro") else p
        dims = norm_dims(ctx.arg(2) if len(ctx.node.args) > 2 else ctx.kwarg("dim"), x.rank)
        keep = bool(ctx.arg(3, False) if len(ctx.node.args) > 3 else ctx.kwarg("keepdim", False))
    if isinstance(p, str):
        raise ctx.unsupported(f"norm p={p!r}")
    return emit_norm(ctx, x, p, dims, keep, ctx.out)


def _var_std(ctx, is_std: bool):
    x = ctx.tensor(0)
    overload = ctx.node.target._overloadname
    dims = norm_dims(ctx.arg(1) if len(ctx.node.args) > 1 else ctx.kwarg("dim"), x.rank)
    keep = bool(ctx.kwarg("keepdim", False))
    corr = ctx.kwarg("correction", None)
    if overload in ("dim", "default") and corr is None:
        unbiased = ctx.kwarg("unbiased", True)
        corr = 1 if unbiased else 0
    if corr is None:
        corr = 1
    out = ctx.out
    shape = _reduced_shape(x, dims, keep)
    s = ctx.temp(shape)
    m = ctx.temp(shape)
    q = ctx.temp(shape)
    n = _count(x, dims)
    reduce_into(ctx, s, x, dims, keep, _add)
    ctx.em.map(m, lambda vs: s(*vs) / n)
    reduce_into(ctx, q, x, dims, keep, _add,
                body=lambda xv, vs: (xv - m(*kept_index(vs, x.rank, dims, keep))) ** 2)
    denom = n - corr
    if is_std:
        ctx.em.map(out, lambda vs: sqrt(q(*vs) / denom))
    else:
        ctx.em.map(out, lambda vs: q(*vs) / denom)
    return out


@rule("var")
def _var(ctx): return _var_std(ctx, False)


@rule("std")
def _std(ctx): return _var_std(ctx, True)


def _scan(ctx, is_sum: bool):
    x = ctx.tensor(0)
    d = norm_dim(ctx.arg(1), x.rank)
    out = ctx.out
    vs, loops = ctx.em.loops(list(x.shape) + [x.shape[d]], 0)
    r = vs[-1]
    idx = list(vs[:x.rank])
    xi = list(idx)
    xi[d] = r
    lhs = out(*idx)
    term = ite(E(r).le(idx[d]), x(*xi), 0 if is_sum else 1)
    ctx.em.stmt(loops, (lhs, lhs + term if is_sum else lhs * term))
    return out


@rule("cumsum")
def _cumsum(ctx): return _scan(ctx, True)


@rule("cumprod")
def _cumprod(ctx): return _scan(ctx, False)


def emit_softmax(ctx, x: TensorVal, d: int, out: TensorVal, log_softmax: bool, bind=None):
    """The reference's three statements: M=max(M,x); S=S+exp(x-M); O=exp(x-M)/S (or x-M-log S)."""
    dims = [d]
    shape = _reduced_shape(x, dims, False)
    m = ctx.em.temp(out.dtype, shape)
    s = ctx.em.temp(out.dtype, shape)
    if bind is None:
        bind = x.rank - 1 if d == 0 else _bind(x.rank, dims)
    reduce_into(ctx, m, x, dims, False, vmax, bind=bind)
    mk = lambda vs: m(*kept_index(vs, x.rank, dims, False))  # noqa: E731
    sk = lambda vs: s(*kept_index(vs, x.rank, dims, False))  # noqa: E731
    reduce_into(ctx, s, x, dims, False, _add, body=lambda xv, vs: exp(xv - mk(vs)), bind=bind)
    vs, loops = ctx.em.loops(x.shape, bind)
    if log_softmax:
        rhs = x(*vs) - mk(vs) - log(sk(vs))
    else:
        rhs = exp(x(*vs) - mk(vs)) / sk(vs)
    ctx.em.stmt(loops, (out(*vs), rhs))
    return out


@rule("softmax", "_softmax", "special_softmax")
def _softmax(ctx):
    x = ctx.tensor(0)
    return emit_softmax(ctx, x, norm_dim(ctx.arg(1), x.rank), ctx.out, False)


@rule("log_softmax", "_log_softmax", "special_log_softmax")
def _log_softmax(ctx):
    x = ctx.tensor(0)
    return emit_softmax(ctx, x, norm_dim(ctx.arg(1), x.rank), ctx.out, True)
