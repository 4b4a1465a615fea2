"""Single-operator program types (KernelBench level 1 style)."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .workload import Workload

WORKLOADS: list[Workload] = []


class Fn(nn.Module):
    """A module whose forward is a plain function of its inputs (and of ``self``)."""

    def __init__(self, fn, **mods):
        super().__init__()
        self.fn = fn
        for k, v in mods.items():
            setattr(self, k, v)

    def forward(self, *xs):
        return self.fn(self, *xs)


def add(name, build, shapes, test, vary=(), category="operator", notes=""):
    WORKLOADS.append(Workload(name, category, build, dict(shapes), dict(test), tuple(vary), notes=notes))


def randn(*s):
    return torch.randn(*s)


# ------------------------------------------------------------------ element-wise activations

def _act(name, f, positive=False):
    def build(s):
        def make():
            x = torch.randn(s["B"], s["D"])
            return [x.abs() + 0.1 if positive else x]
        return Fn(lambda self, x: f(x)), make
    add(name, build, {"B": 16, "D": 16384}, {"B": 4, "D": 64}, ("B", "D"))


_act("ReLU", torch.relu)
_act("LeakyReLU", lambda x: F.leaky_relu(x, 0.01))
_act("Sigmoid", torch.sigmoid)
_act("Tanh", torch.tanh)
_act("GELU", F.gelu)
_act("GELU_tanh", lambda x: F.gelu(x, approximate="tanh"))
_act("SELU", torch.selu)
_act("ELU", lambda x: F.elu(x, 1.0))
_act("HardSigmoid", F.hardsigmoid)
_act("HardTanh", lambda x: F.hardtanh(x, -1.0, 1.0))
_act("Hardswish", F.hardswish)
_act("Softplus", F.softplus)
_act("Softsign", F.softsign)
_act("Swish", lambda x: x * torch.sigmoid(x))
_act("SiLU", F.silu)
_act("Mish", F.mish)
_act("ReLU6", F.relu6)
_act("Clamp", lambda x: torch.clamp(x, -0.5, 0.5))
_act("MinGPTNewGelu", lambda x: 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0)))))
_act("Matrix_scalar_multiplication", lambda x: x * 3.5)
_act("Sqrt", torch.sqrt, positive=True)
_act("Log", torch.log, positive=True)
_act("Exp", torch.exp)
_act("Abs", torch.abs)


# ------------------------------------------------------------------ matrix products

def _mm(name, f, a_shape, b_shape, shapes, test, vary):
    def build(s):
        def make():
            return [torch.randn(*[s[k] for k in a_shape]), torch.randn(*[s[k] for k in b_shape])]
        return Fn(lambda self, a, b: f(a, b)), make
    add(name, build, shapes, test, vary)


_mm("Standard_matrix_multiplication", torch.matmul, "MK", "KN", {"M": 512, "K": 1024, "N": 768},
    {"M": 8, "K": 16, "N": 12}, "MKN")
_mm("Square_matrix_multiplication", torch.matmul, "NN", "NN", {"N": 1024}, {"N": 16}, "N")
_mm("Batched_matrix_multiplication", torch.bmm, "BMK", "BKN", {"B": 64, "M": 128, "K": 256, "N": 512},
    {"B": 2, "M": 8, "K": 16, "N": 4}, "BMKN")
_mm("Matrix_vector_multiplication", torch.matmul, "MK", "KO", {"M": 256, "K": 131072, "O": 1},
    {"M": 8, "K": 32, "O": 1}, "MK")
_mm("Matmul3D", torch.matmul, "BMK", "KN", {"B": 16, "M": 1024, "K": 512, "N": 768},
    {"B": 2, "M": 8, "K": 16, "N": 4}, "BMKN")
_mm("Matmul4D", lambda a, b: torch.einsum("bijl,lk->bijk", a, b), "BIJL", "LK",
    {"B": 16, "I": 256, "J": 512, "L": 256, "K": 128}, {"B": 2, "I": 3, "J": 4, "L": 8, "K": 5}, "BIJLK")
_mm("Matmul_with_transposed_A", lambda a, b: torch.matmul(a.T, b), "KM", "KN", {"M": 1024, "K": 512, "N": 768},
    {"M": 8, "K": 16, "N": 4}, "MKN")
_mm("Matmul_with_transposed_B", lambda a, b: torch.matmul(a, b.T), "MK", "NK", {"M": 1024, "K": 512, "N": 768},
    {"M": 8, "K": 16, "N": 4}, "MKN")
_mm("Matmul_with_transposed_both", lambda a, b: torch.matmul(a.T, b.T), "KM", "NK",
    {"M": 1024, "K": 512, "N": 768}, {"M": 8, "K": 16, "N": 4}, "MKN")
_mm("Matmul_for_upper_triangular_matrices", lambda a, b: torch.triu(torch.matmul(torch.triu(a), torch.triu(b))),
    "NN", "NN", {"N": 768}, {"N": 12}, "N")
_mm("Matmul_for_lower_triangular_matrices", lambda a, b: torch.tril(torch.matmul(torch.tril(a), torch.tril(b))),
    "NN", "NN", {"N": 1024}, {"N": 12}, "N")
_mm("Matmul_for_symmetric_matrices", lambda a, b: torch.matmul((a + a.T) / 2, (b + b.T) / 2), "NN", "NN",
    {"N": 512}, {"N": 12}, "N")
_mm("Matmul_with_diagonal_mat", lambda a, b: torch.diag(a) @ b, "M", "MN", {"M": 512, "N": 1024},
    {"M": 8, "N": 12}, "MN")
_mm("Matmul_with_large_K_dimension", torch.matmul, "MK", "KN", {"M": 256, "K": 131072, "N": 256},
    {"M": 4, "K": 256, "N": 4}, "MKN")
_mm("Matmul_with_small_K_dimension", torch.matmul, "MK", "KN", {"M": 1024, "K": 32, "N": 1024},
    {"M": 16, "K": 2, "N": 16}, "MN")
_mm("Tall_skinny_matrix_multiplication", torch.matmul, "MK", "KN", {"M": 1024, "K": 16, "N": 1024},
    {"M": 32, "K": 4, "N": 8}, "MN")
_mm("Matmul_with_irregular_shapes", torch.matmul, "MK", "KN", {"M": 1017, "K": 987, "N": 642},
    {"M": 7, "K": 13, "N": 5}, "MKN")
_mm("Einsum_bilinear", lambda a, b: torch.einsum("ij,kj->ik", a, b), "MK", "NK", {"M": 512, "K": 256, "N": 512},
    {"M": 6, "K": 8, "N": 5}, "MKN")


def _linear(name, bias):
    def build(s):
        return Fn(lambda self, x: self.fc(x), fc=nn.Linear(s["K"], s["N"], bias=bias)), \
            lambda: [torch.randn(s["B"], s["K"])]
    add(name, build, {"B": 128, "K": 1024, "N": 512}, {"B": 4, "K": 16, "N": 8}, ("B", "K", "N"))


_linear("Linear", True)
_linear("Linear_no_bias", False)


def _addmm(s):
    return Fn(lambda self, c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0)), \
        lambda: [torch.randn(s["N"]), torch.randn(s["M"], s["K"]), torch.randn(s["K"], s["N"])]


add("Addmm", _addmm, {"M": 256, "K": 512, "N": 256}, {"M": 4, "K": 8, "N": 6}, "MKN")


# ------------------------------------------------------------------ convolutions

def _conv(name, cls, nd, cin, cout, k, stride=1, padding=0, dilation=1, groups=1, bias=False, spatial=None,
          test_spatial=None, **extra):
    spatial = spatial or {1: (512,), 2: (256, 256), 3: (64, 64, 64)}[nd]
    test_spatial = test_spatial or {1: (12,), 2: (9, 8), 3: (6, 5, 6)}[nd]

    def build(s):
        conv = cls(cin if "Cin" not in s else s["Cin"], cout if "Cout" not in s else s["Cout"], k,
                   stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias, **extra)
        sp = [s[f"S{i}"] for i in range(nd)]
        return Fn(lambda self, x: self.conv(x), conv=conv), \
            lambda: [torch.randn(s["B"], s.get("Cin", cin), *sp)]
    shapes = {"B": 16, **{f"S{i}": v for i, v in enumerate(spatial)}}
    test = {"B": 2, **{f"S{i}": v for i, v in enumerate(test_spatial)}}
    add(name, build, shapes, test, ("B",) + tuple(f"S{i}" for i in range(nd)))


C1, C2, C3 = nn.Conv1d, nn.Conv2d, nn.Conv3d
_conv("conv_standard_1D", C1, 1, 3, 8, 3)
_conv("conv_standard_1D_dilated_strided", C1, 1, 3, 8, 3, stride=3, dilation=4, test_spatial=(20,))
_conv("conv_standard_2D__square_input__square_kernel", C2, 2, 3, 8, 3)
_conv("conv_standard_2D__square_input__asymmetric_kernel", C2, 2, 3, 8, (3, 5))
_conv("conv_standard_2D__asymmetric_input__square_kernel", C2, 2, 3, 8, 3, spatial=(128, 256))
_conv("conv_standard_2D__asymmetric_input__asymmetric_kernel", C2, 2, 3, 8, (5, 3), spatial=(256, 128))
_conv("conv_standard_2D_square_input_asymmetric_kernel___dilated____padded", C2, 2, 3, 8, (5, 3),
      padding=(2, 1), dilation=(1, 2))
_conv("conv_standard_2D_strided_padded_bias", C2, 2, 3, 8, 3, stride=2, padding=1, bias=True)
_conv("conv_standard_2D_groups", C2, 2, 4, 8, 3, groups=2)
_conv("conv_standard_2D_same_padding", C2, 2, 3, 8, 3, padding="same")
_conv("conv_standard_3D__square_input__square_kernel", C3, 3, 3, 8, 3)
_conv("conv_standard_3D__square_input__asymmetric_kernel", C3, 3, 3, 8, (3, 5, 7), test_spatial=(5, 6, 8))
_conv("conv_standard_3D__asymmetric_input__square_kernel", C3, 3, 3, 8, (3, 3, 1), spatial=(256, 256, 10))
_conv("conv_standard_3D__asymmetric_input__asymmetric_kernel", C3, 3, 3, 8, (3, 5, 7), spatial=(16, 256, 256),
      test_spatial=(4, 6, 8))
_conv("conv_depthwise_2D_square_input_square_kernel", C2, 2, 3, 3, 3, groups=3)
_conv("conv_depthwise_2D_square_input_asymmetric_kernel", C2, 2, 3, 3, (3, 1), groups=3)
_conv("conv_depthwise_2D_asymmetric_input_square_kernel", C2, 2, 3, 3, 3, groups=3, spatial=(128, 256))
_conv("conv_depthwise_2D_asymmetric_input_asymmetric_kernel", C2, 2, 3, 3, (3, 5), groups=3,
      spatial=(128, 256))
_conv("conv_depthwise_2D_multiplier", C2, 2, 3, 6, 3, groups=3)
_conv("conv_pointwise_2D", C2, 2, 3, 8, 1)
_conv("conv_transposed_1D", nn.ConvTranspose1d, 1, 4, 3, 3, stride=2, padding=1)
_conv("conv_transposed_2D__square_input__square_kernel", nn.ConvTranspose2d, 2, 4, 3, 3)
_conv("conv_transposed_2D_strided_padded", nn.ConvTranspose2d, 2, 4, 3, 3, stride=2, padding=1,
      output_padding=1, bias=True)
_conv("conv_transposed_2D_dilated_grouped", nn.ConvTranspose2d, 2, 4, 6, 3, dilation=2, groups=2)
_conv("conv_transposed_3D", nn.ConvTranspose3d, 3, 4, 3, 3, stride=2, padding=1)


def _dw_sep(s):
    m = Fn(lambda self, x: self.pw(self.dw(x)), dw=nn.Conv2d(3, 3, 3, groups=3, bias=False),
           pw=nn.Conv2d(3, 8, 1, bias=False))
    return m, lambda: [torch.randn(s["B"], 3, s["S0"], s["S1"])]


add("conv_depthwise_separable_2D", _dw_sep, {"B": 16, "S0": 256, "S1": 256}, {"B": 2, "S0": 9, "S1": 8},
    ("B", "S0", "S1"))


# ------------------------------------------------------------------ pooling

def _pool(name, f, nd, spatial, test_spatial):
    def build(s):
        sp = [s[f"S{i}"] for i in range(nd)]
        return Fn(lambda self, x: f(x)), lambda: [torch.randn(s["B"], s["C"], *sp)]
    add(name, build, {"B": 16, "C": 32, **{f"S{i}": v for i, v in enumerate(spatial)}},
        {"B": 2, "C": 3, **{f"S{i}": v for i, v in enumerate(test_spatial)}},
        ("B", "C") + tuple(f"S{i}" for i in range(nd)))


_pool("Max_Pooling_1D", lambda x: F.max_pool1d(x, 4, stride=2, padding=2, dilation=3), 1, (128,), (17,))
_pool("Max_Pooling_2D", lambda x: F.max_pool2d(x, 2, stride=2, padding=1, dilation=3), 2, (128, 128), (10, 11))
_pool("Max_Pooling_3D", lambda x: F.max_pool3d(x, 3, stride=2, padding=1, dilation=3), 3, (64, 64, 64),
      (9, 8, 10))
_pool("Max_Pooling_2D_ceil", lambda x: F.max_pool2d(x, 3, stride=2, ceil_mode=True), 2, (128, 128), (10, 11))
_pool("Average_Pooling_1D", lambda x: F.avg_pool1d(x, 4, stride=2, padding=1), 1, (128,), (13,))
_pool("Average_Pooling_2D", lambda x: F.avg_pool2d(x, 3), 2, (256, 256), (10, 11))
_pool("Average_Pooling_3D", lambda x: F.avg_pool3d(x, 3, stride=2, padding=1), 3, (64, 64, 64), (7, 8, 6))
_pool("Average_Pooling_2D_exclude_pad", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1,
                                                               count_include_pad=False), 2, (64, 64), (9, 8))
_pool("Adaptive_Average_Pooling_2D", lambda x: F.adaptive_avg_pool2d(x, 1), 2, (32, 32), (6, 4))


# ------------------------------------------------------------------ reductions and scans

def _red(name, f, shape=(16, 256, 256), test=(2, 5, 6), positive=False, x_only=True):
    keys = "BMN"[:len(shape)]

    def build(s):
        def make():
            x = torch.randn(*[s[k] for k in keys])
            return [x.abs() * 0.5 + 0.75 if positive else x]
        return Fn(lambda self, x: f(x)), make
    add(name, build, dict(zip(keys, shape)), dict(zip(keys, test)), tuple(keys))


_red("Sum_reduction_over_a_dimension", lambda x: torch.sum(x, dim=1, keepdim=True))
_red("Mean_reduction_over_a_dimension", lambda x: torch.mean(x, dim=1))
_red("Max_reduction_over_a_dimension", lambda x: torch.max(x, dim=1)[0])
_red("Min_reduction_over_a_dimension", lambda x: torch.min(x, dim=2)[0])
_red("Product_reduction_over_a_dimension", lambda x: torch.prod(x, dim=1), positive=True)
_red("Argmax_over_a_dimension", lambda x: torch.argmax(x, dim=1))
_red("Argmin_over_a_dimension", lambda x: torch.argmin(x, dim=1))
_red("Max_with_indices", lambda x: torch.max(x, dim=2)[1])
_red("Sum_all", lambda x: x.sum())
_red("Amax_two_dims", lambda x: torch.amax(x, dim=(1, 2)))
_red("LogSumExp", lambda x: torch.logsumexp(x, dim=2))
_red("Variance", lambda x: torch.var(x, dim=1))
_red("Std_unbiased_false", lambda x: torch.std(x, dim=2, unbiased=False))
_red("softmax", lambda x: torch.softmax(x, dim=1), (16, 16384), (4, 33))
_red("LogSoftmax", lambda x: torch.log_softmax(x, dim=1), (16, 16384), (4, 33))
_red("Softmax_dim0", lambda x: torch.softmax(x, dim=0), (16, 512), (5, 7))
_red("cumsum", lambda x: torch.cumsum(x, dim=1), (128, 4000), (4, 20))
_red("cumprod", lambda x: torch.cumprod(x, dim=1), (128, 4000), (4, 12), positive=True)
_red("cumsum_reverse", lambda x: torch.cumsum(x.flip(1), dim=1).flip(1), (128, 4000), (4, 20))
_red("cumsum_exclusive", lambda x: torch.cumsum(torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), x),
                                                          dim=1)[:, :-1], dim=1), (128, 1000), (4, 10))


def _masked_cumsum(s):
    return Fn(lambda self, x, m: torch.cumsum(x * m, dim=1)), \
        lambda: [torch.randn(s["B"], s["N"]), torch.randint(0, 2, (s["B"], s["N"])).bool()]


add("masked_cumsum", _masked_cumsum, {"B": 128, "N": 4000}, {"B": 4, "N": 16}, ("B", "N"))


# ------------------------------------------------------------------ normalisation

def _norm(name, mod_fn, shape=(16, 64, 256, 128), test=(2, 4, 5, 6), eval_mode=False):
    keys = "BCHW"[:len(shape)]

    def build(s):
        m = Fn(lambda self, x: self.n(x), n=mod_fn(s))
        if eval_mode:
            with torch.no_grad():
                m.n.running_mean.uniform_(-0.5, 0.5)
                m.n.running_var.uniform_(0.5, 1.5)
            m.eval()
        return m, lambda: [torch.randn(*[s[k] for k in keys])]
    add(name, build, dict(zip(keys, shape)), dict(zip(keys, test)), tuple(k for k in keys if k != "C"))


_norm("BatchNorm", lambda s: nn.BatchNorm2d(s["C"]))
_norm("BatchNorm_eval", lambda s: nn.BatchNorm2d(s["C"]), eval_mode=True)
_norm("BatchNorm1d", lambda s: nn.BatchNorm1d(s["C"]), (128, 512), (6, 5))
_norm("LayerNorm", lambda s: nn.LayerNorm((s["C"], s["H"], s["W"])))
_norm("LayerNorm_last_dim", lambda s: nn.LayerNorm(s["H"]), (128, 64, 512), (2, 3, 10))
_norm("GroupNorm", lambda s: nn.GroupNorm(2, s["C"]))
_norm("InstanceNorm", lambda s: nn.InstanceNorm2d(s["C"], affine=True))
_norm("InstanceNorm_no_affine", lambda s: nn.InstanceNorm2d(s["C"]))
_norm("RMSNorm_module", lambda s: nn.RMSNorm(s["H"], eps=1e-5), (16, 256, 128), (2, 3, 12))


def _rmsnorm(s):
    return Fn(lambda self, x: x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)), \
        lambda: [torch.randn(s["B"], s["C"], s["H"], s["W"])]


add("RMSNorm", _rmsnorm, {"B": 16, "C": 64, "H": 256, "W": 128}, {"B": 2, "C": 4, "H": 5, "W": 6}, ("B", "H", "W"))
_red("FrobeniusNorm", lambda x: x / torch.norm(x, p="fro"))
_red("L1Norm", lambda x: x / torch.sum(torch.abs(x), dim=1, keepdim=True), (16, 16384), (4, 30))
_red("L2Norm", lambda x: x / torch.norm(x, p=2, dim=1, keepdim=True), (16, 16384), (4, 30))


# ------------------------------------------------------------------ losses

def _loss(name, f, make_inputs, shape=(128, 4096), test=(4, 16)):
    def build(s):
        return Fn(lambda self, *xs: f(*xs)), lambda: make_inputs(s["B"], s["N"])
    add(name, build, {"B": shape[0], "N": shape[1]}, {"B": test[0], "N": test[1]}, ("B", "N"))


_loss("MSELoss", lambda a, b: torch.mean((a - b) ** 2), lambda b, n: [randn(b, n), randn(b, n)])
_loss("MSELoss_functional", F.mse_loss, lambda b, n: [randn(b, n), randn(b, n)])
_loss("L1Loss", F.l1_loss, lambda b, n: [randn(b, n), randn(b, n)])
_loss("HuberLoss", F.smooth_l1_loss, lambda b, n: [randn(b, n), randn(b, n)])
_loss("HuberLoss_delta", lambda a, b: F.huber_loss(a, b, delta=0.5), lambda b, n: [randn(b, n), randn(b, n)])
_loss("CrossEntropyLoss", F.cross_entropy,
      lambda b, n: [randn(b, n), torch.randint(0, n, (b,))], (1024, 10), (8, 5))
_loss("NLLLoss", lambda x, t: F.nll_loss(F.log_softmax(x, dim=1), t, reduction="sum"),
      lambda b, n: [randn(b, n), torch.randint(0, n, (b,))], (1024, 10), (8, 5))
_loss("KLDivLoss", lambda p, t: F.kl_div(torch.log(p), t, reduction="batchmean"),
      lambda b, n: [randn(b, n).softmax(-1), randn(b, n).softmax(-1)], (128, 1024), (4, 16))
_loss("TripletMarginLoss", lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=1.0),
      lambda b, n: [randn(b, n), randn(b, n), randn(b, n)], (128, 1024), (4, 16))
_loss("CosineSimilarityLoss", lambda a, b: torch.mean(1 - F.cosine_similarity(a, b, dim=1)),
      lambda b, n: [randn(b, n), randn(b, n)])
_loss("Hingeloss", lambda p, t: torch.mean(torch.clamp(1 - p * t, min=0)),
      lambda b, n: [randn(b, 1), torch.randint(0, 2, (b, 1)).float() * 2 - 1], (128, 1), (8, 1))
_loss("BCEWithLogitsLoss", F.binary_cross_entropy_with_logits,
      lambda b, n: [randn(b, n), torch.rand(b, n)], (128, 4096), (4, 16))
