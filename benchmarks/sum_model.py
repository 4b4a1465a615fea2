"""Does a program take the sum of its statements' times? The sum model of statement-level timing
(``lowering.measure.summodel``), checked on the corpus.

    .venv/bin/python benchmarks/sum_model.py [--programs 0] [--rounds 10] [--shrink-points 16384] [--json]

Every corpus program of two or more slots (``engine.leir.slots``), shrunk as ``dataset.generate
--shrink`` shrinks it (programs whose smallest instance is over --max-points are left out, as the
job leaves them out), is profiled as ``--time`` profiles a parent (``Verifier.measure_alone``: the
whole program and each slot kernel alone, each on its own seeded inputs, in interleaved rounds):
a kernel's time is the median of its rounds, and the ratio (sum of the kernels' times) / (the
whole program's time) is reported per program, with its spread over programs, how many fall
within the Measurer's tolerance (``SUM_TOLERANCE``: outside it a parent's candidates are timed
whole), and the programs outside it with their statement counts and times. With the machine label
and the load average: timings taken under load are noisier.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "examples" / "corpus" / "programs.jsonl"


def programs(n: int, shrink_points: int, max_points: int) -> list:
    from dataset.generate.shrink import WIDE_GRANULARITIES, points, shrink_with_granularity, smallest_instance
    from engine.leir.files import program_from_json
    recs = [json.loads(l) for l in CORPUS.read_text().splitlines() if l.strip()]
    if n:
        recs = recs[::max(1, len(recs) // n)][:n]
    out = []
    for r in recs:
        p = program_from_json(r)
        small, _ = shrink_with_granularity(p, shrink_points, WIDE_GRANULARITIES)
        small = small if small is not None else smallest_instance(p)[0]
        if small is not None and points(small) <= max_points:
            out.append(small)
    return out


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=0, help="corpus programs, every k-th (default 0: all)")
    ap.add_argument("--rounds", type=int, default=10, help="profile rounds per program (default 10)")
    ap.add_argument("--shrink-points", type=int, default=16384, help="as dataset.generate --shrink-points")
    ap.add_argument("--max-points", type=int, default=16384, help="as dataset.generate --max-points (default 16384, "
                                                                  "benchmarks/dataset.py's)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from engine.leir.slots import split
    from lowering import Verifier
    from lowering.measure import machine_label
    from lowering.measure.stats import MIN_MS, BEST_OF
    from lowering.measure.summodel import SUM_TOLERANCE, holds, profile_figures
    load = [round(x, 2) for x in os.getloadavg()]
    rows, skipped = [], 0
    with Verifier(timeout=600) as v:
        for p in programs(args.programs, args.shrink_points, args.max_points):
            slots = split(p)
            if len(slots) < 2:
                skipped += 1
                continue
            res = v.measure_alone([p] + [s.kernel for s in slots], args.rounds, MIN_MS, BEST_OF)
            if not res["ok"]:
                rows.append({"program": p.name, "slots": len(slots), "error": res.get("message")})
                continue
            fig = profile_figures(res["times"])
            rows.append({"program": p.name, "slots": len(slots), **fig, "holds": holds(fig, SUM_TOLERANCE)})
            print(f"{p.name}: {len(slots)} slots, sum/whole {fig['sum_ratio']}", file=sys.stderr, flush=True)
    ok = [r for r in rows if "sum_ratio" in r]
    ratios = [r["sum_ratio"] for r in ok]
    out = {"machine": machine_label("llvm"), "target": "llvm", "rounds": args.rounds, "tolerance": SUM_TOLERANCE,
           "programs": len(ok), "one_slot_programs": skipped, "failed": [r for r in rows if "error" in r],
           "within_tolerance": sum(r["holds"] for r in ok),
           "within_1pct": sum(abs(x - 1) <= 0.01 for x in ratios), "within_2pct": sum(abs(x - 1) <= 0.02 for x in ratios),
           "ratio_quantiles": {q: quantile(ratios, q) for q in (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)} if ratios
           else None, "outside": [r for r in ok if not r["holds"]], "per_program": ok,
           "load_average_before": load, "load_average_after": [round(x, 2) for x in os.getloadavg()]}
    if args.json:
        print(json.dumps(out))
        return 0
    m = out["machine"]
    print(f"machine: {m['cpu']}, {m['cores']} cores (llvm); {out['programs']} corpus programs of 2+ slots "
          f"({skipped} of one slot left out), {args.rounds} rounds; load average {load} -> {out['load_average_after']}")
    if ratios:
        print(f"sum of kernels / whole: quantiles {out['ratio_quantiles']}")
        print(f"within 1%: {out['within_1pct']}, within 2%: {out['within_2pct']}, within the tolerance "
              f"{SUM_TOLERANCE:g}: {out['within_tolerance']} of {len(ok)}")
    for r in out["outside"]:
        print(f"  outside: {r['program']} ({r['slots']} slots): sum {r['sum_ms']} ms, whole {r['whole_ms']} ms, "
              f"ratio {r['sum_ratio']}, kernels {r['kernel_ms']}")
    for r in out["failed"]:
        print(f"  not measured: {r['program']}: {r['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
