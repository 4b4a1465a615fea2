"""Torch eager on the same CPU: the column users compare a compiler against.

A bundled example is a LEIR file without a torch model, so ``EXAMPLES`` says what each one
computes in torch (checked against our lowering's output on the same seeded inputs by
``check_example`` and by tests/test_tune.py); a library workload brings its own model
(``dataset.workloads``). Timing: ``torch.set_num_threads(threads)`` (the cores our timings use),
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


def example_call(name: str, program, seed: int = 0):
    """``(fn, args)`` for a bundled example on our seeded inputs; ``fn(*args)`` gives its outputs."""
    import torch

    from lowering.inputs import random_inputs
    tensors = {k: torch.from_numpy(v) for k, v in random_inputs(program, seed, 0).items()}
    return EXAMPLES[name], (tensors,)


def check_example(name: str, program, seed: int = 0) -> float:
    """Largest relative error of the torch function against our lowering of ``program``."""
    import numpy as np
    import torch

    from lowering.inputs import random_inputs
    from lowering.run import build, run_built
    ins = random_inputs(program, seed, 0)
    want = run_built(build(program, "llvm"), program, ins)
    with torch.no_grad():
        got = EXAMPLES[name]({k: torch.from_numpy(v) for k, v in ins.items()})
    if set(got) != {d.name for d in program.outputs}:
        raise ValueError(f"{name}: torch gives {sorted(got)}, the program writes "
                         f"{sorted(d.name for d in program.outputs)}")
    return max(float(np.max(np.abs(got[k].numpy() - want[k])) / (np.max(np.abs(want[k])) or 1.0)) for k in got)


def library_call(name: str, shapes: dict, seed: int = 0):
    """``(model, inputs)`` of a library workload at ``shapes`` (its own torch model)."""
    from dataset.workloads import instantiate, registry
    w = registry()[name]
    s = dict(w.shapes)
    s.update(shapes)
    inst = instantiate(w, s, "f32")
    return inst.model, inst.inputs(seed)


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
