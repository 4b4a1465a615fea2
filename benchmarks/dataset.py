"""Dataset generation throughput: verified rows per core-minute, against one process per
candidate (the Step-TP reference's way) measured in the same run; with ``--timed``, timed single
rows and timed menu rows per core-minute of the ``--time --menu`` job, with and without
statement-level builds and timings, in the same run.

    .venv/bin/python benchmarks/dataset.py [--programs 8] [--per-program 10] [--baseline 16] [--json]
    .venv/bin/python benchmarks/dataset.py --timed [--programs 8] [--per-program 6] [--depth 2] [--json]

Ours: ``python -m dataset.generate`` on corpus programs (shrunk to 16,384 points) with one
worker: listing, sampling, verifying (3 trials), rendering traces, TIR text and the whole
assembly, every file written. Baseline: for candidates of the same job (its rows, in order), a
fresh ``python -m lowering.verify ORIGINAL CANDIDATE --json`` per candidate, which pays a
process start and a TVM import each time, as the reference's per-candidate scripts do; it
verifies only, so the ratio understates what the reference pays per row. Core time is the CPU
time (user + system) of each process tree, read from ``getrusage(RUSAGE_CHILDREN)`` after it
has been waited for; wall times are reported too.

``--timed``: the same corpus programs through ``python -m dataset.generate --time --menu --shrink
--depth D`` (one worker), once by default (every candidate built, verified and timed
as a whole program) and once with ``--statement-builds`` (programs verified as their slot kernels, one-statement
changes timed by their kernels: ``lowering.compose``, ``lowering.measure.statements``), the two
jobs one after the other, ``--repeat`` times, alternating. Reported per job: timed single rows
(rows with a timing) and timed menu rows (menu rows written; and the menus measured, one per
state, whether or not a faster entry made a row) per core-minute of the job's process tree, the
timing methods and builds, and the load average before and after. Then the agreement of the two
methods on the same rows (rows by id; menu entries by menu row and entry): among those both call
faster or slower, the share with the same verdict, and the flips (faster in one, slower in the
other). The machine's load is reported because the figures are only comparable under the same.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "examples" / "corpus" / "programs.jsonl"


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_timed(cmd: list[str], env: dict) -> tuple[subprocess.CompletedProcess, float, float]:
    c0, t0 = _cpu_children(), time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    return p, _cpu_children() - c0, time.perf_counter() - t0


def pick_programs(n: int) -> list[dict]:
    """``n`` corpus programs spread over the file (every k-th), deterministic."""
    recs = [json.loads(l) for l in CORPUS.read_text().splitlines() if l.strip()]
    step = max(1, len(recs) // n)
    return recs[::step][:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=8, help="corpus programs (default 8)")
    ap.add_argument("--per-program", type=int, help="candidates verified per program and state (default 10; "
                                                    "6 with --timed)")
    ap.add_argument("--baseline", type=int, default=16, help="candidates verified one process each (default 16)")
    ap.add_argument("--timed", action="store_true", help="the --time --menu configuration, with and without "
                                                         "statement-level builds and timings")
    ap.add_argument("--depth", type=int, default=2, help="with --timed: the jobs' --depth (default 2)")
    ap.add_argument("--repeat", type=int, default=1, help="with --timed: runs of each job, alternating (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="with --timed: the jobs' --seed (default 0)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if args.timed:
        from dataset_timed import timed_main
        return timed_main(args, env, pick_programs(args.programs), run_timed)
    args.per_program = args.per_program or 10
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        src = d / "programs.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in pick_programs(args.programs)))
        out = d / "out"
        p, cpu, wall = run_timed([sys.executable, "-m", "dataset.generate", str(src), "-o", str(out),
                                  "--per-program", str(args.per_program), "--shrink", "--max-points", "16384",
                                  "--workers", "1", "--no-plots"], env)
        if p.returncode != 0:
            print(p.stderr, file=sys.stderr)
            return 1
        rows = [json.loads(l) for l in (out / "rows.jsonl").read_text().splitlines()]
        ours = {"rows": len(rows), "cpu_seconds": round(cpu, 2), "wall_seconds": round(wall, 2),
                "rows_per_core_minute": round(len(rows) / (cpu / 60), 2)}

        base_rows, base_cpu, base_wall = 0, 0.0, 0.0
        for k, r in enumerate(rows[:args.baseline]):
            orig, cand = d / f"o{k}.json", d / f"c{k}.json"
            orig.write_text(json.dumps(r["program"]))
            cand.write_text(json.dumps({**r["program"], "leir": r["transformed"]}))
            mode = "exact" if r["step"]["exactness"] == "bitwise" else "strict"
            q, c, w = run_timed([sys.executable, "-m", "lowering.verify", str(orig), str(cand), "--json",
                                 "--trials", "3", "--tolerance", mode], env)
            base_cpu += c
            base_wall += w
            if q.returncode == 0 and json.loads(q.stdout).get("equal"):
                base_rows += 1
        baseline = {"rows": base_rows, "candidates": min(len(rows), args.baseline), "cpu_seconds": round(base_cpu, 2),
                    "wall_seconds": round(base_wall, 2),
                    "rows_per_core_minute": round(base_rows / (base_cpu / 60), 2) if base_cpu else None}
    ratio = round(ours["rows_per_core_minute"] / baseline["rows_per_core_minute"], 2) \
        if baseline["rows_per_core_minute"] else None
    wall_ratio = round((ours["rows"] / ours["wall_seconds"]) / (baseline["rows"] / baseline["wall_seconds"]), 2) \
        if baseline["rows"] else None
    result = {"programs": args.programs, "per_program": args.per_program, "ours": ours,
              "one_process_per_candidate": baseline, "ratio_per_core_minute": ratio, "ratio_per_wall_minute": wall_ratio}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"ours:     {ours['rows']} verified rows in {ours['cpu_seconds']} CPU s ({ours['wall_seconds']} s wall): "
              f"{ours['rows_per_core_minute']} rows per core-minute")
        print(f"baseline: {baseline['rows']}/{baseline['candidates']} verified, one process each, in "
              f"{baseline['cpu_seconds']} CPU s ({baseline['wall_seconds']} s wall): "
              f"{baseline['rows_per_core_minute']} rows per core-minute")
        print(f"ratio:    {ratio}x per core-minute, {wall_ratio}x per wall-minute")
    return 0


if __name__ == "__main__":
    sys.exit(main())
