"""``python -m search.report DIR [--full] [--paper] [--json]``: one row per (algorithm, policy)
over the complete trajectories under DIR (e.g. a ``search.batch`` folder).

By default the paper's Table 3 columns (avg / max #samples, avg / median / max speedup, search
efficiency = avg speedup / avg #samples, the paper's definition; spec search.md 6-7), with the
average of per-run ratios next to it (what two of the paper's rows appear to use), then Table
4 (distinct strategies on the best trajectory, avg / max). ``--full``: every metric in one
table with the field names of ``--json``: runs, samples (avg / max), speedup (avg / median /
max), strategies (avg / max), ``eff_ratio_of_avgs`` and ``eff_avg_of_ratios``. ``--paper``: the
paper's Table 3 (Qwen3-32B, 100 programs) below, for comparison."""
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


TABLE3 = (("algorithm", "algorithm"), ("policy", "policy"), ("runs", "runs"), ("avg_samples", "avg #samples"),
          ("max_samples", "max #samples"), ("avg_speedup", "avg speedup"), ("median_speedup", "median speedup"),
          ("max_speedup", "max speedup"), ("eff_ratio_of_avgs", "search efficiency"),
          ("eff_avg_of_ratios", "efficiency (avg of ratios)"))
TABLE4 = (("algorithm", "algorithm"), ("policy", "policy"), ("avg_strategies", "avg #strategies"),
          ("max_strategies", "max #strategies"))
# spec search.md 7.2: method, avg #samples, max #samples, avg / median / max speedup, search efficiency
PAPER_TABLE3 = (("Greedy", 35.91, 41, 20.79, 1.78, 193.55, 0.58), ("Beam", 103.17, 114, 42.90, 4.57, 561.82, 0.60),
                ("BFS", 28.27, 31, 18.27, 2.11, 173.13, 0.65), ("DFS", 28.11, 31, 20.97, 1.68, 242.62, 0.75),
                ("MCTS", 17.41, 21, 24.96, 4.54, 171.9, 1.43), ("Chain", 16.63, 21, 23.62, 2.05, 286.92, 1.42),
                ("Chain w/o parent", 15.95, 21, 20.25, 4.96, 96.14, 1.63),
                ("Chain on A100", 16.85, 21, 22.01, 3.62, 265.35, 1.31))


def _cell(v) -> str:
    return f"{v:.2f}" if isinstance(v, float) else ("-" if v is None else str(v))


def _table(rows: list[dict], columns) -> list[str]:
    lines = ["| " + " | ".join(h for _, h in columns) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join(_cell(r[k]) for k, _ in columns) + " |" for r in rows]


def tables(rows: list[dict], paper: bool = False) -> str:
    """The paper's Table 3 and Table 4 columns (and, with ``paper``, its Table 3 figures)."""
    lines = ["Table 3: samples, speedup, search efficiency", ""] + _table(rows, TABLE3)
    lines += ["", "Table 4: distinct strategies on the best trajectory", ""] + _table(rows, TABLE4)
    if paper:
        lines += ["", "Paper, Table 3 (Qwen3-32B fine-tuned, 100 programs, H20-3e)", "",
                  "| method | avg #samples | max #samples | avg speedup | median speedup | max speedup | search "
                  "efficiency |", "|---|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(_cell(v) if not isinstance(v, int) else str(v) for v in row) + " |"
                  for row in PAPER_TABLE3]
    return "\n".join(lines)


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
    ap.add_argument("--json", action="store_true", help="every metric as JSON")
    ap.add_argument("--full", action="store_true", help="every metric in one table (the field names of --json)")
    ap.add_argument("--paper", action="store_true", help="the paper's Table 3 below, for comparison")
    a = ap.parse_args(argv)
    if not Path(a.directory).is_dir():
        raise LeirError("not a directory", file=a.directory)
    records = load_dir(a.directory)
    if not records:
        raise LeirError("no complete search trajectories here", file=a.directory)
    rows = summarize(records)
    print(json.dumps(rows, indent=1) if a.json else markdown(rows) if a.full else tables(rows, a.paper))
    return 0


if __name__ == "__main__":
    sys.exit(main())
