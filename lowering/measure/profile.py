"""A program's profile, in the Verifier's worker: the whole program and each of its slot kernels
timed alone, in interleaved rounds under one hold of the timing lock (what the sum model of
``lowering.measure.summodel`` takes a parent's kernel times from, and checks itself against).

Unlike a paired schedule (``lowering.measure.rounds``), the programs have different interfaces:
each gets its own seeded inputs and buffers, and its own runs per mean (calibrated on itself, so
that every mean lasts at least ``min_ms`` whatever the program's size); a round measures each
program once, in order, so a drift of the machine reaches all of them alike.
"""
from __future__ import annotations

import time


def measure_alone_now(programs: list[dict], rounds: int, opts: dict) -> dict:
    """{"ok", "reason", "message", "failed": index or None, "runs": runs per mean of each program,
    "times": ms per round per program (stored precision), "seconds"}."""
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import program_from_json

    from ..fastcheck import FAST_DIFFERS, FastMismatch, timed_build
    from ..inputs import random_inputs
    from ..run import arguments, device_for
    from ..tir import first_line
    from .lock import TimingLock
    from .rounds import _empty, _warm, calibrate
    from .stats import sig
    t0 = time.perf_counter()
    evals = []
    i, stage = 0, "build failed"
    try:
        dev = device_for(opts["target"])
        for i, rec in enumerate(programs):  # noqa: B007 - i names the program that failed
            stage = "build failed"
            prog = program_from_json(rec)
            built = timed_build(prog, opts["target"], opts["arch"], opts.get("timed_build", "exact"), opts["seed"])
            stage = "execution failed"
            args, outs = arguments(prog, random_inputs(prog, opts["seed"], 0), dev, built.scratch)
            evals.append((built, dev, (*args, *outs)))
    except FastMismatch as e:
        return _empty(times=[], runs=[], reason=FAST_DIFFERS, failed=i, message=e.message)
    except LeirError as e:
        return _empty(times=[], runs=[], reason=stage, failed=i, message=e.message)
    try:
        with TimingLock(opts["target"]):
            _warm(evals, opts["warmup"], opts["target"])
            runs = [calibrate([ev], opts["min_ms"]) for ev in evals]
            timers = [built.timer(d, number=n, repeat=opts["best_of"]) for (built, d, _), n in zip(evals, runs)]
            times = []
            for _ in range(rounds):
                row = []
                for timer, (_, _, args) in zip(timers, evals):
                    row.append(sig(float(min(timer(*args).results)) * 1000.0))
                times.append(row)
    except Exception as e:      # TVM's runtime errors
        return _empty(times=[], runs=[], reason="execution failed", failed=i, message=f"timing failed: {first_line(e)}")
    return _empty(ok=True, runs=runs, times=times, seconds=time.perf_counter() - t0)
