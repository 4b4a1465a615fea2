"""Timings of several programs in one interleaved schedule, in one process, under one lock.

``measure_schedule`` (the worker's ``schedule`` request) builds every program once, allocates
each its own arguments (the same seeded inputs: the programs share an interface), warms each,
then takes the machine-wide timing lock once and measures the programs in the order the
schedule lists them, round after round. A comparison of a parent with its candidates is then
made of measurements taken next to each other in time, on the same process, the same warm
builds and the same load; which order to use is the caller's choice (``dataset.timing``).

One measurement is the fastest of ``best_of`` means of ``number`` back-to-back runs
(``time_evaluator``), ``number`` calibrated on the first program so that a mean lasts about
``min_ms`` milliseconds: a kernel of a few microseconds is not timed one call at a time, and
the fastest of a few short means drops most of the time other processes take from it (load
only ever adds time; a parallel kernel on a busy machine waits for its slowest thread).
"""
from __future__ import annotations

import math
import time

MAX_NUMBER = 100_000


def measure_schedule_now(programs: list[dict], schedule: list[list[int]], opts: dict) -> dict:
    """{"ok", "reason", "message", "failed": index or None, "number", "times": ms per round per
    schedule entry, "seconds"}; ``reason`` "measured", "build failed" or "execution failed"."""
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import program_from_json

    from .inputs import random_inputs
    from .run import arguments, build, device_for
    from .timing_lock import TimingLock
    t0 = time.perf_counter()
    out = {"ok": False, "reason": "measured", "message": None, "failed": None, "number": None, "times": [],
           "seconds": 0.0}
    progs, evals = [], []
    for i, rec in enumerate(programs):
        try:
            prog = program_from_json(rec)
            built = build(prog, opts["target"], opts["arch"])
        except LeirError as e:
            return {**out, "reason": "build failed", "failed": i, "message": e.message}
        progs.append((prog, built))
    inputs = random_inputs(progs[0][0], opts["seed"], 0)
    try:
        dev = device_for(opts["target"])
        for i, (prog, built) in enumerate(progs):
            args, outs = arguments(prog, inputs, dev, built.scratch)
            evals.append((built.executable.jit(), dev, (*args, *outs)))
    except LeirError as e:
        return {**out, "reason": "execution failed", "message": e.message}
    i = 0
    try:
        with TimingLock(opts["target"]):
            for i, (mod, d, args) in enumerate(evals):          # warm-up: each program runs before any timing
                fn = mod["main"]
                for _ in range(opts["warmup"]):
                    fn(*args)
                if opts["target"] == "cuda":
                    d.sync()
            i = 0
            number = _calibrate(evals[0], opts["min_ms"])
            timers = [mod.time_evaluator("main", d, number=number, repeat=opts["best_of"]) for mod, d, _ in evals]
            times = []
            for order in schedule:
                row = []
                for i in order:
                    row.append(float(min(timers[i](*evals[i][2]).results)) * 1000.0)
                times.append(row)
    except Exception as e:      # TVM's runtime errors
        from .tir import first_line
        return {**out, "reason": "execution failed", "failed": i, "message": f"timing failed: {first_line(e)}"}
    return {**out, "ok": True, "number": number, "times": times, "seconds": time.perf_counter() - t0}


def _calibrate(ev, min_ms: float) -> int:
    """Runs per measurement so that one lasts about ``min_ms`` (from the fastest of 3 single runs)."""
    mod, dev, args = ev
    timer = mod.time_evaluator("main", dev, number=1, repeat=3)
    one = min(timer(*args).results) * 1000.0
    if one <= 0:
        return MAX_NUMBER
    return max(1, min(MAX_NUMBER, math.ceil(min_ms / one)))
