"""Torch eager on the same CPU: the column users compare a compiler against.

A bundled example is a LEIR file without a torch model, so ``EXAMPLES`` says what each one
computes in torch (checked against our lowering's output on the same seeded inputs by
``check_example`` and by tests/test_tune.py); a library workload brings its own model
(``dataset.workloads``). ``PREALLOCATED`` / ``LIBRARY_PREALLOCATED``: the same computations into
buffers allocated once (``out=``), the fair comparison for a compiled function that writes into
the buffers it is given. Timing: ``torch.set_num_threads(threads)`` (the cores our timings use),
no autograd, warm-up runs, then the median of ``repeat`` repeats, each at least
``min_repeat_ms`` long (the Verifier's protocol).
"""
from __future__ import annotations

import statistics
import time

ATTENTION_SCALE = 0.17677669529663687        # 1/sqrt(32), as examples/attention.leir writes it


def _softmax(t):
    import torch
    return {"C": torch.softmax(t["A"], dim=1)}


def _layernorm(t):
    import torch
    return {"C": torch.nn.functional.layer_norm(t["A"], tuple(t["D"].shape), t["D"], t["E"], eps=1e-5)}


def _attention(t):
    import torch
    s = torch.matmul(t["A"], t["C"].transpose(1, 2)) * ATTENTION_SCALE
    return {"E": torch.matmul(torch.softmax(s, dim=2), t["D"])}


def _conv2d(t):
    import torch
    return {"C": torch.nn.functional.conv2d(t["A"], t["D"], padding=1)}


def _matmul(t):
    import torch
    return {"D": torch.matmul(t["A"], t["C"])}


# bundled example -> torch function of its inputs (by name) returning its outputs (by name)
EXAMPLES = {"matmul": _matmul, "softmax": _softmax, "layernorm": _layernorm, "attention": _attention,
            "conv2d": _conv2d}


# The same computations into outputs (and intermediates) allocated once, through the ``out=``
# variants of the ATen operators: an eager call otherwise allocates its result every time, and
# for a large output the first touch of fresh pages can cost more than the computation.
def _softmax_out(t, o):
    import torch
    torch.ops.aten._softmax.out(t["A"], 1, False, out=o["C"])
    return {"C": o["C"]}


def _layernorm_out(t, o):
    import torch
    torch.ops.aten.native_layer_norm.out(t["A"], list(t["D"].shape), t["D"], t["E"], 1e-5,
                                         out0=o["C"], out1=o["mean"], out2=o["rstd"])
    return {"C": o["C"]}


def _attention_out(t, o):
    import torch
    torch.matmul(t["A"], t["C"].transpose(1, 2), out=o["S"])
    o["S"].mul_(ATTENTION_SCALE)
    torch.ops.aten._softmax.out(o["S"], 2, False, out=o["P"])
    torch.matmul(o["P"], t["D"], out=o["E"])
    return {"E": o["E"]}


def _conv2d_out(t, o):
    import torch
    torch.ops.aten.convolution.out(t["A"], t["D"], None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, out=o["C"])
    return {"C": o["C"]}


def _matmul_out(t, o):
    import torch
    torch.matmul(t["A"], t["C"], out=o["D"])
    return {"D": o["D"]}


def _buffers(name: str, t: dict) -> dict:
    """The preallocated outputs and intermediates of ``name``'s ``out=`` form."""
    import torch
    a = t["A"]
    row = (a.shape[0],) + (1,) * (a.dim() - 1)
    shapes = {"softmax": lambda: {"C": a.shape},
              "layernorm": lambda: {"C": a.shape, "mean": row, "rstd": row},
              "attention": lambda: {"S": (a.shape[0], a.shape[1], t["C"].shape[1]),
                                    "P": (a.shape[0], a.shape[1], t["C"].shape[1]),
                                    "E": (a.shape[0], a.shape[1], t["D"].shape[2])},
              "conv2d": lambda: {"C": (a.shape[0], t["D"].shape[0], a.shape[2], a.shape[3])},
              "matmul": lambda: {"D": (a.shape[0], t["C"].shape[1])}}[name]()
    return {k: torch.empty(tuple(v)) for k, v in shapes.items()}


