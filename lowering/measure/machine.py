"""What a timing was measured on: the CPU model, the GPU, the cores and the threads a program may use.

A timing holds on one machine and one thread count only; every timing record, cached timing and
trajectory names its machine with ``machine_label`` so that figures of different machines are never
mixed silently (``machine_key`` is the one-line form reports print).
"""
from __future__ import annotations

import os
import platform


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
    """Threads a CPU program runs on: ``TVM_NUM_THREADS`` when set (TVM's thread pool reads it),
    else TVM's default, one per core."""
    try:
        n = int(os.environ.get("TVM_NUM_THREADS") or 0)
    except ValueError:
        n = 0
    return n if n > 0 else (os.cpu_count() or 1)


def machine_label(target: str) -> dict:
    """{"cpu", "gpu" (cuda targets only), "cores", "threads" (llvm: the thread pool's size)}."""
    return {"cpu": cpu_model(), "gpu": gpu_name() if target == "cuda" else None, "cores": os.cpu_count() or 1,
            "threads": cpu_threads() if target != "cuda" else None}


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
