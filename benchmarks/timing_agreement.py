"""Do ``--time`` labels reproduce? The same job run twice, its verdicts compared row by row.

    PYTHONPATH=. .venv/bin/python benchmarks/timing_agreement.py [--corpus 5] [--per-program 6]
                                                                 [--rounds 20] [--json]

The job: ``python -m dataset.generate SRC --time --shrink`` on the five examples and
``--corpus`` corpus programs spread over the file (ten programs by default), one worker, the
same seed, twice into two folders. Rows are matched by id (a hash of the program and the step,
so both runs have the same rows). Reported, with the machine label and the load average:

* rows both runs call faster-or-slower, and the agreement among them (the issue asks >= 95%),
* flips: rows faster in one run and slower in the other (the issue asks 0),
* rows decisive in one run and ``tie`` in the other, and the agreement over all rows,
* rows per core-minute of the timed job (CPU time of the job's process tree, getrusage).
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


def sources(folder: Path, n_corpus: int) -> Path:
    """The examples plus ``n_corpus`` corpus programs (every k-th), in one folder."""
    src = folder / "src"
    src.mkdir()
    for p in sorted((ROOT / "examples").glob("*.leir")):
        (src / p.name).write_text(p.read_text())
    recs = [json.loads(l) for l in CORPUS.read_text().splitlines() if l.strip()]
    step = max(1, len(recs) // max(1, n_corpus))
    (src / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs[::step][:n_corpus]))
    return src


def run_job(src: Path, out: Path, args) -> dict:
    cmd = [sys.executable, "-m", "dataset.generate", str(src), "-o", str(out), "--time", "--shrink",
           "--per-program", str(args.per_program), "--seed", str(args.seed), "--rounds", str(args.rounds),
           "--no-plots", "--workers", "1"]
    if args.noise_floor is not None:
        cmd += ["--noise-floor", str(args.noise_floor)]
    load = os.getloadavg()
    c0, t0 = _cpu_children(), time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    cpu, wall = _cpu_children() - c0, time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"dataset.generate failed ({p.returncode}):\n{p.stderr[-2000:]}")
    rows = [json.loads(l) for l in (out / "rows.jsonl").read_text().splitlines()]
    timed = [r for r in rows if r["timing"]]
    return {"rows": rows, "timed": len(timed), "cpu_seconds": round(cpu, 1), "wall_seconds": round(wall, 1),
            "rows_per_core_minute": round(len(timed) / (cpu / 60), 2) if cpu else None,
            "load_average_before": [round(x, 2) for x in load],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "verdicts": {v: sum(1 for r in timed if r["timing"]["verdict"] == v) for v in ("faster", "slower", "tie")}}


def agreement(a: list[dict], b: list[dict]) -> dict:
    va = {r["id"]: r["timing"]["verdict"] for r in a if r["timing"]}
    vb = {r["id"]: r["timing"]["verdict"] for r in b if r["timing"]}
    both = sorted(set(va) & set(vb))
    decisive = [i for i in both if va[i] != "tie" and vb[i] != "tie"]
    same = sum(1 for i in decisive if va[i] == vb[i])
    one = sum(1 for i in both if (va[i] == "tie") != (vb[i] == "tie"))
    return {"rows_in_both": len(both), "decisive_in_both": len(decisive),
            "agreement_decisive_pct": round(100 * same / len(decisive), 2) if decisive else None,
            "flips": len(decisive) - same, "decisive_in_one_run_only": one,
            "same_verdict_all_rows_pct": round(100 * sum(va[i] == vb[i] for i in both) / len(both), 2) if both
            else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=int, default=5, help="corpus programs besides the 5 examples (default 5)")
    ap.add_argument("--per-program", type=int, default=6, help="rows per program (default 6)")
    ap.add_argument("--rounds", type=int, default=20, help="--rounds of both jobs (default 20)")
    ap.add_argument("--noise-floor", type=float, help="--noise-floor of both jobs (default: the job's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from lowering.measure import machine_label
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        src = sources(d, args.corpus)
        runs = [run_job(src, d / f"run{k}", args) for k in (1, 2)]
    out = {"machine": machine_label("llvm"), "target": "llvm", "programs": 5 + args.corpus,
           "per_program": args.per_program, "rounds": args.rounds, "noise_floor": args.noise_floor,
           **agreement(runs[0]["rows"], runs[1]["rows"]),
           "runs": [{k: v for k, v in r.items() if k != "rows"} for r in runs]}
    if args.json:
        print(json.dumps(out))
        return 0
    m = out["machine"]
    print(f"machine: {m['cpu']}, {m['cores']} cores (target llvm); {out['programs']} programs, "
          f"--per-program {args.per_program}, --rounds {args.rounds}")
    for k, r in enumerate(out["runs"], 1):
        print(f"run {k}: {r['timed']} timed rows {r['verdicts']}, {r['cpu_seconds']} CPU s, "
              f"{r['wall_seconds']} wall s, {r['rows_per_core_minute']} timed rows per core-minute; load average {r['load_average_before']} -> "
              f"{r['load_average_after']}")
    print(f"rows in both runs: {out['rows_in_both']}; faster-or-slower in both: {out['decisive_in_both']}, "
          f"agreement {out['agreement_decisive_pct']}%, flips (faster in one, slower in the other): {out['flips']}")
    print(f"decisive in one run, tie in the other: {out['decisive_in_one_run_only']}; same verdict over all rows: "
          f"{out['same_verdict_all_rows_pct']}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
