"""Interleaved rounds, in the Verifier's worker process: several programs built once, warmed, and
measured next to each other in time under one hold of the machine-wide timing lock.

Every program is built once (the worker's build cache: a candidate verified before is not built
again), given its own buffers and the same seeded inputs (the programs share an interface) and
warmed; then rounds are measured. One measurement is the fastest of ``best_of`` means of
back-to-back runs (``time_evaluator``), the runs per mean calibrated on *each* program so that its
mean lasts at least ``min_ms``: a kernel of a few microseconds is never timed one call at a time
(the timer would not resolve it), and the fastest of a few short means drops most of the time
other processes take (load only ever adds time). Runs calibrated on the fastest program alone
made a candidate 1,300 times slower than its parent (HardTanh: 8 ms against 6 us) run 84 times
per mean, 3.4 s a measurement, and held a dataset job's worker for minutes.

* ``measure_schedule_now``: a fixed schedule (per round, the indices to measure in order).
* ``measure_paired_now``: the parent (program 0) against candidates, round after round in the
  order ``P c1 P c2 P ... cn P`` (candidates rotated each round; each candidate measurement has a
  parent measurement on both sides, whose mean is its paired parent time, so a linear drift of
  the machine cancels), with the sequential rule (``lowering.measure.stats``): a candidate
  decided at a look is not measured again, so the schedule shrinks to the undecided ones.
"""
from __future__ import annotations

import math
import time

MAX_NUMBER = 100_000


def schedule(n: int, rounds: int, first: int = 0) -> list[list[int]]:
    """Per round: the parent (0) around each candidate (1..n), candidates rotated each round."""
    return [round_order(list(range(1, n + 1)), first + r) for r in range(rounds)]


def round_order(active: list[int], r: int) -> list[int]:
    """One round ``P c P c ... P`` over the active candidates, rotated by ``r``."""
    n = len(active)
    row = [0]
    for j in range(n):
        row += [active[(j + r) % n], 0]
    return row


def pair(times: list[list[float]], sched: list[list[int]], n: int) -> list[tuple[list, list]]:
    """Per candidate: (parent samples, candidate samples), one pair per round; the parent sample
    is the mean of the parent measurements just before and just after the candidate's."""
    out = [([], []) for _ in range(n)]
    for row, order in zip(times, sched):
        for pos, idx in enumerate(order):
            if idx:
                out[idx - 1][0].append((row[pos - 1] + row[pos + 1]) / 2.0)
                out[idx - 1][1].append(row[pos])
    return out


def _prepare(programs: list[dict], opts: dict):
    """(evals, error): per program its ``Built`` (the timed build, ``opts["timed_build"]``; a fast
    one checked against the exact one first, ``lowering.fastcheck``), device and arguments; or an
    error answer."""
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import program_from_json

    from ..fastcheck import FAST_DIFFERS, FastMismatch, timed_build
    from ..inputs import random_inputs
    from ..run import arguments, device_for
    progs, evals = [], []
    for i, rec in enumerate(programs):
        try:
            prog = program_from_json(rec)
            built = timed_build(prog, opts["target"], opts["arch"], opts.get("timed_build", "exact"), opts["seed"])
        except FastMismatch as e:
            return None, {"reason": FAST_DIFFERS, "failed": i, "message": e.message}
        except LeirError as e:
            return None, {"reason": "build failed", "failed": i, "message": e.message}
        progs.append((prog, built))
    inputs = random_inputs(progs[0][0], opts["seed"], 0)
    try:
        dev = device_for(opts["target"])
        for prog, built in progs:
            args, outs = arguments(prog, inputs, dev, built.scratch)
            evals.append((built, dev, (*args, *outs)))
    except LeirError as e:
        return None, {"reason": "execution failed", "failed": None, "message": e.message}
    return evals, None


def _warm(evals, warmup: int, target: str) -> None:
    for built, d, args in evals:         # each program runs before any timing
        fn = built.function
        for _ in range(warmup):
            fn(*args)
        if target == "cuda":
            d.sync()


def calibrate_each(evals, min_ms: float) -> list[int]:
    """Runs per mean of each program, so that each one's mean lasts at least ``min_ms``."""
    return [calibrate([ev], min_ms) for ev in evals]


