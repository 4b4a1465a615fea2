"""CPU seconds per build stage, collected only while a profile asks (``benchmarks/build_profile.py``).

The build (``lowering.run``, ``lowering.build_cache``, ``lowering.batch_build``) marks its stages
with ``stage(name)``; outside ``clock()`` that costs one global read. CPU time is this process's
(every thread) plus that of the child processes it waited for (the linker of a cached build), so
a stage that runs a subprocess is charged for it.
"""
from __future__ import annotations

import resource
import time
from contextlib import contextmanager
from typing import Iterator, Optional

STAGES = ("lowering", "primfunc", "compile", "codegen", "jit", "export", "load")

_ACTIVE: Optional[dict] = None


def cpu_seconds() -> float:
    """CPU time of this process and of its waited-for children."""
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Charge the CPU time of the block to ``name`` while a ``clock()`` is open."""
    if _ACTIVE is None:
        yield
        return
    book = _ACTIVE
    t0 = cpu_seconds()
    try:
        yield
    finally:
        book[name] = book.get(name, 0.0) + cpu_seconds() - t0


@contextmanager
def clock() -> Iterator[dict]:
    """Collect the stages of the builds inside the block: {stage: CPU seconds}."""
    global _ACTIVE
    prev, _ACTIVE = _ACTIVE, {}
    try:
        yield _ACTIVE
    finally:
        _ACTIVE = prev
