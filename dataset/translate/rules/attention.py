"""Scaled dot-product attention (multi-head, grouped-query, multi-query; masks, causal).

Emitted as the reference's attention core: scores ``S=S+Q*K`` (contracting the head dim),
a scale statement, an optional mask statement (``if_then_else(mask,X,-inf)`` for a bool
mask, ``X+mask`` for an additive one, ``if_then_else(s<=l,X,-inf)`` when causal), the three
softmax statements and ``O=O+P*V``. Grouped-query/multi-query key/value heads are read at
head ``h//(Hq/Hkv)``; size-1 batch or head dims broadcast with index 0.
"""
from __future__ import annotations

import math

from engine.leir.ast import BinOp

from ..emitter import TensorVal
from ..expr import E, ite, lit
from ..registry import rule
from .common import bidx
from .reduce import emit_softmax


def _kv_index(t: TensorVal, vs_batch, q_batch, group: int):
    """Batch subscript of key/value ``t`` against the query's batch dims."""
    sub = TensorVal(t.name, t.dtype, t.shape[:-2])
    idx = bidx(sub, vs_batch, q_batch)
    if group > 1 and len(idx) >= 1:
        h = len(idx) - 1
        idx[h] = BinOp("//", vs_batch[len(q_batch) - 1], lit(group))
    return idx


@rule("scaled_dot_product_attention")
def _sdpa(ctx):
    q, k, v = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    mask = ctx.arg(3)
    dropout_p, causal = ctx.arg(4, 0.0), ctx.arg(5, False)
    scale = ctx.kwarg("scale", None)
    gqa = ctx.kwarg("enable_gqa", False)
    if dropout_p:
        raise ctx.unsupported("attention dropout (random)")
    out = ctx.out
    dt = out.dtype
    batch = q.shape[:-2]
    L, Ed = q.shape[-2], q.shape[-1]
    S = k.shape[-2]
    group = 1
    if q.rank >= 3 and k.rank >= 3 and k.shape[-3] != q.shape[-3] and k.shape[-3] != 1:
        if not gqa and k.shape[-3] != q.shape[-3]:
            raise ctx.fail("key/value heads differ from query heads; pass enable_gqa=True")
        group = q.shape[-3] // k.shape[-3]
    nb = len(batch)
    scores = ctx.temp(batch + (L, S), dt)
    vs, loops = ctx.em.loops(list(batch) + [L, S, Ed], 0)
    b_, l_, s_, e_ = vs[:nb], vs[nb], vs[nb + 1], vs[nb + 2]
    kb = _kv_index(k, b_, batch, group)
    lhs = scores(*b_, l_, s_)
    ctx.em.stmt(loops, (lhs, lhs + q(*b_, l_, e_) * k(*kb, s_, e_)))
    if scale is None:
        scale = 1.0 / math.sqrt(Ed)
    scaled = ctx.temp(batch + (L, S), dt)
    ctx.em.map(scaled, lambda vs: scores(*vs) * scale)
    cur = scaled
    if causal:
        m = ctx.temp(batch + (L, S), dt)
        ctx.em.map(m, lambda vs: ite(E(vs[nb + 1]).le(vs[nb]), cur(*vs), -float("inf")))
        cur = m
    if isinstance(mask, TensorVal):
        m = ctx.temp(batch + (L, S), dt)
        shape = batch + (L, S)
        src = cur
        if mask.dtype == "bool":
            ctx.em.map(m, lambda vs: ite(mask(*bidx(mask, vs, shape)), src(*vs), -float("inf")))
        else:
            ctx.em.map(m, lambda vs: src(*vs) + mask(*bidx(mask, vs, shape)))
        cur = m
    elif mask is not None:
        raise ctx.unsupported(f"attention mask {mask!r}")
    probs = ctx.temp(batch + (L, S), dt)
    emit_softmax(ctx, cur, nb + 1, probs, False)
    Ev = v.shape[-1]
    vs, loops = ctx.em.loops(list(batch) + [L, Ev, S], 0)
    b_, l_, d_, s_ = vs[:nb], vs[nb], vs[nb + 1], vs[nb + 2]
    vb = _kv_index(v, b_, batch, group)
    lhs = out(*b_, l_, d_)
    ctx.em.stmt(loops, (lhs, lhs + probs(*b_, l_, s_) * v(*vb, s_, d_)))
    return out
