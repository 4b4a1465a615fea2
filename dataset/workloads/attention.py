"""Attention variants: causal self-attention, scaled dot-product (masks, causal), multi-head,
grouped-query and multi-query attention, cross attention."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .workload import Workload
from .operators import Fn

WORKLOADS: list[Workload] = []


def add(name, build, shapes, test, vary=("B", "T")):
    WORKLOADS.append(Workload(name, "attention", build, dict(shapes), dict(test), tuple(vary)))


class CausalSelfAttention(nn.Module):
    """MinGPT-style masked multi-head self-attention (the corpus's MinGPTCausalAttention)."""

    def __init__(self, d, h, t, kv_heads=None):
        super().__init__()
        self.h, self.kv = h, kv_heads or h
        self.hd = d // h
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, self.kv * self.hd)
        self.v = nn.Linear(d, self.kv * self.hd)
        self.proj = nn.Linear(d, d)
        self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t))

    def forward(self, x):
        B, T, C = x.size()
        q = self.q(x).view(B, T, self.h, self.hd).transpose(1, 2)
        k = self.k(x).view(B, T, self.kv, self.hd).transpose(1, 2)
        v = self.v(x).view(B, T, self.kv, self.hd).transpose(1, 2)
        if self.kv != self.h:
            k = k.unsqueeze(2).expand(B, self.kv, self.h // self.kv, T, self.hd).reshape(B, self.h, T, self.hd)
            v = v.unsqueeze(2).expand(B, self.kv, self.h // self.kv, T, self.hd).reshape(B, self.h, T, self.hd)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class MinGPTCausalAttention(nn.Module):
    """The corpus's fused-QKV form: c_attn, split, heads, causal mask, c_proj."""

    def __init__(self, d, h, t):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t))
        self.n_head, self.n_embd = h, d

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


def _x(s):
    return lambda: [torch.randn(s["B"], s["T"], s["D"])]


add("MinGPTCausalAttention", lambda s: (MinGPTCausalAttention(s["D"], s["H"], s["T"]), _x(s)),
    {"B": 64, "T": 256, "D": 128, "H": 8}, {"B": 2, "T": 6, "D": 16, "H": 2})
add("MHA_causal", lambda s: (CausalSelfAttention(s["D"], s["H"], s["T"]), _x(s)),
    {"B": 64, "T": 256, "D": 128, "H": 8}, {"B": 2, "T": 6, "D": 16, "H": 4})
add("GQA_causal", lambda s: (CausalSelfAttention(s["D"], s["H"], s["T"], kv_heads=2), _x(s)),
    {"B": 64, "T": 256, "D": 128, "H": 8}, {"B": 2, "T": 6, "D": 16, "H": 4})
add("MQA_causal", lambda s: (CausalSelfAttention(s["D"], s["H"], s["T"], kv_heads=1), _x(s)),
    {"B": 64, "T": 256, "D": 128, "H": 8}, {"B": 2, "T": 6, "D": 16, "H": 4})


def _sdpa(name, **kw):
    def build(s):
        def make():
            q = torch.randn(s["B"], s["H"], s["T"], s["E"])
            kvh = s["H"] // 2 if kw.get("enable_gqa") else s["H"]
            k = torch.randn(s["B"], kvh, s["S"], s["E"])
            v = torch.randn(s["B"], kvh, s["S"], s["E"])
            out = [q, k, v]
            if kw.get("mask") == "bool":
                out.append(torch.rand(s["T"], s["S"]) > 0.2)
            elif kw.get("mask") == "float":
                out.append(torch.randn(s["B"], 1, s["T"], s["S"]))
            return out
        args = {k: v for k, v in kw.items() if k != "mask"}
        if kw.get("mask"):
            return Fn(lambda self, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, **args)), make
        return Fn(lambda self, q, k, v: F.scaled_dot_product_attention(q, k, v, **args)), make
    add(name, build, {"B": 16, "H": 8, "T": 256, "S": 256, "E": 64}, {"B": 2, "H": 2, "T": 5, "S": 7, "E": 8},
        ("B", "T", "S"))


_sdpa("SDPA")
_sdpa("SDPA_causal", is_causal=True)
_sdpa("SDPA_bool_mask", mask="bool")
_sdpa("SDPA_additive_mask", mask="float")
_sdpa("SDPA_scaled", scale=0.3)
_sdpa("SDPA_GQA", enable_gqa=True)


def _mha_module(s):
    m = Fn(lambda self, x: self.mha(x, x, x, need_weights=False)[0],
           mha=nn.MultiheadAttention(s["D"], s["H"], batch_first=True))
    return m, _x(s)


add("nn_MultiheadAttention", _mha_module, {"B": 16, "T": 128, "D": 128, "H": 8}, {"B": 2, "T": 5, "D": 16, "H": 2})


def _cross(s):
    m = Fn(lambda self, x, c: self.o(F.scaled_dot_product_attention(
        self.q(x).view(x.shape[0], x.shape[1], s["H"], -1).transpose(1, 2),
        self.k(c).view(c.shape[0], c.shape[1], s["H"], -1).transpose(1, 2),
        self.v(c).view(c.shape[0], c.shape[1], s["H"], -1).transpose(1, 2)).transpose(1, 2).reshape(x.shape)),
        q=nn.Linear(s["D"], s["D"]), k=nn.Linear(s["D"], s["D"]), v=nn.Linear(s["D"], s["D"]),
        o=nn.Linear(s["D"], s["D"]))
    return m, lambda: [torch.randn(s["B"], s["T"], s["D"]), torch.randn(s["B"], s["S"], s["D"])]


add("Cross_attention", _cross, {"B": 16, "T": 128, "S": 64, "D": 128, "H": 8},
    {"B": 2, "T": 5, "S": 3, "D": 16, "H": 2}, ("B", "T", "S"))
