"""``python -m search.report DIR [--json]``: one row per (algorithm, policy) over the complete
trajectories under DIR: runs, samples (avg / max), speedup (avg / median / max), distinct
strategies on the best trajectory (avg / max), and search efficiency both ways (spec
search.md 6): ``eff_ratio_of_avgs`` = avg speedup / avg samples (the paper's definition) and
``eff_avg_of_ratios`` = mean over runs of speedup / samples."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

COLUMNS = ("algorithm", "policy", "runs", "avg_samples", "max_samples", "avg_speedup", "median_speedup",
           "max_speedup", "avg_strategies", "max_strategies", "eff_ratio_of_avgs", "eff_avg_of_ratios")


def summarize(records: list[dict]) -> list[dict]:
    groups: dict[tuple, list] = {}
    for r in records:
        groups.setdefault((r["options"]["algorithm"], r["options"]["policy"]), []).append(r)
    rows = []
    for (alg, pol), rs in sorted(groups.items()):
        samples = [r["summary"]["samples"] for r in rs]
        speed = [float(r["best"]["speedup"]) for r in rs]
        strat = [len({s.get("strategy") for s in r["best"]["steps"]}) for r in rs]
        avg_s = statistics.fmean(samples)
        rows.append({"algorithm": alg, "policy": pol, "runs": len(rs), "avg_samples": avg_s,
                     "max_samples": max(samples), "avg_speedup": statistics.fmean(speed),
                     "median_speedup": statistics.median(speed), "max_speedup": max(speed),
                     "avg_strategies": statistics.fmean(strat), "max_strategies": max(strat),
                     "eff_ratio_of_avgs": statistics.fmean(speed) / avg_s if avg_s else None,
                     "eff_avg_of_ratios": statistics.fmean(sp / n for sp, n in zip(speed, samples) if n) if any(samples) else None})
    return rows


def load_dir(path: str) -> list[dict]:
    from .trajectory import FORMAT
    out = []
    for p in sorted(Path(path).rglob("*.json")):
        try:
            rec = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(rec, dict) and rec.get("format") == FORMAT and rec.get("complete"):
            out.append(rec)
    return out


def markdown(rows: list[dict]) -> str:
    def f(v):
        return f"{v:.2f}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(f(r[c]) for c in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    from engine.leir.cli import run_cli
    return run_cli(_main, argv)


def _main(argv) -> int:
    from engine.leir.diagnostics import LeirError
    ap = argparse.ArgumentParser(prog="python -m search.report", description=__doc__.split("\n\n")[0])
    ap.add_argument("directory")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if not Path(a.directory).is_dir():
        raise LeirError("not a directory", file=a.directory)
    records = load_dir(a.directory)
    if not records:
        raise LeirError("no complete search trajectories here", file=a.directory)
    rows = summarize(records)
    print(json.dumps(rows, indent=1) if a.json else markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
