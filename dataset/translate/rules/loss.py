"""Losses: MSE, L1, Huber/smooth L1, cross entropy, NLL, KL divergence, (binary) cross entropy,
hinge, triplet margin, cosine similarity.

An element-wise loss term is written to a temporary (or straight to the output for
reduction='none'); 'sum' accumulates into the rank-0 output under ``B^{1}``-free loops and
'mean' accumulates into a temporary divided by the element count (leir.md Appendix B (g)).
"""
from __future__ import annotations

from ..emitter import TensorVal
from ..expr import E, exp, fabs, ite, log, sqrt, vmax
from ..registry import rule
from .common import operand
from .reduce import emit_softmax, kept_index, reduce_into

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(ctx, i: int, default=1) -> str:
    r = ctx.arg(i, default)
    if r is None:
        r = default
    return _REDUCTIONS.get(r, r) if isinstance(r, int) else r


def finish(ctx, elem: TensorVal, reduction: str, count: int | None = None):
    """Reduce the element-wise loss ``elem`` into the output."""
    out = ctx.out
    if reduction == "none":
        return elem
    dims = list(range(elem.rank))
    if reduction == "sum":
        reduce_into(ctx, out, elem, dims, False, lambda a, b: a + b)
        return out
    s = ctx.temp(())
    reduce_into(ctx, s, elem, dims, False, lambda a, b: a + b)
    n = count
    if n is None:
        n = 1
        for d in elem.shape:
            n *= d
    ctx.em.map(out, lambda vs: s() / n)
    return out


def _elem(ctx, shape, reduction):
    return ctx.out if reduction == "none" else ctx.temp(shape)


def _pointwise_loss(ctx, fn, reduction_arg: int):
    a, b = ctx.tensor(0), ctx.tensor(1)
    red = _reduction(ctx, reduction_arg)
    shape = a.shape if a.rank >= b.rank else b.shape
    el = _elem(ctx, shape, red)
    ctx.em.map(el, lambda vs: fn(operand(a, vs, shape), operand(b, vs, shape)))
    return finish(ctx, el, red)


