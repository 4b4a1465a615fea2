"""Batch, layer, group, instance and RMS normalisation (leir.md A.4 and Appendix B (c)).

Layer/group/instance norm use the reference's six statements: sum → mean → squared-difference
sum → variance → normalise → affine. Training-mode batch norm computes batch statistics over
every dim but the channel (``tx`` bound to the channel), then normalises with ``tx`` on the
last dim, as the reference does; eval-mode batch norm reads the running statistics.
"""
from __future__ import annotations

from ..emitter import TensorVal
from ..expr import E, iadd, imul, sqrt
from ..registry import rule


def _stats(ctx, x_ref, loops, stat_ref, count: int, dtype: str, stat_shape, stat_loops_fn, bind_stats):
    """Emit mean and biased variance; returns (mean, var) temps."""
    em = ctx.em
    s = em.temp(dtype, stat_shape)
    mean = em.temp(dtype, stat_shape)
    q = em.temp(dtype, stat_shape)
    var = em.temp(dtype, stat_shape)
    vs, lp = loops()
    em.stmt(lp, (stat_ref(s, vs), stat_ref(s, vs) + x_ref(vs)))
    svs, slp = stat_loops_fn()
    em.stmt(slp, (s_at(mean, svs), s_at(s, svs) / count))
    vs, lp = loops()
    em.stmt(lp, (stat_ref(q, vs), stat_ref(q, vs) + (x_ref(vs) - stat_ref(mean, vs)) ** 2))
    svs, slp = stat_loops_fn()
    em.stmt(slp, (s_at(var, svs), s_at(q, svs) / count))
    return mean, var


def s_at(t: TensorVal, svs):
    return t(*svs)


def _affine(ctx, out, j, w, b, vs, loops, widx):
    """``out = w*J + b`` (the parts that exist)."""
    rhs = j(*vs) if isinstance(j, TensorVal) else j
    if w is not None:
        rhs = w(*widx) * rhs
    if b is not None:
        rhs = rhs + b(*widx)
    ctx.em.stmt(loops, (out(*vs), rhs))


def _normalize_group(ctx, x: TensorVal, out: TensorVal, n_stat: int, w, b, eps, widx_fn, xidx_fn,
                     extents, stat_dims: int):
    """Shared body for layer/group/instance norm.

    ``extents``: loop extents; the first ``stat_dims`` loops index the statistics;
    ``xidx_fn(vs)`` maps loop vars to x's (and the output's) subscript; ``widx_fn(vs)`` to the
    affine parameters' subscript.
    """
    em = ctx.em
    dt = out.dtype
    stat_shape = tuple(extents[:stat_dims])
    count = 1
    for e in extents[stat_dims:]:
        count *= e

    def loops():
        return em.loops(extents, 0)

    def stat_loops():
        return em.loops(stat_shape, 0)

    stat_ref = lambda t, vs: t(*vs[:stat_dims])  # noqa: E731
    x_ref = lambda vs: x(*xidx_fn(vs))  # noqa: E731
    mean, var = _stats(ctx, x_ref, loops, stat_ref, count, dt, stat_shape, stat_loops, 0)
    has_affine = w is not None or b is not None
    j = em.temp(dt, x.shape) if has_affine else out
    vs, lp = loops()
    em.stmt(lp, (j(*xidx_fn(vs)),
                 (x_ref(vs) - stat_ref(mean, vs)) / sqrt(stat_ref(var, vs) + eps)))
    if has_affine:
        vs, lp = loops()
        rhs = j(*xidx_fn(vs))
        if w is not None:
            rhs = w(*widx_fn(vs)) * rhs
        if b is not None:
            rhs = rhs + b(*widx_fn(vs))
        em.stmt(lp, (out(*xidx_fn(vs)), rhs))
    return out


@rule("layer_norm")
def _layer_norm(ctx):
    x = ctx.tensor(0)
    ns = list(ctx.arg(1))
    w, b, eps = ctx.arg(2), ctx.arg(3), ctx.arg(4, 1e-05)
    outer = x.rank - len(ns)
    return _normalize_group(ctx, x, ctx.out, 0, w, b, eps,
                            widx_fn=lambda vs: vs[outer:], xidx_fn=lambda vs: vs,
                            extents=list(x.shape), stat_dims=outer)


