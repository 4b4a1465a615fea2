"""The noise floor of ``dataset.generate --time`` on this machine: programs timed against themselves (A/A).

    PYTHONPATH=. .venv/bin/python benchmarks/timing_noise.py [--programs 8] [--copies 3] [--trials 3]
                                                             [--rounds 40] [--json]

Each program (the examples and corpus programs, shrunk as ``--shrink`` does) is compared with
``--copies`` copies of itself exactly as ``lowering.measure.Measurer`` compares a parent with
its candidates: one interleaved schedule in one Verifier worker, under the timing lock. The
Verifier keeps no build cache, so every copy is a build of its own (its own code and buffers, as
a real candidate has); each trial starts a fresh worker process. A copy's true speedup is 1, so

* the fraction of A/A intervals that exclude 1 checks the interval's coverage (about
  1 - confidence when the rounds are independent),
* ``f_needed`` = how far an interval misses 1 (max(lo - 1, 1/hi - 1, 0)) is the difference
  the intervals do not cover; the noise floor is the next whole percent above its largest value
  over all A/A comparisons, so that every A/A comparison of the measurement comes out ``tie``,
* the interval's half-width at 10, 20, 30, 40 rounds (prefixes of the same samples) is what
  the rounds buy, from which the default ``--rounds`` is chosen.

Prints the figures with the machine label and the load average (other work on the machine
widens every figure; the measurement runs under the machine-wide timing lock, like --time).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def load_programs(n_corpus: int, shrink_points: int = 16384) -> list:
    """The examples plus ``n_corpus`` corpus programs spread over the file, shrunk as --shrink does."""
    from dataset.generate.shrink import WIDE_GRANULARITIES, points, shrink_with_granularity, smallest_instance
    from dataset.generate.program_sources import resolve_sources
    from dataset.generate.task import resolve
    specs, _ = resolve_sources([str(p) for p in sorted((ROOT / "examples").glob("*.leir"))], None, "default",
                               "f32", 1, 0)
    corpus, _ = resolve_sources([str(ROOT / "examples" / "corpus" / "programs.jsonl")], None, "default", "f32", 1, 0)
    step = max(1, len(corpus) // max(1, n_corpus))
    specs += corpus[::step][:n_corpus]
    out = []
    for s in specs:
        p, _ = resolve(s)
        if points(p) > shrink_points:
            small, _ = shrink_with_granularity(p, shrink_points, WIDE_GRANULARITIES)
            p = small if small is not None else smallest_instance(p)[0]
        if p is not None:
            out.append(p)
    return out


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=8, help="programs: the 5 examples and the rest from the corpus")
    ap.add_argument("--copies", type=int, default=3, help="self-copies per schedule (default 3)")
    ap.add_argument("--trials", type=int, default=3, help="fresh worker processes per program (default 3)")
    ap.add_argument("--rounds", type=int, default=40, help="rounds per schedule (default 40)")
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--min-ms", type=float, default=None, help="length of one measurement (default: --time's)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from lowering import Verifier
    from lowering.measure import machine_label
    from lowering.measure import stats as timing
    min_ms = args.min_ms or timing.MIN_MS
    # every round of every copy: the fixed-rounds protocol (no sequential stop), noise floor 0
    protocol = timing.Protocol(rounds=args.rounds, confidence=args.confidence, noise_floor=0.0, look_every=0,
                               min_ms=min_ms)
    progs = load_programs(max(0, args.programs - 5))[:args.programs]
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    records = []                        # (program, trial, record at full rounds)
    for p in progs:
        for t in range(args.trials):
            with Verifier(target="llvm", cache_size=0, build_cache=False, timeout=600) as v:  # copies: separate builds
                res = v.measure_paired([p] + [p] * args.copies, protocol)
            if res["ok"]:
                records += [(p.name, t, {"samples": s, "runs_per_sample": res["number"]}) for s in res["samples"]]
    wall = time.perf_counter() - t0
    by_rounds = {}
    for n in sorted({r for r in (10, 20, 30, 40, args.rounds) if timing.min_rounds(args.confidence) <= r
                     <= args.rounds}):
        need, width, est, miss = [], [], [], 0
        for _, _, r in records:
            d = timing.derive(r["samples"]["parent"][:n], r["samples"]["candidate"][:n], args.confidence, 0.0)
            lo, hi = d["ci"]
            need.append(max(lo - 1.0, 1.0 / hi - 1.0, 0.0))
            width.append((math.log(hi) - math.log(lo)) / 2.0)
            est.append(abs(math.log(d["speedup"])))
            miss += not (lo <= 1.0 <= hi)
        by_rounds[n] = {"aa_comparisons": len(need), "interval_excludes_1": round(miss / len(need), 4),
                        "f_needed_p50": round(quantile(need, 0.5), 4), "f_needed_p95": round(quantile(need, 0.95), 4),
                        "f_needed_max": round(max(need), 4),
                        "half_width_median_pct": round(100 * (math.exp(statistics.median(width)) - 1), 2),
                        "half_width_p95_pct": round(100 * (math.exp(quantile(width, 0.95)) - 1), 2),
                        "abs_estimate_p95_pct": round(100 * (math.exp(quantile(est, 0.95)) - 1), 2)}
    full = by_rounds[max(by_rounds)]
    floor = (math.floor(full["f_needed_max"] * 100) + 1) / 100
    out = {"machine": machine_label("llvm"), "target": "llvm", "programs": [p.name for p in progs],
           "copies": args.copies, "trials": args.trials, "rounds": args.rounds, "min_ms": min_ms,
           "confidence": args.confidence, "runs_per_sample": sorted({r["runs_per_sample"] for _, _, r in records}),
           "by_rounds": by_rounds, "noise_floor": floor, "load_average_before": [round(x, 2) for x in load0],
           "load_average_after": [round(x, 2) for x in os.getloadavg()], "wall_seconds": round(wall, 1)}
    if args.json:
        print(json.dumps(out))
        return 0
    m = out["machine"]
    print(f"machine: {m['cpu']}, {m['cores']} cores (target llvm); load average {out['load_average_before']} -> "
          f"{out['load_average_after']}; {wall:.0f} s")
    print(f"{len(records)} A/A comparisons ({len(progs)} programs x {args.trials} processes x {args.copies} copies), "
          f"{args.rounds} rounds, measurements of ~{min_ms:g} ms, confidence {args.confidence:g}")
    print(f"{'rounds':>6} {'excl. 1':>8} {'f p50':>7} {'f p95':>7} {'f max':>7} {'±CI med %':>10} {'±CI p95 %':>10} "
          f"{'|est| p95 %':>11}")
    for n, b in by_rounds.items():
        print(f"{n:>6} {b['interval_excludes_1']:>8} {b['f_needed_p50']:>7} {b['f_needed_p95']:>7} "
              f"{b['f_needed_max']:>7} {b['half_width_median_pct']:>10} {b['half_width_p95_pct']:>10} "
              f"{b['abs_estimate_p95_pct']:>11}")
    print(f"noise floor (next whole percent above every f_needed at {args.rounds} rounds): {floor:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
