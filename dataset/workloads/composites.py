"""Composite program types: a head (Gemm, Matmul, Conv2d, Conv3d, ConvTranspose2d, BMM) followed
by 1-4 tail components (activations, scalings, bias adds, normalisations, pooling, softmax,
reductions), as KernelBench level 2 builds them. A fixed list of KernelBench-style names plus
seeded random compositions brings the library to the paper's 189 program types."""
from __future__ import annotations

import random

import torch
import torch.nn as nn
import torch.nn.functional as F

from .workload import Workload

WORKLOADS: list[Workload] = []
TARGET_TOTAL = 189

# --------------------------------------------------------------------- components
# each takes the current shape and returns (module or None, fn(module, x), new shape)


def _head(name, s):
    if name == "Gemm":
        return nn.Linear(s["N"], s["M"]), lambda m, x: m(x), (s["B"], s["M"])
    if name == "Matmul":
        return nn.Linear(s["N"], s["M"], bias=False), lambda m, x: m(x), (s["B"], s["M"])
    if name == "Conv2d":
        return nn.Conv2d(s["C"], s["O"], 3), lambda m, x: m(x), (s["B"], s["O"], s["H"] - 2, s["W"] - 2)
    if name == "Conv3d":
        return nn.Conv3d(s["C"], s["O"], 3), lambda m, x: m(x), \
            (s["B"], s["O"], s["D"] - 2, s["H"] - 2, s["W"] - 2)
    if name == "ConvTranspose2d":
        return nn.ConvTranspose2d(s["C"], s["O"], 3, stride=2, padding=1), lambda m, x: m(x), \
            (s["B"], s["O"], 2 * s["H"] - 1, 2 * s["W"] - 1)
    raise KeyError(name)


def _input(name, s):
    if name in ("Gemm", "Matmul"):
        return (s["B"], s["N"])
    if name == "Conv3d":
        return (s["B"], s["C"], s["D"], s["H"], s["W"])
    return (s["B"], s["C"], s["H"], s["W"])


def _act(f):
    return lambda shape: (None, lambda m, x: f(x), shape)


def _param(shape):
    """A per-channel (conv) or per-feature (gemm) parameter shape."""
    return (shape[1],) + (1,) * (len(shape) - 2)


def _bias_add(shape):
    return nn.ParameterList([nn.Parameter(torch.randn(_param(shape)))]), lambda m, x: x + m[0], shape


def _scale_param(shape):
    return nn.ParameterList([nn.Parameter(torch.randn(_param(shape)))]), lambda m, x: x * m[0], shape


def _bn(shape):
    cls = {2: nn.BatchNorm1d, 4: nn.BatchNorm2d, 5: nn.BatchNorm3d}[len(shape)]
    return cls(shape[1]), lambda m, x: m(x), shape


def _gn(shape):
    return nn.GroupNorm(2, shape[1]), lambda m, x: m(x), shape


def _in(shape):
    cls = {4: nn.InstanceNorm2d, 5: nn.InstanceNorm3d}[len(shape)]
    return cls(shape[1], affine=True), lambda m, x: m(x), shape


def _ln(shape):
    return nn.LayerNorm(shape[-1]), lambda m, x: m(x), shape


