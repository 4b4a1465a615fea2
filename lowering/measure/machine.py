"""What a timing was measured on: the CPU model, the GPU, the cores and the threads a program may use.

A timing holds on one machine and one thread count only; every timing record, cached timing and
trajectory names its machine with ``machine_label`` so that figures of different machines are never
mixed silently (``machine_key`` is the one-line form reports print).
"""
from __future__ import annotations

import os
import platform
from typing import Optional


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what ``platform`` knows)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def gpu_name() -> str | None:
    """The first CUDA device's name through TVM, None when there is none."""
    import tvm
    dev = tvm.cuda(0)
    return str(dev.device_name) if dev.exist else None


def cpu_threads() -> int:
    """Threads a CPU program runs on, as TVM's pool sizes itself (``MaxConcurrency``): ``TVM_NUM_THREADS``,
    else ``OMP_NUM_THREADS`` (either at most the CPUs), else the online CPUs, halved on x86-64, where TVM takes half of them
    for hyper-threads (so a 2-core x86 machine runs one thread unless told; records labelled before
    2026-12-06 said one per core)."""
    n = os.cpu_count() or 1
    for name in ("TVM_NUM_THREADS", "OMP_NUM_THREADS"):
        raw = os.environ.get(name)
        if raw is not None:
            try:
                return max(1, min(int(raw), n))     # the pool never outnumbers the CPUs
            except ValueError:
                return 1            # TVM's atoi: text reads as 0, then at least one thread
    return max(1, n // 2 if platform.machine().lower() in ("x86_64", "amd64") else n)


def machine_label(target: str, threads: Optional[int] = None) -> dict:
    """{"cpu", "gpu" (cuda targets only), "cores", "threads" (llvm: the thread pool's size)};
    ``threads``: the count the programs run on when it is not this process's (a ``Verifier`` whose
    workers were given ``threads``); None: ``cpu_threads()``."""
    return {"cpu": cpu_model(), "gpu": gpu_name() if target == "cuda" else None, "cores": os.cpu_count() or 1,
            "threads": (int(threads) if threads is not None else cpu_threads()) if target != "cuda" else None}


def machine_key(record: dict) -> str:
    """One line naming a record's target, machine and build (what must not be mixed silently);
    records written before threads were recorded have no thread count, those written before builds
    were named timed the exact build (``lowering.builds``), which the line leaves unsaid."""
    m = record["machine"]
    gpu = f", GPU {m['gpu']}" if m.get("gpu") else ""
    threads = f", {m['threads']} threads" if m.get("threads") else ""
    build = record.get("build") or "exact"
    named = f", {build} build" if build != "exact" else ""
    return f"{record['target']} on {m['cpu']}{gpu}, {m['cores']} cores{threads}{named}"
