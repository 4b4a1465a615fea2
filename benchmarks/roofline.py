"""What a program's time means against the machine: the work it does and the limits it runs into.

* ``work(program)``: floating-point operations and the bytes it must move at least (its known
  tensors read or written once), counted on the program as written: one operation per ``+ - * /``,
  ``max``, ``min``, ``**`` and math function of an equation per iteration of its loops (a matmul
  ``D = D + A*C`` counts the classic 2*M*N*K). Index arithmetic, comparisons and copies count
  nothing.
* ``calibrate(threads)``: the machine's measured limits at a thread count, from libraries: SGEMM
  (``torch.mm`` of 1024 x 1024 floats into a preallocated output, the best of the repeats), and a
  streaming copy (``torch`` copy into a preallocated tensor) of a block that stays in the L2 cache
  (1 MiB) and of one that does not (256 MiB).
* ``figure(...)``: a workload is compute-bound when its arithmetic intensity exceeds the ratio of
  the SGEMM rate to the streaming bandwidth (the roofline's ridge point): its figure is GFLOP/s
  against SGEMM; otherwise GB/s (the minimal bytes over the time) against the copy bandwidth of
  the cache level its footprint fits.
"""
from __future__ import annotations

import time

from engine.leir.ast import BinOp, Call, Unary, equations, walk

L2_BYTES = 1 << 20                 # the in-cache copy block; footprints up to 2 MiB use its bandwidth
STREAM_BYTES = 256 << 20
SGEMM_N = 1024
_DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4,
                "u32": 4, "i64": 8, "u64": 8, "bool": 1}


def _ops(e) -> int:
    n = 0
    for x in walk(e):
        if isinstance(x, BinOp) and x.op in ("+", "-", "*", "/", "**"):
            n += 1
        elif isinstance(x, Call) and x.func != "if_then_else":
            n += 1
        elif isinstance(x, Unary):
            n += 0          # a negation folds into the operation that uses it
    return n


def work(program) -> dict:
    """{"flops", "bytes"} of ``program`` (see the module docstring)."""
    flops = 0
    for loops, eq in equations(program.body):
        iters = 1
        for l in loops:
            iters *= l.extent
        flops += iters * _ops(eq.rhs)
    nbytes = 0
    for d in list(program.inputs) + list(program.outputs):
        size = _DTYPE_BYTES.get(d.dtype, 4)
        for s in d.shape:
            size *= s
        nbytes += size
    return {"flops": flops, "bytes": nbytes}


def _best_ms(fn, min_ms: float = 20.0, repeat: int = 7) -> float:
    fn()
    t0 = time.perf_counter()
    fn()
    one = max((time.perf_counter() - t0) * 1e3, 1e-4)
    number = max(1, int(min_ms / one))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) * 1e3 / number)
    return min(times)


def calibrate(threads: int) -> dict:
    """The machine's limits at ``threads`` threads (torch's pool): SGEMM GFLOP/s and copy GB/s."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(0)
        a = torch.randn(SGEMM_N, SGEMM_N, generator=g)
        b = torch.randn(SGEMM_N, SGEMM_N, generator=g)
        c = torch.empty(SGEMM_N, SGEMM_N)
        ms = _best_ms(lambda: torch.mm(a, b, out=c))
        out = {"threads": threads, "sgemm_gflops": 2 * SGEMM_N ** 3 / ms / 1e6, "sgemm_n": SGEMM_N}
        for label, size in (("copy_gbs_cache", L2_BYTES), ("copy_gbs_stream", STREAM_BYTES)):
            src = torch.rand(size // 4, generator=g)
            dst = torch.empty_like(src)
            ms = _best_ms(lambda dst=dst, src=src: dst.copy_(src), min_ms=50.0 if size > L2_BYTES else 20.0)
            out[label] = 2 * size / ms / 1e6            # bytes read + bytes written
        return out
    finally:
        torch.set_num_threads(before)


def figure(ms: float | None, w: dict, peak: dict | None) -> dict:
    """The rate of a run of ``ms`` milliseconds doing ``w`` (``work``), in the unit its bound
    takes, and its fraction of ``peak`` (``calibrate``)."""
    if not ms:
        return {}
    ridge = (peak["sgemm_gflops"] / peak["copy_gbs_stream"]) if peak else 8.0
    intensity = w["flops"] / max(w["bytes"], 1)
    if intensity >= ridge:
        rate = w["flops"] / ms / 1e6
        limit = peak["sgemm_gflops"] if peak else None
        return {"bound": "compute", "unit": "GFLOP/s", "rate": rate,
                "of_peak": rate / limit if limit else None}
    rate = w["bytes"] / ms / 1e6
    limit = None
    if peak:
        limit = peak["copy_gbs_cache"] if w["bytes"] <= 2 * L2_BYTES else peak["copy_gbs_stream"]
    return {"bound": "memory", "unit": "GB/s", "rate": rate, "of_peak": rate / limit if limit else None}