def _pool(kind):
    def comp(shape):
        nd = len(shape) - 2
        f = {("max", 2): F.max_pool2d, ("max", 3): F.max_pool3d, ("avg", 2): F.avg_pool2d,
             ("avg", 3): F.avg_pool3d}[(kind, nd)]
        return None, lambda m, x: f(x, 2), shape[:2] + tuple(d // 2 for d in shape[2:])
    return comp


def _reduce(kind):
    def comp(shape):
        f = {"Sum": lambda x: torch.sum(x, dim=1, keepdim=True), "Mean": lambda x: torch.mean(x, dim=1, keepdim=True),
             "Max": lambda x: torch.max(x, dim=1, keepdim=True)[0],
             "LogSumExp": lambda x: torch.logsumexp(x, dim=1, keepdim=True)}[kind]
        return None, lambda m, x: f(x), (shape[0], 1) + shape[2:]
    return comp


def _global_avg(shape):
    dims = tuple(range(2, len(shape)))
    return None, lambda m, x: torch.mean(x, dim=dims, keepdim=True), shape[:2] + (1,) * (len(shape) - 2)


TAILS = {
    "ReLU": (_act(torch.relu), 2), "LeakyReLU": (_act(lambda x: F.leaky_relu(x, 0.2)), 2),
    "GELU": (_act(F.gelu), 2), "Sigmoid": (_act(torch.sigmoid), 2), "Tanh": (_act(torch.tanh), 2),
    "Swish": (_act(lambda x: x * torch.sigmoid(x)), 2), "Mish": (_act(F.mish), 2),
    "HardSwish": (_act(F.hardswish), 2), "HardTanh": (_act(lambda x: F.hardtanh(x, -0.5, 0.5)), 2),
    "Softplus": (_act(F.softplus), 2), "SELU": (_act(torch.selu), 2), "ELU": (_act(F.elu), 2),
    "Scaling": (_act(lambda x: x * 1.5), 2), "Divide": (_act(lambda x: x / 2.0), 2),
    "Subtract": (_act(lambda x: x - 0.5), 2), "Clamp": (_act(lambda x: torch.clamp(x, -1.0, 1.0)), 2),
    "ResidualAdd": (_act(lambda x: x + x.detach() * 0.5), 2), "Square": (_act(lambda x: x * x), 2),
    "BiasAdd": (_bias_add, 2), "Multiply": (_scale_param, 2),
    "BatchNorm": (_bn, 2), "GroupNorm": (_gn, 2), "InstanceNorm": (_in, 4), "LayerNorm": (_ln, 2),
    "MaxPool": (_pool("max"), 4), "AvgPool": (_pool("avg"), 4), "GlobalAvgPool": (_global_avg, 4),
    "Softmax": (_act(lambda x: torch.softmax(x, dim=1)), 2),
    "Sum": (_reduce("Sum"), 2), "Mean": (_reduce("Mean"), 2), "Max": (_reduce("Max"), 2),
    "LogSumExp": (_reduce("LogSumExp"), 2),
}
HEADS = ("Gemm", "Matmul", "Conv2d", "Conv3d", "ConvTranspose2d")


class Chain(nn.Module):
    """head(x) followed by the tail components."""

    def __init__(self, names, s):
        super().__init__()
        self.mods = nn.ModuleList()
        self.fns = []
        mod, fn, shape = _head(names[0], s)
        self.mods.append(mod)
        self.fns.append(fn)
        for n in names[1:]:
            mod, fn, shape = TAILS[n][0](shape)
            self.mods.append(mod if mod is not None else nn.Identity())
            self.fns.append(fn)

    def forward(self, x):
        for m, f in zip(self.mods, self.fns):
            x = f(m, x)
        return x


def _valid(names) -> bool:
    head, tails = names[0], names[1:]
    if not 2 <= len(names) <= 5:
        return False
    rank = 2 if head in ("Gemm", "Matmul") else (5 if head == "Conv3d" else 4)
    pooled = 0
    for t in tails:
        if TAILS[t][1] > rank:
            return False
        if t == "InstanceNorm" and rank != 4:
            return False
        if t in ("MaxPool", "AvgPool"):
            pooled += 1
            if pooled > 1:
                return False
    return True


SHAPES = {"B": 128, "N": 1024, "M": 512, "C": 3, "O": 16, "D": 16, "H": 32, "W": 32}
TEST = {"B": 2, "N": 8, "M": 6, "C": 2, "O": 4, "D": 6, "H": 6, "W": 6}

KERNELBENCH_STYLE = [
    "Gemm_ReLU_Divide", "Gemm_Sigmoid_Sum_LogSumExp", "Matmul_Swish_Scaling", "Gemm_BatchNorm_Scaling_Softmax",
    "Matmul_Mish_Mish", "Gemm_GELU_Softmax", "Gemm_Scaling_HardTanh_GELU", "Gemm_GroupNorm_Swish_Multiply_Swish",
    "Gemm_Divide_Sum_Scaling", "Matmul_Dropout_Mean_Softmax", "Gemm_Max_Subtract_GELU", "Gemm_LayerNorm_GELU",
    "Matmul_BatchNorm_BiasAdd_Divide_Swish", "Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd",
    "Conv2d_ReLU_BiasAdd", "Conv2d_InstanceNorm_Divide", "Conv2d_BatchNorm_Scaling", "Conv2d_Subtract_Subtract_Mish",
    "Conv2d_Mish_Tanh", "Conv2d_GELU_GlobalAvgPool", "Conv2d_Min_Tanh_Tanh", "Conv2d_Multiply_LeakyReLU_GELU",
    "Conv2d_AvgPool_Sigmoid_Sum", "Conv2d_HardSwish_ReLU", "Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd",
    "Conv2d_Scaling_Min", "Conv2d_Add_Scale_Sigmoid_GroupNorm", "Conv2d_MaxPool_Softplus_Scaling",
    "Conv3d_HardSwish_ReLU_Softmax_Mean", "Conv3d_Softmax_MaxPool", "Conv3d_GroupNorm_Mean", "Conv3d_LeakyReLU_GELU_Sigmoid_BiasAdd",
    "Conv3d_Multiply_InstanceNorm_Clamp", "Conv3d_Divide_Max_GlobalAvgPool_BiasAdd_Sum",
    "ConvTranspose2d_BiasAdd_Clamp_Scaling_Divide", "ConvTranspose2d_GELU_GroupNorm",
    "ConvTranspose2d_MaxPool_HardTanh_Mean_Tanh", "ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid",
    "ConvTranspose2d_Mish_Add_HardTanh_Scaling", "ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum",
]
_ALIASES = {"Min": "Max", "Add": "BiasAdd", "Scale": "Scaling", "Dropout": "ReLU"}


def _canon(name: str) -> list[str]:
    parts = name.split("_")
    return [parts[0]] + [_ALIASES.get(p, p) for p in parts[1:]]


def _register(name, comps):
    def build(s, comps=tuple(comps)):
        m = Chain(comps, s)
        shape = _input(comps[0], s)
        return m, lambda: [torch.randn(*shape)]
    vary = ("B", "N", "M") if comps[0] in ("Gemm", "Matmul") else ("B", "H", "W")
    WORKLOADS.append(Workload(name, "composite", build, dict(SHAPES), dict(TEST), vary, tuple(comps)))


def fill(count_other: int):
    """Register the fixed composites, then seeded random ones until the library has TARGET_TOTAL types."""
    seen = set()
    for name in KERNELBENCH_STYLE:
        comps = _canon(name)
        if _valid(comps):
            _register(name, comps)
            seen.add(tuple(comps))
    rng = random.Random(189)
    tails = sorted(TAILS)
    while count_other + len(WORKLOADS) < TARGET_TOTAL:
        head = rng.choice(HEADS)
        comps = [head] + [rng.choice(tails) for _ in range(rng.randint(1, 4))]
        if not _valid(comps) or tuple(comps) in seen:
            continue
        seen.add(tuple(comps))
        _register("_".join(comps), comps)


def _count_others() -> int:
    from . import attention, blocks, operators
    return len(operators.WORKLOADS) + len(blocks.WORKLOADS) + len(attention.WORKLOADS)


fill(_count_others())