def calibrate(evals, min_ms: float) -> int:
    """Runs per mean so that a mean of the fastest program lasts at least ``min_ms`` (from the
    fastest of 3 single runs of each)."""
    fastest = math.inf
    for built, dev, args in evals:
        timer = built.timer(dev, number=1, repeat=3)
        fastest = min(fastest, min(timer(*args).results) * 1000.0)
    if fastest <= 0:
        return MAX_NUMBER
    return max(1, min(MAX_NUMBER, math.ceil(min_ms / fastest)))


def _empty(**kw) -> dict:
    out = {"ok": False, "reason": "measured", "message": None, "failed": None, "number": None, "numbers": None,
           "seconds": 0.0}
    out.update(kw)
    return out


def measure_schedule_now(programs: list[dict], sched: list[list[int]], opts: dict) -> dict:
    """{"ok", "reason", "message", "failed": index or None, "number" (the first program's runs per
    mean), "numbers" (each program's), "times": ms per round per schedule entry, "seconds"};
    ``reason`` "measured", "build failed" or "execution failed"."""
    from ..tir import first_line
    from .lock import TimingLock
    t0 = time.perf_counter()
    evals, err = _prepare(programs, opts)
    if err is not None:
        return _empty(times=[], **err)
    i = 0
    try:
        with TimingLock(opts["target"]):
            _warm(evals, opts["warmup"], opts["target"])
            numbers = calibrate_each(evals, opts["min_ms"])
            timers = [built.timer(d, number=k, repeat=opts["best_of"]) for (built, d, _), k in zip(evals, numbers)]
            times = []
            for order in sched:
                row = []
                for i in order:
                    row.append(float(min(timers[i](*evals[i][2]).results)) * 1000.0)
                times.append(row)
    except Exception as e:      # TVM's runtime errors
        return _empty(times=[], reason="execution failed", failed=i, message=f"timing failed: {first_line(e)}")
    return _empty(ok=True, number=numbers[0], numbers=numbers, times=times, seconds=time.perf_counter() - t0)


def measure_paired_now(programs: list[dict], opts: dict) -> dict:
    """The parent (``programs[0]``) against each candidate under the sequential rule of
    ``opts["protocol"]``: {"ok", "reason", "message", "failed", "number", "numbers" (as
    ``measure_schedule_now``), "samples": per candidate
    {"parent": [...], "candidate": [...]} (ms, stored precision, ending where the rule stopped),
    "rounds": rounds measured, "seconds"}. ``opts["sum_model"]``: the programs are slot kernels
    and the rule decides on the whole program's speedup (``lowering.measure.summodel.scaler``)."""
    from ..tir import first_line
    from .lock import TimingLock
    from .stats import Protocol, decide, sig
    t0 = time.perf_counter()
    protocol = Protocol(**opts["protocol"])
    pts, _ = protocol.looks()
    looks = set(pts)
    scale = None
    if opts.get("sum_model") is not None:           # kernels timed for their program's verdict
        from .summodel import scaler
        scale = scaler(**opts["sum_model"])
    evals, err = _prepare(programs, opts)
    if err is not None:
        return _empty(samples=[], **err)
    n = len(programs) - 1
    samples = [{"parent": [], "candidate": []} for _ in range(n)]
    active = list(range(1, n + 1))
    i, r = 0, 0
    try:
        with TimingLock(opts["target"]):
            _warm(evals, opts["warmup"], opts["target"])
            numbers = calibrate_each(evals, protocol.min_ms)
            timers = [built.timer(d, number=k, repeat=protocol.best_of) for (built, d, _), k in zip(evals, numbers)]
            while active and r < protocol.rounds:
                order = round_order(active, r)
                row = []
                for i in order:
                    row.append(float(min(timers[i](*evals[i][2]).results)) * 1000.0)
                for pos, idx in enumerate(order):
                    if idx:
                        samples[idx - 1]["parent"].append(sig((row[pos - 1] + row[pos + 1]) / 2.0))
                        samples[idx - 1]["candidate"].append(sig(row[pos]))
                r += 1
                if r in looks:
                    active = [c for c in active
                              if not decide(samples[c - 1]["parent"], samples[c - 1]["candidate"], protocol,
                                            scale)["decided"]]
    except Exception as e:      # TVM's runtime errors
        return _empty(samples=[], reason="execution failed", failed=i, message=f"timing failed: {first_line(e)}")
    return _empty(ok=True, number=numbers[0], numbers=numbers, samples=samples, rounds=r,
                  seconds=time.perf_counter() - t0)
