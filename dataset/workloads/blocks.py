"""Popular blocks: MLPs, transformer feed-forward and norm blocks, conv blocks, residuals."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .workload import Workload
from .operators import Fn

WORKLOADS: list[Workload] = []


def add(name, build, shapes, test, vary):
    WORKLOADS.append(Workload(name, "block", build, dict(shapes), dict(test), tuple(vary)))


def _seq(s):
    return [torch.randn(s["B"], s["N"])]


add("MLP_ReLU", lambda s: (nn.Sequential(nn.Linear(s["N"], s["H"]), nn.ReLU(), nn.Linear(s["H"], s["N"])),
                           lambda: _seq(s)), {"B": 128, "N": 512, "H": 2048}, {"B": 4, "N": 8, "H": 16},
    ("B", "N", "H"))
add("MLP_GELU", lambda s: (nn.Sequential(nn.Linear(s["N"], s["H"]), nn.GELU(), nn.Linear(s["H"], s["N"])),
                           lambda: _seq(s)), {"B": 128, "N": 512, "H": 2048}, {"B": 4, "N": 8, "H": 16},
    ("B", "N", "H"))
add("MLP_deep_Tanh", lambda s: (nn.Sequential(nn.Linear(s["N"], s["H"]), nn.Tanh(), nn.Linear(s["H"], s["H"]),
                                              nn.Tanh(), nn.Linear(s["H"], 1)), lambda: _seq(s)),
    {"B": 128, "N": 256, "H": 512}, {"B": 4, "N": 8, "H": 12}, ("B", "N", "H"))


def _ffn(s):
    m = Fn(lambda self, x: x + self.fc2(F.gelu(self.fc1(self.ln(x)))), ln=nn.LayerNorm(s["D"]),
           fc1=nn.Linear(s["D"], 4 * s["D"]), fc2=nn.Linear(4 * s["D"], s["D"]))
    return m, lambda: [torch.randn(s["B"], s["T"], s["D"])]


add("Transformer_FFN_PreNorm", _ffn, {"B": 8, "T": 128, "D": 256}, {"B": 2, "T": 3, "D": 8}, ("B", "T", "D"))


def _swiglu(s):
    m = Fn(lambda self, x: self.down(F.silu(self.gate(x)) * self.up(x)),
           gate=nn.Linear(s["D"], s["H"], bias=False), up=nn.Linear(s["D"], s["H"], bias=False),
           down=nn.Linear(s["H"], s["D"], bias=False))
    return m, lambda: [torch.randn(s["B"], s["D"])]


add("SwiGLU_FFN", _swiglu, {"B": 128, "D": 512, "H": 1024}, {"B": 4, "D": 8, "H": 12}, ("B", "D", "H"))


def _rms_block(s):
    m = Fn(lambda self, x: self.fc(self.norm(x)), norm=nn.RMSNorm(s["D"]), fc=nn.Linear(s["D"], s["D"]))
    return m, lambda: [torch.randn(s["B"], s["D"])]


add("RMSNorm_Linear", _rms_block, {"B": 128, "D": 512}, {"B": 4, "D": 8}, ("B", "D"))


def _conv_bn_relu(s):
    m = nn.Sequential(nn.Conv2d(s["C"], s["O"], 3, padding=1), nn.BatchNorm2d(s["O"]), nn.ReLU())
    return m, lambda: [torch.randn(s["B"], s["C"], s["H"], s["W"])]


add("Conv_BN_ReLU", _conv_bn_relu, {"B": 16, "C": 16, "O": 32, "H": 64, "W": 64},
    {"B": 2, "C": 3, "O": 4, "H": 6, "W": 5}, ("B", "H", "W"))


def _resblock(s):
    m = Fn(lambda self, x: F.relu(x + self.bn2(self.c2(F.relu(self.bn1(self.c1(x)))))),
           c1=nn.Conv2d(s["C"], s["C"], 3, padding=1, bias=False), bn1=nn.BatchNorm2d(s["C"]),
           c2=nn.Conv2d(s["C"], s["C"], 3, padding=1, bias=False), bn2=nn.BatchNorm2d(s["C"]))
    return m, lambda: [torch.randn(s["B"], s["C"], s["H"], s["W"])]


add("ResNet_BasicBlock", _resblock, {"B": 8, "C": 32, "H": 32, "W": 32}, {"B": 2, "C": 3, "H": 5, "W": 6},
    ("B", "H", "W"))


def _lenet(s):
    m = Fn(lambda self, x: self.fc(F.max_pool2d(F.relu(self.conv(x)), 2).flatten(1)),
           conv=nn.Conv2d(1, 4, 5), fc=nn.Linear(4 * ((s["H"] - 4) // 2) ** 2, 10))
    return m, lambda: [torch.randn(s["B"], 1, s["H"], s["H"])]


add("LeNet_Conv_Pool_FC", _lenet, {"B": 64, "H": 32}, {"B": 2, "H": 12}, ("B",))


def _mm_softmax(s):
    return Fn(lambda self, a, b: torch.softmax(a @ b, dim=-1)), \
        lambda: [torch.randn(s["M"], s["K"]), torch.randn(s["K"], s["N"])]


add("MatMul_and_Softmax", _mm_softmax, {"M": 64, "K": 128, "N": 32}, {"M": 4, "K": 8, "N": 6}, ("M", "K", "N"))


def _depthwise_block(s):
    m = nn.Sequential(nn.Conv2d(s["C"], s["C"], 3, padding=1, groups=s["C"]), nn.BatchNorm2d(s["C"]), nn.ReLU6(),
                      nn.Conv2d(s["C"], s["O"], 1), nn.BatchNorm2d(s["O"]))
    return m, lambda: [torch.randn(s["B"], s["C"], s["H"], s["W"])]


add("MobileNet_DepthwiseSeparable", _depthwise_block, {"B": 16, "C": 32, "O": 64, "H": 56, "W": 56},
    {"B": 2, "C": 3, "O": 4, "H": 6, "W": 5}, ("B", "H", "W"))
