"""Per-program one-step enumeration time over the corpus, in one process after imports.

    python benchmarks/enumerate.py [--rules DIR] [--strategy S ...] [--validate] [--json]

Reports median / p90 / max seconds per program, neighbours per program and peak resident
memory. Enumeration means: insert, analyse, step, compute, decode, expand and merge
(neighbour text and programs are materialised lazily). ``--validate`` also re-analyses
every neighbour (``Neighbour.program``) and reports that time separately.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus" / "programs.jsonl"))
    ap.add_argument("--rules", default=None)
    ap.add_argument("--strategy", action="append")
    ap.add_argument("--validate", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from engine.enumerate import Engine
    from engine.files import load_programs
    progs = load_programs(args.corpus)
    eng = Engine(args.rules)
    eng.enumerate(progs[0], args.strategy)  # warm-up: rulesets, schedules
    rows = []
    for p in progs:
        t0 = time.perf_counter()
        res = eng.enumerate(p, args.strategy)
        t1 = time.perf_counter()
        row = {"program": p.name, "seconds": t1 - t0, "neighbours": len(res.neighbours), "step_rows": res.step_rows}
        if args.validate:
            for nb in res.neighbours:
                nb.program
            row["validate_seconds"] = time.perf_counter() - t1
        rows.append(row)
    ts = sorted(r["seconds"] for r in rows)
    summary = {
        "programs": len(rows),
        "strategies": len(eng.select(args.strategy, None) or eng.book.strategies),
        "median_ms": round(1000 * statistics.median(ts), 2),
        "p90_ms": round(1000 * ts[int(0.9 * (len(ts) - 1))], 2),
        "max_ms": round(1000 * ts[-1], 2),
        "neighbours_median": statistics.median(r["neighbours"] for r in rows),
        "neighbours_total": sum(r["neighbours"] for r in rows),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if args.validate:
        vs = sorted(r["validate_seconds"] for r in rows)
        summary["validate_median_ms"] = round(1000 * statistics.median(vs), 2)
        summary["validate_p90_ms"] = round(1000 * vs[int(0.9 * (len(vs) - 1))], 2)
    if args.json:
        print(json.dumps({"summary": summary, "programs": rows}))
    else:
        for r in sorted(rows, key=lambda r: -r["seconds"])[:10]:
            print(f"{r['program']:<50} {1000 * r['seconds']:9.1f} ms {r['neighbours']:6d} neighbours")
        print(" ".join(f"{k}={v}" for k, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
