"""Search against the tool users would otherwise pick (TVM MetaSchedule), on llvm.

    python benchmarks/search.py [--out DIR] [--phase search|tune|heldout|table|all] [--algorithms ...]
                                [--policies cost,measure,random] [--budget 64] [--early 16] [--ffi-path DIR]

Phases (each resumable: finished pieces are files under DIR and are skipped when run again;
run it in pieces on a small machine):

* ``search``: every workload x algorithm x policy with ``--budget`` samples. The budget only
  stops a run (no algorithm or policy depends on it), so the best reached within the first
  ``--early`` samples is what a run with that budget finds: both columns come from one run
  (the early one is the search-time measurement, the full one is confirmed by re-timing
  against the original in alternation).
* ``tune``: ``tune_tir`` (XGBoost cost model) on the plain TIR of the original with ``--early``
  and ``--budget`` trials, and on our best program with ``--budget`` trials (rewrite-then-tune),
  one subprocess per workload (``python -m search.tune --jobs``: a crash is a result).
* ``heldout``: KernelBench-style workloads of the library translated at reduced shapes
  (programs no run above saw): greedy with measure, cost (the database the search phase
  wrote) and random at ``--early`` samples; every best trajectory is replayed.
* ``table``: markdown + JSON + a plot.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ALGORITHMS = ("greedy", "beam", "bfs", "dfs", "mcts", "chain", "chain-no-parent")
POLICIES = ("cost", "measure", "random")
EXAMPLES = ("matmul", "softmax", "layernorm", "attention", "conv2d")
# gemm + activation from the workload library (KernelBench level 2), shapes this machine times in ms
GEMM_ACT = ("Gemm_ReLU_Divide", {"B": 64, "N": 128, "M": 96})
HELDOUT = (("Matmul_Swish_Scaling", {"B": 32, "N": 96, "M": 64}),
           ("Gemm_Divide_Sum_Scaling", {"B": 32, "N": 128, "M": 64}),
           ("Conv2d_ReLU_BiasAdd", {"B": 2, "C": 3, "O": 8, "H": 24, "W": 24}),
           ("MLP_ReLU", {"B": 32, "N": 64, "H": 128}),
           ("Swish", {"B": 16, "D": 4096}),
           ("Gemm_Max_Subtract_GELU", {"B": 32, "N": 128, "M": 64}))


def library_program(name: str, shapes: dict):
    from dataset.translate.graph import translate
    from dataset.workloads import instantiate, registry
    w = registry()[name]
    s = dict(w.shapes)
    s.update(shapes)
    inst = instantiate(w, s, "f32")
    return translate(inst.model, inst.inputs(0), name).program


def workloads() -> dict:
    from engine import load_program
    out = {n: load_program(ROOT / "examples" / f"{n}.leir") for n in EXAMPLES}
    out["gemm_relu"] = library_program(*GEMM_ACT)
    return out


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ search


def run_one(program, algorithm, policy, budget, out: Path, engine, verifier, cost_db=None, seed=0):
    from search import SearchOptions
    from search.run import run_search
    if out.exists() and json.loads(out.read_text()).get("complete"):
        return json.loads(out.read_text())
    out.parent.mkdir(parents=True, exist_ok=True)
    opts = SearchOptions(algorithm=algorithm, policy=policy, budget=budget, seed=seed,
                         cost_db=cost_db if policy == "cost" else None)
    t0 = time.perf_counter()
    traj = run_search(program, opts, engine=engine, verifier=verifier, out=str(out), progress=lambda m: None)
    b = traj.best
    log(f"{program.name} {algorithm}/{policy}: {b['speedup']:.3f}x confirmed ({b['search_speedup']:.3f}x search) "
        f"{traj.samples} samples, {time.perf_counter() - t0:.0f} s")
    return traj.record


def best_within(rec: dict, n: int) -> float:
    """Search-time best speedup within the first ``n`` samples."""
    best = 1.0
    for s, sp in rec["summary"]["curve"]:
        if s <= n:
            best = max(best, sp)
    return best


def samples_to_reach(rec: dict, speedup: float):
    for s, sp in rec["summary"]["curve"]:
        if sp >= speedup:
            return s
    return None


def phase_search(a, progs):
    from engine import Engine
    from lowering import Verifier
    engine = Engine(strategies="paper")
    with Verifier("llvm", trials=3, timeout=300, repeat=7) as verifier:
        for name in a.workloads:
            for alg in a.algorithms:
                for pol in a.policies:
                    run_one(progs[name], alg, pol, a.budget, a.out / "runs" / name / f"{alg}-{pol}.json", engine,
                            verifier, cost_db=str(a.out / "costdb.jsonl"))


def load_runs(a, name):
    out = []
    for p in sorted((a.out / "runs" / name).glob("*.json")):
        rec = json.loads(p.read_text())
        if rec.get("complete"):
            out.append(rec)
    return out


# ------------------------------------------------------------------------------------ tune


def phase_tune(a, progs):
    from engine.leir.parser import parse_body
    (a.out / "tune").mkdir(parents=True, exist_ok=True)
    for name in a.workloads:
        res_path = a.out / "tune" / f"{name}.jsonl"
        done = {d["name"] for d in map(json.loads, res_path.read_text().splitlines()) if d.get("ok")} \
            if res_path.exists() else set()
        prog = progs[name]
        runs = load_runs(a, name)
        jobs = [{"name": f"ms{a.early}", "program": prog.to_json(), "original": prog.to_json(), "trials": a.early},
                {"name": f"ms{a.budget}", "program": prog.to_json(), "original": prog.to_json(), "trials": a.budget}]
        if runs:
            # our best programs, best first (MetaSchedule cannot schedule every rewritten TIR: the
            # next one is tried when it finds no schedule)
            ranked = sorted(runs, key=lambda r: -r["best"]["speedup"])
            progs_ = list(dict.fromkeys(r["best"]["leir"] for r in ranked if r["best"]["steps"]))[:4]
            bps = [prog.with_body(parse_body(t)).to_json() for t in progs_]
            if bps:
                jobs.append({"name": f"rewrite+ms{a.budget}", "program": bps[0], "alternatives": bps[1:],
                             "original": prog.to_json(), "trials": a.budget})
        jobs = [j for j in jobs if j["name"] not in done]
        if not jobs:
            continue
        jf = a.out / "tune" / f"{name}.jobs.json"
        jf.write_text(json.dumps(jobs))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (a.ffi_path, str(ROOT)) if p))
        log(f"{name}: MetaSchedule {', '.join(j['name'] for j in jobs)}")
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "search.tune", str(jf), "--jobs"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=a.tune_timeout)
        lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
        if r.returncode != 0 and not lines:
            tail = (r.stderr.strip().splitlines() or ["?"])[-1]
            lines = [json.dumps({"name": j["name"], "ok": False, "reason": f"exit {r.returncode}: {tail[:300]}"})
                     for j in jobs]
        with res_path.open("a") as f:
            for l in lines:
                f.write(l + "\n")
        log(f"{name}: tuned in {time.perf_counter() - t0:.0f} s: " +
            "; ".join(f"{d['name']} {d.get('speedup', 0):.3f}x" if d.get("ok") else f"{d['name']} failed"
                      for d in map(json.loads, lines)))


def load_tune(a, name) -> dict:
    p = a.out / "tune" / f"{name}.jsonl"
    if not p.exists():
        return {}
    out = {}
    for d in map(json.loads, p.read_text().splitlines()):      # a later (successful) retry wins
        if d.get("ok") or d["name"] not in out:
            out[d["name"]] = d
    return out


# ------------------------------------------------------------------------------------ held-out


def phase_heldout(a):
    from engine import Engine
    from lowering import Verifier
    from search.replay import replay
    engine = Engine(strategies="paper")
    res_path = a.out / "heldout.json"
    results = json.loads(res_path.read_text()) if res_path.exists() else {}
    with Verifier("llvm", trials=3, timeout=300, repeat=7) as verifier:
        for name, shapes in HELDOUT:
            prog = library_program(name, shapes)
            for pol in ("measure", "cost", "random"):
                key = f"{name}/{pol}"
                if key in results:
                    continue
                rec = run_one(prog, "greedy", pol, a.early, a.out / "heldout" / f"{name}-{pol}.json", engine,
                              verifier, cost_db=str(a.out / "costdb.jsonl"))
                rp = replay(rec)
                results[key] = {"program": name, "policy": pol, "samples": rec["summary"]["samples"],
                                "budget": a.early, "speedup": rec["best"]["speedup"],
                                "search_speedup": rec["best"]["search_speedup"],
                                "strategies": rec["best"]["strategies"], "replay": rp,
                                "original_ms": rec["original"]["median_ms"]}
                from engine.leir.files import write_atomic
                write_atomic(res_path, json.dumps(results, indent=1))


# ------------------------------------------------------------------------------------ table


def phase_table(a, progs):
    from engine.leir.files import write_atomic
    rows, summary = [], {}
    for name in a.workloads:
        runs = load_runs(a, name)
        tune = load_tune(a, name)
        ms_full = tune.get(f"ms{a.budget}", {})
        ms_sp = ms_full.get("speedup") if ms_full.get("ok") else None
        for r in runs:
            o = r["options"]
            rows.append({"workload": name, "method": f"{o['algorithm']}/{o['policy']}",
                         "original_ms": r["original"]["median_ms"],
                         f"best@{a.early}": best_within(r, a.early),
                         f"best@{a.budget}": best_within(r, a.budget),
                         f"confirmed@{a.budget}": r["best"]["speedup"],
                         "samples_to_reach_ms": samples_to_reach(r, ms_sp) if ms_sp else None,
                         "strategies": len(r["best"]["strategies"]), "samples": r["summary"]["samples"]})
        for k in (f"ms{a.early}", f"ms{a.budget}", f"rewrite+ms{a.budget}"):
            d = tune.get(k)
            if d:
                rows.append({"workload": name, "method": f"MetaSchedule {k}", "original_ms": d.get("original_ms"),
                             f"best@{a.early}": d.get("speedup") if k == f"ms{a.early}" else None,
                             f"best@{a.budget}": d.get("speedup") if k != f"ms{a.early}" else None,
                             f"confirmed@{a.budget}": d.get("speedup") if k != f"ms{a.early}" else None,
                             "samples_to_reach_ms": None, "strategies": None,
                             "samples": d.get("measured"), "ok": d.get("ok"), "reason": d.get("reason")})
        ours = [r for r in rows if r["workload"] == name and not r["method"].startswith("MetaSchedule")]
        best_ours = max((r[f"confirmed@{a.budget}"] for r in ours), default=None)
        reach = [r["samples_to_reach_ms"] for r in ours if r["samples_to_reach_ms"] is not None]
        rt = tune.get(f"rewrite+ms{a.budget}", {})
        summary[name] = {"ours_best_confirmed": best_ours, "metaschedule": ms_sp,
                         "fewest_samples_to_reach_metaschedule": min(reach) if reach else None,
                         "reached_with_quarter_budget": bool(reach) and min(reach) <= a.budget // 4,
                         "rewrite_then_tune": rt.get("speedup") if rt.get("ok") else None,
                         "rewrite_then_tune_beats_tune": (rt.get("speedup") or 0) > (ms_sp or float("inf"))}
    cols = ["workload", "method", "original_ms", f"best@{a.early}", f"best@{a.budget}", f"confirmed@{a.budget}",
            "samples_to_reach_ms", "strategies", "samples"]

    def f(v):
        return "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join(f(r.get(c)) for c in cols) + " |" for r in rows]
    md += ["", "| workload | ours (confirmed) | MetaSchedule | fewest samples to reach MS | <= budget/4 | "
           "rewrite+MS | rewrite+MS > MS |", "|---|---|---|---|---|---|---|"]
    md += [f"| {n} | {f(s['ours_best_confirmed'])} | {f(s['metaschedule'])} | "
           f"{f(s['fewest_samples_to_reach_metaschedule'])} | {s['reached_with_quarter_budget']} | "
           f"{f(s['rewrite_then_tune'])} | {s['rewrite_then_tune_beats_tune']} |" for n, s in summary.items()]
    held = a.out / "heldout.json"
    if held.exists():
        h = json.loads(held.read_text())
        md += ["", f"Held-out (greedy, {a.early} samples): speedup (confirmed) per policy, replayed?",
               "", "| program | measure | cost | random |", "|---|---|---|---|"]
        for name, _ in HELDOUT:
            cells = []
            for pol in ("measure", "cost", "random"):
                d = h.get(f"{name}/{pol}")
                cells.append("-" if d is None else f"{d['speedup']:.3f} ({'ok' if d['replay']['reproduced'] and d['replay']['equal'] else 'NO'})")
            md.append(f"| {name} | " + " | ".join(cells) + " |")
    text = "\n".join(md) + "\n"
    write_atomic(a.out / "table.md", text)
    write_atomic(a.out / "table.json", json.dumps({"rows": rows, "summary": summary}, indent=1))
    plot(a, rows)
    print(text)


def plot(a, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(dict.fromkeys(r["workload"] for r in rows))
    methods = ["best ours", f"MetaSchedule ms{a.budget}", f"MetaSchedule rewrite+ms{a.budget}"]
    vals = {m: [] for m in methods}
    for n in names:
        ours = [r[f"confirmed@{a.budget}"] for r in rows if r["workload"] == n and not r["method"].startswith("Meta")]
        vals["best ours"].append(max(ours) if ours else 0)
        for m in methods[1:]:
            got = [r[f"confirmed@{a.budget}"] for r in rows if r["workload"] == n and r["method"] == m]
            vals[m].append(got[0] or 0 if got else 0)
    fig, ax = plt.subplots(figsize=(8, 4), dpi=120)
    w = 0.27
    for i, m in enumerate(methods):
        ax.bar([x + (i - 1) * w for x in range(len(names))], vals[m], w, label=m)
    ax.axhline(1.0, color="grey", ls="--", lw=0.8)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel(f"speedup over the original (llvm), {a.budget} measurements")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out / "search.png")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-search")
    ap.add_argument("--phase", choices=("search", "tune", "heldout", "table", "all"), default="all")
    ap.add_argument("--workloads", default=",".join((*EXAMPLES, "gemm_relu")))
    ap.add_argument("--algorithms", default=",".join(ALGORITHMS))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--budget", type=int, default=64)
    ap.add_argument("--early", type=int, default=16)
    ap.add_argument("--ffi-path", default=os.environ.get("LEIR_TVM_FFI_PATH", ""),
                    help="a directory holding apache-tvm-ffi 0.1.14.post1, put first on the tuning subprocess's path "
                         "(when the environment has 0.1.15, which crashes MetaSchedule)")
    ap.add_argument("--tune-timeout", type=float, default=3600)
    a = ap.parse_args(argv)
    a.workloads = a.workloads.split(",")
    a.algorithms = a.algorithms.split(",")
    a.policies = a.policies.split(",")
    a.out.mkdir(parents=True, exist_ok=True)
    progs = workloads()
    if a.phase in ("search", "all"):
        phase_search(a, progs)
    if a.phase in ("tune", "all"):
        phase_tune(a, progs)
    if a.phase in ("heldout", "all"):
        phase_heldout(a)
    if a.phase in ("table", "all"):
        phase_table(a, progs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