@rule("group_norm")
def _group_norm(ctx):
    x = ctx.tensor(0)
    g = int(ctx.arg(1))
    w, b, eps = ctx.arg(2), ctx.arg(3), ctx.arg(4, 1e-05)
    c = x.shape[1]
    if c % g:
        raise ctx.fail(f"group_norm: {c} channels are not divisible into {g} groups")
    cpg = c // g
    extents = [x.shape[0], g, cpg] + list(x.shape[2:])
    chan = lambda vs: iadd(imul(vs[1], cpg), vs[2])  # noqa: E731
    return _normalize_group(ctx, x, ctx.out, 0, w, b, eps,
                            widx_fn=lambda vs: [chan(vs)],
                            xidx_fn=lambda vs: [vs[0], chan(vs)] + list(vs[3:]),
                            extents=extents, stat_dims=2)


@rule("instance_norm")
def _instance_norm(ctx):
    x = ctx.tensor(0)
    w, b, rm, rv = ctx.arg(1), ctx.arg(2), ctx.arg(3), ctx.arg(4)
    use_input_stats, eps = ctx.arg(5, True), ctx.arg(7, 1e-05)
    if not use_input_stats:
        return _bn_eval(ctx, x, w, b, rm, rv, eps)
    return _normalize_group(ctx, x, ctx.out, 0, w, b, eps,
                            widx_fn=lambda vs: [vs[1]], xidx_fn=lambda vs: vs,
                            extents=list(x.shape), stat_dims=2)


def _bn_eval(ctx, x, w, b, rm, rv, eps):
    if rm is None or rv is None:
        raise ctx.unsupported("evaluation-mode normalisation without running statistics")
    em, out = ctx.em, ctx.out
    j = em.temp(out.dtype, x.shape) if (w is not None or b is not None) else out
    vs, lp = em.loops(x.shape, x.rank - 1)
    em.stmt(lp, (j(*vs), (x(*vs) - rm(vs[1])) / sqrt(rv(vs[1]) + eps)))
    if j is not out:
        vs, lp = em.loops(x.shape, x.rank - 1)
        _affine(ctx, out, j, w, b, vs, lp, [vs[1]])
    return out


@rule("batch_norm", "_native_batch_norm_legit_functional", "_native_batch_norm_legit_no_training")
def _batch_norm(ctx):
    name = ctx.node.target._overloadpacket.__name__
    if name != "batch_norm":
        raise ctx.unsupported("decomposed batch norm")
    x = ctx.tensor(0)
    w, b, rm, rv = ctx.arg(1), ctx.arg(2), ctx.arg(3), ctx.arg(4)
    training, eps = ctx.arg(5), ctx.arg(7, 1e-05)
    if not training:
        return _bn_eval(ctx, x, w, b, rm, rv, eps)
    em, out = ctx.em, ctx.out
    c = x.shape[1]
    count = 1
    for i, s in enumerate(x.shape):
        if i != 1:
            count *= s
    dt = out.dtype

    def loops():
        return em.loops(x.shape, 1)

    def stat_loops():
        return em.loops([c], 0)

    stat_ref = lambda t, vs: t(vs[1])  # noqa: E731
    mean, var = _stats(ctx, lambda vs: x(*vs), loops, stat_ref, count, dt, (c,), stat_loops, 0)
    has_affine = w is not None or b is not None
    j = em.temp(dt, x.shape) if has_affine else out
    vs, lp = em.loops(x.shape, x.rank - 1)
    em.stmt(lp, (j(*vs), (x(*vs) - mean(vs[1])) / sqrt(var(vs[1]) + eps)))
    if has_affine:
        vs, lp = em.loops(x.shape, x.rank - 1)
        _affine(ctx, out, j, w, b, vs, lp, [vs[1]])
    return out


@rule("rms_norm")
def _rms_norm(ctx):
    x = ctx.tensor(0)
    ns = list(ctx.arg(1))
    w, eps = ctx.arg(2), ctx.arg(3)
    if eps is None:
        import torch
        eps = float(torch.finfo({"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
                                 "f64": torch.float64}[x.dtype]).eps)
    em, out = ctx.em, ctx.out
    outer = x.rank - len(ns)
    count = 1
    for s in ns:
        count *= s
    t = em.temp(out.dtype, x.shape[:outer])
    vs, lp = em.loops(x.shape, 0)
    em.stmt(lp, (t(*vs[:outer]), t(*vs[:outer]) + x(*vs) ** 2))
    vs, lp = em.loops(x.shape, 0)
    rhs = x(*vs) / sqrt(t(*vs[:outer]) / count + eps)
    if w is not None:
        rhs = rhs * w(*vs[outer:])
    em.stmt(lp, (out(*vs), rhs))
    return out


_ = E  # re-exported helpers are used by the rule bodies above
