"""Policies inside the kernel search, against the paper's greedy with random choice, on llvm.

    python benchmarks/kernel_policies.py [--out DIR] [--programs issue,heldout,workloads]
        [--budgets 16,64] [--runs kernels:cost,kernels:random,kernels:measure,greedy:random]
        [--seeds 0,1,2] [--endpoint URL --model NAME] [--build fast|exact] [--search-threads N] [--phase run|table|all]
    python benchmarks/kernel_policies.py --phase torch [--threads 1,2] [--torch-run kernels:cost] ...

Every run is ``python -m search`` with default options but for the algorithm, policy, budget and
seed (``kernels:cost`` is the search's default); a policy that draws (random, random-all,
measure, llm) runs with every ``--seeds`` seed, cost with seed 0. Each run is a trajectory file
under ``DIR/runs/`` (skipped when complete: the phase resumes), its best trajectory replayed
with ``Engine.apply`` and the load average noted before and after. ``table`` writes
``DIR/table.md`` and ``DIR/table.json``: per program the confirmed speedup of each run (medians
over seeds, with the seeds' range), whether the default search beats greedy + random's median at
the same budget, and the machine and target every timing was taken on. ``torch`` (run on its own,
after ``run``) times each KernelBench file's best program against torch eager (``phase_torch``).

Programs: ``issue`` the four KernelBench files of ``benchmarks/kernelbench/`` (translated as
written: reduced shapes), ``heldout`` the six held-out library programs of
``benchmarks/search.py``, ``workloads`` its six benchmark workloads. ``kernels:llm`` needs a
served model (``--endpoint``, ``--model``; e.g. SmolLM2 behind llama.cpp's server, README).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

KERNELBENCH = ROOT / "benchmarks" / "kernelbench"
DRAWS = ("random", "random-all", "measure", "llm")      # policies whose runs differ by seed


def _bench_search():
    spec = importlib.util.spec_from_file_location("bench_search", ROOT / "benchmarks" / "search.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def programs(groups: list[str]) -> dict:
    out = {}
    if "issue" in groups:
        from dataset.translate.graph import translate
        from dataset.translate.kernelbench import load
        for f in sorted(KERNELBENCH.glob("*.py")):
            got = load(f)
            out[f.stem] = translate(got.model, got.inputs, got.name).program
    if "heldout" in groups or "workloads" in groups:
        bs = _bench_search()
        if "heldout" in groups:
            out.update({name: bs.library_program(name, shapes) for name, shapes in bs.HELDOUT})
        if "workloads" in groups:
            out.update(bs.workloads())
    return out


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_path(out: Path, name: str, alg: str, pol: str, budget: int, seed: int) -> Path:
    return out / "runs" / name / f"{alg}-{pol}-b{budget}-s{seed}.json"


def replays(engine, program, best: dict) -> bool:
    p = program
    for st in best["steps"]:
        p = engine.apply(p, st)
    return p.to_leir() == best["leir"]


def one(program, alg: str, pol: str, budget: int, seed: int, path: Path, engine, verifier, a) -> dict:
    from search import SearchOptions
    from search.run import run_search
    if path.exists():
        rec = json.loads(path.read_text())
        if rec.get("complete"):
            return rec
    path.parent.mkdir(parents=True, exist_ok=True)
    opts = SearchOptions(algorithm=alg, policy=pol, budget=budget, seed=seed,
                         endpoint=a.endpoint if pol.startswith("llm") else None,
                         model=a.model if pol.startswith("llm") else None, build=a.build, threads=a.search_threads)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    traj = run_search(program, opts, engine=engine, verifier=verifier, out=str(path), progress=lambda m: None)
    rec = traj.record
    rec["benchmark"] = {"load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2),
                        "seconds": round(time.perf_counter() - t0, 1), "replays": replays(engine, program, rec["best"])}
    from engine.leir.files import write_atomic
    write_atomic(str(path), json.dumps(rec))
    b = rec["best"]
    log(f"{program.name} {alg}/{pol} b{budget} s{seed}: {b['speedup']:.3f}x [{b['ci'][0]:.3f}, {b['ci'][1]:.3f}] "
        f"{rec['summary']['samples']} samples, {rec['benchmark']['seconds']:.0f} s, load "
        f"{rec['benchmark']['load_before']}->{rec['benchmark']['load_after']}")
    return rec


def phase_run(a) -> None:
    from engine import Engine
    from lowering import Verifier
    progs = programs(a.programs)
    engine = Engine(strategies="paper,extra")
    verifier = Verifier("llvm", trials=3, timeout=300, timed_build=a.build, threads=a.search_threads)
    try:
        for name, program in progs.items():
            for budget in a.budgets:
                for alg, pol in a.runs:
                    for seed in (a.seeds if pol in DRAWS else (0,)):
                        one(program, alg, pol, budget, seed, run_path(a.out, name, alg, pol, budget, seed), engine,
                            verifier, a)
    finally:
        verifier.close()


def _cell(recs: list[dict]) -> dict:
    sp = [r["best"]["speedup"] for r in recs]
    return {"median": statistics.median(sp), "min": min(sp), "max": max(sp), "seeds": len(sp),
            "ci": recs[0]["best"]["ci"] if len(recs) == 1 else None,
            "replays": all(r.get("benchmark", {}).get("replays", False) for r in recs),
            "load": [min(r.get("benchmark", {}).get("load_before", 0) for r in recs),
                     max(r.get("benchmark", {}).get("load_after", 0) for r in recs)]}


def phase_table(a) -> None:
    from engine.leir.files import write_atomic
    from lowering.measure import machine_label
    rows = []
    for pdir in sorted((a.out / "runs").iterdir()) if (a.out / "runs").exists() else []:
        for budget in a.budgets:
            row = {"program": pdir.name, "budget": budget, "runs": {}}
            for alg, pol in a.runs:
                recs = [json.loads(p.read_text()) for p in sorted(pdir.glob(f"{alg}-{pol}-b{budget}-s*.json"))]
                recs = [r for r in recs if r.get("complete")]
                if recs:
                    row["runs"][f"{alg}:{pol}"] = _cell(recs)
            d, g = row["runs"].get("kernels:cost"), row["runs"].get("greedy:random")
            row["default_beats_greedy_random"] = (d["median"] > g["median"]) if d and g else None
            rows.append(row)
    cols = [f"{alg}:{pol}" for alg, pol in a.runs]
    lines = [f"Confirmed speedups over the original (llvm, {machine_label('llvm')}); a drawing policy: median of "
             "its seeds [min, max]; kernels:cost is `python -m search PROG` with its defaults.", "",
             "| program | budget | " + " | ".join(cols) + " | default beats greedy:random |",
             "|---|---:|" + "---:|" * len(cols) + "---|"]
    for r in rows:
        cells = []
        for c in cols:
            x = r["runs"].get(c)
            if x is None:
                cells.append("-")
            elif x["seeds"] > 1:
                cells.append(f"{x['median']:.2f} [{x['min']:.2f}, {x['max']:.2f}]")
            else:
                ci = x["ci"] or [x["median"], x["median"]]
                cells.append(f"{x['median']:.2f} ({ci[0]:.2f}-{ci[1]:.2f})")
        beat = {True: "yes", False: "no", None: "-"}[r["default_beats_greedy_random"]]
        lines.append(f"| {r['program']} | {r['budget']} | " + " | ".join(cells) + f" | {beat} |")
    wins = [r["default_beats_greedy_random"] for r in rows if r["default_beats_greedy_random"] is not None]
    lines += ["", f"The default search beats greedy + random on {sum(wins)} of {len(wins)} (program, budget) pairs."]
    write_atomic(str(a.out / "table.md"), "\n".join(lines) + "\n")
    write_atomic(str(a.out / "table.json"), json.dumps({"target": "llvm", "machine": machine_label("llvm"),
                                                        "rows": rows}, indent=1))
    print("\n".join(lines))


def best_run(pdir: Path, run: str, budget: int) -> dict | None:
    """The complete run of ``run`` (alg:pol) at ``budget`` with the highest confirmed speedup."""
    alg, pol = run.split(":", 1)
    recs = [json.loads(p.read_text()) for p in sorted(pdir.glob(f"{alg}-{pol}-b{budget}-s*.json"))]
    recs = [r for r in recs if r.get("complete") and r.get("best")]
    return max(recs, key=lambda r: r["best"]["speedup"]) if recs else None


def phase_torch(a) -> None:
    """Each KernelBench file's best program of ``--torch-run`` at the largest budget against torch eager
    (the file's model on its inputs, allocating its output) at every ``--threads`` count, timed in
    alternation in one process (``benchmarks/versus.py``); the machine's SGEMM and copy rates beside
    (``benchmarks/roofline.py``). Writes ``DIR/torch.md`` and ``DIR/torch.json``."""
    import roofline
    from versus import in_process

    from engine.leir.files import program_from_json, write_atomic
    from engine.leir.parser import parse_body
    from lowering.measure import machine_label
    budget, rows, peaks = max(a.budgets), [], {}
    for t in a.threads:
        peaks[t] = roofline.calibrate(t)
        for f in sorted(KERNELBENCH.glob("*.py")):
            rec = best_run(a.out / "runs" / f.stem, a.torch_run, budget)
            if rec is None:
                continue
            original = program_from_json(rec["program"])
            best = original.with_body(parse_body(rec["best"]["leir"]))
            job = {"workload": f.stem, "kernelbench": str(f.relative_to(ROOT)), "threads": t, "build": rec["options"]["build"]
                   if "build" in rec["options"] else "exact", "program": best.to_json(), "original": original.to_json()}
            got = in_process(job)
            w = roofline.work(original)
            ours, torch_ms, orig = got["ours"]["median_ms"], got["torch_alloc"]["median_ms"], got["original"]["median_ms"]
            rows.append({"program": f.stem, "threads": t, "budget": budget, "run": a.torch_run, "seed": rec["options"]["seed"],
                         "build": job["build"], "confirmed": rec["best"]["speedup"], "ours_ms": ours, "torch_ms": torch_ms,
                         "original_ms": orig, "ours_over_torch": ours / torch_ms,
                         "ours_gflops": w["flops"] / ours / 1e6, "torch_gflops": w["flops"] / torch_ms / 1e6})
            log(f"{f.stem} at {t} thread(s): ours {ours:.4f} ms, torch {torch_ms:.4f} ms ({ours / torch_ms:.2f}x its time)")
    lines = [f"Best program of `{a.torch_run}` at budget {budget} against torch eager (llvm, {machine_label('llvm')}; "
             "medians of 9 alternating rounds in one process; torch allocates its output, as the model does)", "",
             "| program | threads | build | confirmed speedup | ours ms | GFLOP/s | torch ms | GFLOP/s | ours / torch |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['program']} | {r['threads']} | {r['build']} | {r['confirmed']:.2f} | {r['ours_ms']:.4f} | "
              f"{r['ours_gflops']:.1f} | {r['torch_ms']:.4f} | {r['torch_gflops']:.1f} | {r['ours_over_torch']:.2f} |"
              for r in rows]
    lines += [""] + [f"At {t} thread(s): SGEMM {p['sgemm_gflops']:.1f} GFLOP/s, copy {p['copy_gbs_cache']:.1f} GB/s in "
                     f"cache, {p['copy_gbs_stream']:.1f} GB/s streaming" for t, p in peaks.items()]
    write_atomic(str(a.out / "torch.md"), "\n".join(lines) + "\n")
    write_atomic(str(a.out / "torch.json"), json.dumps({"target": "llvm", "machine": machine_label("llvm"), "rows": rows,
                                                        "machine_limits": peaks}, indent=1))
    print("\n".join(lines))


def main(argv=None) -> int:
    from lowering.builds import add_search_build_argument
    ap = argparse.ArgumentParser(prog="python benchmarks/kernel_policies.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/kernel_policies", type=Path)
    ap.add_argument("--programs", default="issue,heldout", help="issue, heldout, workloads (comma list)")
    ap.add_argument("--budgets", default="16")
    ap.add_argument("--runs", default="kernels:cost,kernels:random,kernels:measure,greedy:random",
                    help="algorithm:policy pairs (comma list)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--endpoint")
    ap.add_argument("--model")
    ap.add_argument("--phase", choices=("run", "table", "torch", "all"), default="all",
                    help="all: run then table; torch (not in all): the KernelBench files' best programs against "
                         "torch eager")
    ap.add_argument("--threads", default="1", help="torch phase: thread counts (comma list)")
    ap.add_argument("--search-threads", type=int, help="run phase: the searches' --threads (default: TVM's own)")
    ap.add_argument("--torch-run", default="kernels:cost", help="torch phase: the alg:pol whose best program is timed")
    add_search_build_argument(ap)
    a = ap.parse_args(argv)
    a.programs = a.programs.split(",")
    a.budgets = [int(b) for b in a.budgets.split(",")]
    a.runs = [tuple(r.split(":", 1)) for r in a.runs.split(",")]
    a.seeds = [int(s) for s in a.seeds.split(",")]
    a.threads = [int(t) for t in a.threads.split(",")]
    if any(p.startswith("llm") for _, p in a.runs) and not (a.endpoint and a.model):
        ap.error("an llm run needs --endpoint and --model")
    if a.phase in ("run", "all"):
        phase_run(a)
    if a.phase in ("table", "all"):
        phase_table(a)
    if a.phase == "torch":
        phase_torch(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