@rule("mse_loss")
def _mse(ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    red = _reduction(ctx, 2)
    shape = a.shape if a.rank >= b.rank else b.shape
    d = ctx.temp(shape)
    ctx.em.map(d, lambda vs: operand(a, vs, shape) - operand(b, vs, shape))
    el = _elem(ctx, shape, red)
    ctx.em.map(el, lambda vs: d(*vs) ** 2)
    return finish(ctx, el, red)


@rule("l1_loss")
def _l1(ctx):
    return _pointwise_loss(ctx, lambda x, y: fabs(x - y), 2)


@rule("smooth_l1_loss")
def _smooth_l1(ctx):
    beta = ctx.arg(3, 1.0)
    if beta == 0:
        return _pointwise_loss(ctx, lambda x, y: fabs(x - y), 2)
    return _huber_like(ctx, lambda d2: 0.5 * d2 / beta, lambda ad: ad - 0.5 * beta, beta)


@rule("huber_loss")
def _huber(ctx):
    delta = ctx.arg(3, 1.0)
    return _huber_like(ctx, lambda d2: 0.5 * d2, lambda ad: delta * (ad - 0.5 * delta), delta)


def _huber_like(ctx, quad, lin, thr):
    a, b = ctx.tensor(0), ctx.tensor(1)
    red = _reduction(ctx, 2)
    shape = a.shape
    q = ctx.temp(shape)
    l_ = ctx.temp(shape)
    ctx.em.map(q, lambda vs: quad((a(*vs) - b(*vs)) ** 2))
    ctx.em.map(l_, lambda vs: lin(fabs(a(*vs) - b(*vs))))
    el = _elem(ctx, shape, red)
    ctx.em.map(el, lambda vs: ite(fabs(a(*vs) - b(*vs)).lt(thr), q(*vs), l_(*vs)))
    return finish(ctx, el, red)


def _nll(ctx, logp: TensorVal, target: TensorVal, weight, red: str, ignore: int):
    """Negative log-likelihood of class targets against log-probabilities [N, C]."""
    out = ctx.out
    n = logp.shape[0]
    per = ctx.temp((n,)) if red != "none" else out
    vs, loops = ctx.em.loops((n,), 0)
    t = target(vs[0])
    w = weight(t.node) if weight is not None else None
    val = -logp(vs[0], t.node) if w is None else -(w * logp(vs[0], t.node))
    ctx.em.stmt(loops, (per(vs[0]), ite(t.ne(ignore), val, 0)))
    if red == "none":
        return out
    s = ctx.temp(())
    vs, loops = ctx.em.loops((n,), 0)
    ctx.em.stmt(loops, (s(), s() + per(vs[0])))
    if red == "sum":
        ctx.em.map(out, lambda _: s())
        return out
    cnt = ctx.temp(())
    vs, loops = ctx.em.loops((n,), 0)
    tv = target(vs[0])
    one = weight(tv.node) if weight is not None else 1
    ctx.em.stmt(loops, (cnt(), cnt() + ite(tv.ne(ignore), one, 0)))
    ctx.em.map(out, lambda _: s() / cnt())
    return out


@rule("cross_entropy_loss")
def _cross_entropy(ctx):
    x, target = ctx.tensor(0), ctx.tensor(1)
    weight, red = ctx.arg(2), _reduction(ctx, 3)
    ignore, smoothing = ctx.arg(4, -100), ctx.arg(5, 0.0)
    if smoothing:
        raise ctx.unsupported("label_smoothing")
    if x.rank != 2:
        raise ctx.unsupported(f"cross entropy over a rank-{x.rank} input (only [N, C])")
    logp = ctx.temp(x.shape)
    emit_softmax(ctx, x, 1, logp, True)
    if target.dtype.startswith("f"):  # class probabilities
        el = ctx.temp((x.shape[0],)) if red != "none" else ctx.out
        reduce_into(ctx, el, logp, [1], False, lambda acc, v: acc - v,
                    body=lambda lv, vs: target(*vs) * lv)
        return finish(ctx, el, red, x.shape[0])
    return _nll(ctx, logp, target, weight, red, ignore)


@rule("nll_loss", "nll_loss_nd", "nll_loss2d")
def _nll_loss(ctx):
    x, target = ctx.tensor(0), ctx.tensor(1)
    if x.rank != 2:
        raise ctx.unsupported(f"nll loss over a rank-{x.rank} input (only [N, C])")
    return _nll(ctx, x, target, ctx.arg(2), _reduction(ctx, 3), ctx.arg(4, -100))


@rule("kl_div")
def _kl_div(ctx):
    log_target = bool(ctx.arg(3, False))
    if log_target:
        return _pointwise_loss(ctx, lambda x, t: exp(t) * (t - x), 2)
    return _pointwise_loss(ctx, lambda x, t: ite(t.eq(0), 0, t * (log(t) - x)), 2)


@rule("binary_cross_entropy")
def _bce(ctx):
    if ctx.arg(2) is not None:
        raise ctx.unsupported("a weight tensor")
    return _pointwise_loss(ctx, lambda x, t: -(t * vmax(log(x), -100) + (1 - t) * vmax(log(1 - x), -100)), 3)


@rule("binary_cross_entropy_with_logits")
def _bce_logits(ctx):
    if ctx.arg(2) is not None or ctx.arg(3) is not None:
        raise ctx.unsupported("weight / pos_weight tensors")
    return _pointwise_loss(ctx, lambda x, t: vmax(x, 0) - x * t + log(1 + exp(-fabs(x))), 4)


@rule("hinge_embedding_loss")
def _hinge_embedding(ctx):
    margin = ctx.arg(2, 1.0)
    return _pointwise_loss(ctx, lambda x, y: ite(y.ne(1), vmax(margin - x, 0), 0) + ite(y.ne(-1), x, 0), 3)


@rule("soft_margin_loss")
def _soft_margin(ctx):
    return _pointwise_loss(ctx, lambda x, y: log(1 + exp(-y * x)), 2)


@rule("margin_ranking_loss")
def _margin_ranking(ctx):
    a, b, y = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    margin, red = ctx.arg(3, 0.0), _reduction(ctx, 4)
    shape = a.shape
    el = _elem(ctx, shape, red)
    ctx.em.map(el, lambda vs: vmax(-operand(y, vs, shape) * (a(*vs) - b(*vs)) + margin, 0))
    return finish(ctx, el, red)


@rule("triplet_margin_loss")
def _triplet(ctx):
    a, p, n = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    margin, pn, eps, swap = ctx.arg(3, 1.0), ctx.arg(4, 2.0), ctx.arg(5, 1e-06), ctx.arg(6, False)
    red = _reduction(ctx, 7)
    if swap:
        raise ctx.unsupported("swap=True")
    if a.rank != 2:
        raise ctx.unsupported(f"triplet margin loss over rank-{a.rank} inputs (only [N, D])")
    rows = a.shape[0]
    dists = []
    for other in (p, n):
        s = ctx.temp((rows,))
        vs, loops = ctx.em.loops(a.shape, 0)
        diff = a(*vs) - operand(other, vs, a.shape) + eps
        term = diff ** 2 if pn == 2 else fabs(diff) ** pn
        ctx.em.stmt(loops, (s(vs[0]), s(vs[0]) + term))
        dists.append(s)
    el = _elem(ctx, (rows,), red)
    root = (lambda v: sqrt(v)) if pn == 2 else (lambda v: v ** (1.0 / pn))
    ctx.em.map(el, lambda vs: vmax(root(dists[0](*vs)) - root(dists[1](*vs)) + margin, 0))
    return finish(ctx, el, red)


@rule("cosine_similarity")
def _cosine(ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    d, eps = ctx.arg(2, 1), ctx.arg(3, 1e-08)
    if a.shape != b.shape:
        raise ctx.unsupported("cosine similarity of differently shaped tensors")
    d = d + a.rank if d < 0 else d
    out = ctx.out
    shape = tuple(s for i, s in enumerate(a.shape) if i != d)
    dot, na, nb = ctx.temp(shape), ctx.temp(shape), ctx.temp(shape)
    reduce_into(ctx, dot, a, [d], False, lambda acc, v: acc + v,
                body=lambda av, vs: av * b(*vs))
    reduce_into(ctx, na, a, [d], False, lambda acc, v: acc + v, body=lambda av, vs: av ** 2)
    reduce_into(ctx, nb, b, [d], False, lambda acc, v: acc + v, body=lambda bv, vs: bv ** 2)
    ctx.em.map(out, lambda vs: dot(*vs) / (vmax(sqrt(na(*vs)), eps) * vmax(sqrt(nb(*vs)), eps)))
    return out


_ = (E, kept_index)