PREALLOCATED = {"matmul": _matmul_out, "softmax": _softmax_out, "layernorm": _layernorm_out,
                "attention": _attention_out, "conv2d": _conv2d_out}


def example_call(name: str, program, seed: int = 0):
    """``(fn, args)`` for a bundled example on our seeded inputs; ``fn(*args)`` gives its outputs."""
    import torch

    from lowering.inputs import random_inputs
    tensors = {k: torch.from_numpy(v) for k, v in random_inputs(program, seed, 0).items()}
    return EXAMPLES[name], (tensors,)


def example_call_preallocated(name: str, program, seed: int = 0):
    """``(fn, args)`` of ``name``'s ``out=`` form on our seeded inputs, its buffers allocated once."""
    import torch

    from lowering.inputs import random_inputs
    tensors = {k: torch.from_numpy(v) for k, v in random_inputs(program, seed, 0).items()}
    return PREALLOCATED[name], (tensors, _buffers(name, tensors))


def check_example(name: str, program, seed: int = 0) -> float:
    """Largest relative error of the torch function against our lowering of ``program``."""
    import numpy as np
    import torch

    from lowering.inputs import random_inputs
    from lowering.run import build, run_built
    ins = random_inputs(program, seed, 0)
    want = run_built(build(program, "llvm"), program, ins)
    errs = []
    with torch.no_grad():
        t = {k: torch.from_numpy(v) for k, v in ins.items()}
        for got in (EXAMPLES[name](t), PREALLOCATED[name](t, _buffers(name, t))):
            if set(got) != {d.name for d in program.outputs}:
                raise ValueError(f"{name}: torch gives {sorted(got)}, the program writes "
                                 f"{sorted(d.name for d in program.outputs)}")
            errs += [float(np.max(np.abs(got[k].numpy() - want[k])) / (np.max(np.abs(want[k])) or 1.0)) for k in got]
    return max(errs)


def library_call(name: str, shapes: dict, seed: int = 0):
    """``(model, inputs)`` of a library workload at ``shapes`` (its own torch model)."""
    from dataset.workloads import instantiate, registry
    w = registry()[name]
    s = dict(w.shapes)
    s.update(shapes)
    inst = instantiate(w, s, "f32")
    return inst.model, inst.inputs(seed)


def _gemm_relu_divide_out(x, lin, o):
    import torch
    torch.addmm(lin.bias, x, lin.weight.t(), out=o["y"])
    torch.relu_(o["y"])
    torch.div(o["y"], 2.0, out=o["z"])
    return o["z"]


# library workload -> its computation into preallocated buffers, from its model and inputs
LIBRARY_PREALLOCATED = {"Gemm_ReLU_Divide": _gemm_relu_divide_out}


def library_call_preallocated(name: str, shapes: dict, seed: int = 0):
    """``(fn, args)`` of a library workload's ``out=`` form (None when it has none), checked
    against its model."""
    import torch
    if name not in LIBRARY_PREALLOCATED:
        return None
    model, inputs = library_call(name, shapes, seed)
    (x,) = inputs
    lin = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
    rows = x.shape[0]
    o = {"y": torch.empty(rows, lin.out_features), "z": torch.empty(rows, lin.out_features)}
    fn = LIBRARY_PREALLOCATED[name]
    with torch.no_grad():
        want = model(x)
        got = fn(x, lin, o)
    if not torch.allclose(got, want, rtol=1e-5, atol=1e-5):
        raise ValueError(f"{name}: the out= form differs from the model")
    return fn, (x, lin, o)


def time_ms(fn, args, threads: int, *, warmup: int = 3, repeat: int = 7, min_repeat_ms: float = 2.0) -> float:
    """Median milliseconds of one call of ``fn(*args)`` with ``threads`` torch threads."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            for _ in range(warmup):
                fn(*args)
            t0 = time.perf_counter()
            fn(*args)
            probe = (time.perf_counter() - t0) * 1e3
            number = max(1, min(1000, int(min_repeat_ms / max(probe, 1e-6)) + 1))
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                for _ in range(number):
                    fn(*args)
                times.append((time.perf_counter() - t0) * 1e3 / number)
        return statistics.median(times)
    finally:
        torch.set_num_threads(before)
