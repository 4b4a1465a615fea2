"""Timing a parent program against candidates, interleaved (the agreed API of issue 20, item 2).

Placeholder on the menu branch: the timing helper's module replaces this one at merge. It keeps the
agreed signatures and record shape so that the menu rows can be made and tested: in each of
``rounds`` rounds the parent is measured, then each candidate (``Verifier.measure``, warm, one
worker); a record's speedup is median(parent) / median(candidate) over the rounds' medians, its
interval a seeded bootstrap of that ratio, its verdict ``faster`` / ``slower`` when the interval
clears 1 by more than the noise floor, else ``tie``.
"""
from __future__ import annotations

import random
import statistics

ROUNDS = 5
NOISE_FLOOR = 0.03          # relative: a speedup within 3% of 1 is never called faster or slower
BOOTSTRAP = 1000


def machine_label(target: str) -> dict:
    import os
    import platform
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    gpu = None
    if target == "cuda":
        try:
            import tvm
            dev = tvm.cuda(0)
            gpu = dev.device_name if dev.exist else None
        except Exception:      # no CUDA runtime: the label says so
            gpu = None
    return {"cpu": cpu, "gpu": gpu, "cores": os.cpu_count() or 1}


def _interval(parent: list, cand: list, confidence: float) -> list:
    rng = random.Random(f"bootstrap:{len(parent)}:{len(cand)}:{sum(parent):.9g}:{sum(cand):.9g}")
    ratios = []
    for _ in range(BOOTSTRAP):
        p = [parent[rng.randrange(len(parent))] for _ in parent]
        c = [cand[rng.randrange(len(cand))] for _ in cand]
        ratios.append(statistics.median(p) / statistics.median(c))
    ratios.sort()
    lo = ratios[int((1 - confidence) / 2 * (BOOTSTRAP - 1))]
    hi = ratios[int((1 + confidence) / 2 * (BOOTSTRAP - 1))]
    return [round(lo, 6), round(hi, 6)]


def verdict_of(record: dict) -> str:
    """The verdict the record's samples give (re-derived, not read)."""
    s = record["samples"]
    lo, hi = _interval(s["parent"], s["candidate"], record["confidence"])
    floor = record["noise_floor"]
    if lo > 1 + floor:
        return "faster"
    if hi < 1 / (1 + floor):
        return "slower"
    return "tie"


def _record(target, machine, rounds, confidence, parent: list, cand: list) -> dict:
    pm, cm = statistics.median(parent), statistics.median(cand)
    rec = {"target": target, "machine": machine, "method": "interleaved", "rounds": rounds,
           "parent_ms": pm, "candidate_ms": cm, "speedup": round(pm / cm, 6),
           "ci": _interval(parent, cand, confidence), "confidence": confidence, "noise_floor": NOISE_FLOOR,
           "verdict": None, "samples": {"parent": parent, "candidate": cand}}
    rec["verdict"] = verdict_of(rec)
    return rec


def compare_many(verifier, parent_program, candidate_programs: list, *, rounds: int = ROUNDS,
                 confidence: float = 0.95) -> list:
    """One timing record per candidate (None for one that does not run); the parent is measured
    in every round, interleaved with the candidates."""
    parent, per = [], [[] for _ in candidate_programs]
    for _ in range(rounds):
        m = verifier.measure(parent_program)
        if m.ok:
            parent.append(m.median_ms)
        for i, p in enumerate(candidate_programs):
            m = verifier.measure(p)
            if m.ok:
                per[i].append(m.median_ms)
    machine = machine_label(verifier.target)
    return [_record(verifier.target, machine, rounds, confidence, parent, c) if parent and c else None for c in per]


def compare(verifier, parent, candidate, **kw) -> dict:
    return compare_many(verifier, parent, [candidate], **kw)[0]
