"""Search against the tools users would otherwise pick (TVM MetaSchedule, torch eager), on llvm.

    python benchmarks/search.py [--out DIR] [--phase search|tune|heldout|torch|table|all] [--algorithms ...]
                                [--policies cost,measure,random] [--budget 64] [--early 16] [--tune-trials 64]
                                [--threads 1,2] [--heldout-algorithms greedy] [--ffi-path DIR]

Phases (each resumable: finished pieces are files under DIR and are skipped when run again;
run it in pieces on a small machine). ``--threads`` lists the thread counts compared: the
searches and the comparison with torch run once per count (``DIR/threadsT/``), with TVM's pool of
that size (``TVM_NUM_THREADS`` in the timing workers) and torch at the same count; MetaSchedule
and the held-out programs run at the first count.

* ``search``: every workload x algorithm x policy with ``--budget`` samples. The budget only
  stops a run (no algorithm or policy depends on it), so the best reached within the first
  ``--early`` samples is what a run with that budget finds: both columns come from one run
  (the early one is the search-time measurement, the full one is confirmed by re-timing
  against the original in alternation). ``random`` runs with seeds 0, 1, 2. Every run's best
  trajectory is replayed (``search.replay``) and its samples checked against the budget.
* ``tune``: ``tune_tir`` (XGBoost cost model) on the plain TIR of the original with ``--early``
  and ``--tune-trials`` trials, and on the plain form (``search.plain``) of our best programs with
  ``--tune-trials`` trials (rewrite-then-tune), one subprocess per workload (``python -m
  search.tune --jobs``: a crash is a result).
* ``heldout``: KernelBench-style workloads of the library translated at reduced shapes
  (programs no run above saw): ``--heldout-algorithms`` with every policy (the database the
  search phase wrote for ``cost``) at ``--early`` and ``--budget`` samples, random with 3 seeds;
  every best trajectory is replayed.
* ``torch``: per thread count, the machine's limits (``benchmarks/roofline.py``: library SGEMM
  and a streaming copy, in and out of cache), then each workload's best program (the highest
  confirmed speedup of its runs at that count, or at the first count when there are none there;
  held-out: at ``--budget``) against torch eager, timed in
  alternation in one process (``benchmarks/versus.py``): torch with preallocated outputs
  (``out=``, where the workload has that form; the fair comparison for a function that writes
  into the buffers it is given) and torch allocating its outputs. A library workload runs its own
  model, a bundled example its function from ``benchmarks/torch_eager.py`` (checked against our
  lowering's output first).
* ``table``: markdown + JSON + a plot; samples-to-reach X per run (X = random's median best at the
  same budget, X = MetaSchedule's best at ``--tune-trials``), and per thread count the best
  program's GFLOP/s (compute-bound) or effective GB/s (memory-bound) next to torch's and the
  machine's measured limit, with the fraction of it each reaches.
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
RANDOM_SEEDS = (0, 1, 2)          # a random policy's figures are the median over these seeds
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
    """One search, resumed from ``out`` when complete; timed in the verifier's timed build."""
    from search import SearchOptions
    from search.run import run_search
    if out.exists() and json.loads(out.read_text()).get("complete"):
        return json.loads(out.read_text())
    out.parent.mkdir(parents=True, exist_ok=True)
    opts = SearchOptions(algorithm=algorithm, policy=policy, budget=budget, seed=seed,
                         cost_db=cost_db if policy == "cost" else None, build=verifier.timed_build)
    t0 = time.perf_counter()
    traj = run_search(program, opts, engine=engine, verifier=verifier, out=str(out), progress=lambda m: None)
    b = traj.best
    log(f"{program.name} {algorithm}/{policy}: {b['speedup']:.3f}x confirmed ({b['search_speedup']:.3f}x search) "
        f"{traj.samples} samples, {time.perf_counter() - t0:.0f} s")
    return traj.record


def seeds(policy: str) -> tuple:
    return RANDOM_SEEDS if policy == "random" else (0,)


def run_path(folder: Path, stem: str, seed: int) -> Path:
    return folder / (f"{stem}.json" if seed == 0 else f"{stem}-s{seed}.json")


def checked(rec: dict, path: Path) -> dict:
    """The run's replay of its best trajectory and its budget check (kept beside it: replay
    re-times, so it is done once)."""
    from engine.leir.files import write_atomic
    from search.replay import replay
    side = path.with_suffix(".check.json")
    if side.exists():
        return json.loads(side.read_text())
    rp = replay(rec)
    out = {"replayed": bool(rp.get("reproduced") and rp.get("equal")), "replay": rp,
           "samples": rec["summary"]["samples"], "budget": rec["options"]["budget"],
           "within_budget": rec["summary"]["samples"] <= rec["options"]["budget"]}
    write_atomic(side, json.dumps(out, indent=1))
    return out


def median(xs):
    import statistics
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


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


def tdir(a, threads: int) -> Path:
    """Where the runs and comparisons at one thread count live."""
    return a.out / f"threads{threads}"


def set_threads(threads: int) -> None:
    """TVM's thread pool size for the worker processes started from now on (a pool is sized when
    its process starts)."""
    os.environ["TVM_NUM_THREADS"] = str(threads)


def engine_of_search():
    from engine import Engine
    from search import SearchOptions
    return Engine(strategies=SearchOptions().strategies)


def phase_search(a, progs):
    from lowering import Verifier
    engine = engine_of_search()
    for t in a.threads:
        set_threads(t)
        with Verifier("llvm", trials=3, timeout=300, repeat=7, timed_build=a.build) as verifier:
            for name in a.workloads:
                for alg in a.algorithms:
                    for pol in a.policies:
                        for seed in seeds(pol):
                            path = run_path(tdir(a, t) / "runs" / name, f"{alg}-{pol}", seed)
                            rec = run_one(progs[name], alg, pol, a.budget, path, engine, verifier,
                                          cost_db=str(tdir(a, t) / "costdb.jsonl"), seed=seed)
                            checked(rec, path)


def load_runs(a, name, threads: int | None = None):
    out = []
    t = a.threads[0] if threads is None else threads
    for p in sorted((tdir(a, t) / "runs" / name).glob("*.json")):
        if p.name.endswith(".check.json"):
            continue
        rec = json.loads(p.read_text())
        if rec.get("complete"):
            side = p.with_suffix(".check.json")
            rec["check"] = json.loads(side.read_text()) if side.exists() else None
            out.append(rec)
    return out


# ------------------------------------------------------------------------------------ tune


def phase_tune(a, progs):
    from engine.leir.parser import parse_body
    from search.plain import plain_program
    (a.out / "tune").mkdir(parents=True, exist_ok=True)
    for name in a.workloads:
        res_path = a.out / "tune" / f"{name}.jsonl"
        done = {d["name"] for d in map(json.loads, res_path.read_text().splitlines()) if d.get("ok")} \
            if res_path.exists() else set()
        prog = progs[name]
        runs = load_runs(a, name)
        jobs = [{"name": f"ms{a.early}", "program": prog.to_json(), "original": prog.to_json(), "trials": a.early},
                {"name": f"ms{a.tune_trials}", "program": prog.to_json(), "original": prog.to_json(),
                 "trials": a.tune_trials}]
        if runs:
            # our fastest programs (every run's verified nodes, by search-time speedup) whose plain form
            # differs from the original's: one that is loop schedules only (tiles, annotations) is the
            # original again once plain, and tune-alone covers it. search.tune tunes their plain form;
            # the next is tried when MetaSchedule finds no schedule for one.
            base = plain_program(prog).to_leir()
            nodes = sorted((n for r in runs for n in r["nodes"] if n.get("depth")), key=lambda n: -n["speedup"])
            cands = [prog.with_body(parse_body(t)) for t in dict.fromkeys(n["leir"] for n in nodes)]
            bps = [c.to_json() for c in cands if plain_program(c).to_leir() != base][:4]
            if bps:
                jobs.append({"name": f"rewrite+ms{a.tune_trials}", "program": bps[0], "alternatives": bps[1:],
                             "original": prog.to_json(), "trials": a.tune_trials})
        jobs = [j for j in jobs if j["name"] not in done]
        if not jobs:
            continue
        jf = a.out / "tune" / f"{name}.jobs.json"
        jf.write_text(json.dumps(jobs))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (a.ffi_path, str(ROOT)) if p),
                   TVM_NUM_THREADS=str(a.threads[0]))
        log(f"{name}: MetaSchedule {', '.join(j['name'] for j in jobs)}")
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "search.tune", str(jf), "--jobs", "--build", a.build], cwd=ROOT, env=env,
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


def heldout_key(name, alg, pol, budget, seed) -> str:
    return f"{name}/{alg}/{pol}/b{budget}/s{seed}"


def phase_heldout(a):
    from engine.leir.files import write_atomic
    from lowering import Verifier
    engine = engine_of_search()
    set_threads(a.threads[0])
    res_path = a.out / "heldout.json"
    results = json.loads(res_path.read_text()) if res_path.exists() else {}
    with Verifier("llvm", trials=3, timeout=300, repeat=7, timed_build=a.build) as verifier:
        for name, shapes in HELDOUT:
            prog = library_program(name, shapes)
            for budget in sorted({a.early, a.budget}):
                for alg in a.heldout_algorithms:
                    for pol in a.policies:
                        for seed in seeds(pol):
                            key = heldout_key(name, alg, pol, budget, seed)
                            if key in results:
                                continue
                            path = a.out / "heldout" / name / f"{alg}-{pol}-b{budget}-s{seed}.json"
                            rec = run_one(prog, alg, pol, budget, path, engine, verifier,
                                          cost_db=str(a.out / "costdb.jsonl"), seed=seed)
                            results[key] = {"program": name, "algorithm": alg, "policy": pol, "budget": budget,
                                            "seed": seed, "speedup": rec["best"]["speedup"],
                                            "leir": rec["best"]["leir"],
                                            "search_speedup": rec["best"]["search_speedup"],
                                            "curve": rec["summary"]["curve"],
                                            "strategies": rec["best"]["strategies"], "check": checked(rec, path),
                                            "original_ms": rec["original"]["median_ms"]}
                            write_atomic(res_path, json.dumps(results, indent=1))


# ------------------------------------------------------------------------------------ torch


def best_program(runs: list, original):
    """The program of the run whose best has the highest confirmed speedup (None without runs)."""
    from engine.leir.parser import parse_body
    runs = [r for r in runs if r.get("best")]
    if not runs:
        return None
    best = max(runs, key=lambda r: r["best"]["speedup"])
    return original.with_body(parse_body(best["best"]["leir"]))


def phase_torch(a, progs):
    """Per thread count: the machine's limits, then every workload's best program against torch
    (held-out programs at the first count)."""
    import roofline
    import torch_eager
    from versus import in_process
    from lowering.measure import machine_label
    from engine.leir.files import write_atomic
    for name in a.workloads:           # our lowering and the torch functions agree
        if name in torch_eager.EXAMPLES:
            err = torch_eager.check_example(name, progs[name])
            if err > 1e-4:
                raise RuntimeError(f"{name}: torch function differs from our lowering ({err:.2e})")
    held = json.loads((a.out / "heldout.json").read_text()) if (a.out / "heldout.json").exists() else {}
    for t in a.threads:
        path = tdir(a, t) / "torch.json"
        done = json.loads(path.read_text()) if path.exists() else {}
        if "machine" not in done:
            done["machine"] = {**machine_label("llvm"), **roofline.calibrate(t)}
            log(f"{t} thread(s): SGEMM {done['machine']['sgemm_gflops']:.1f} GFLOP/s, copy "
                f"{done['machine']['copy_gbs_cache']:.1f} GB/s in cache, {done['machine']['copy_gbs_stream']:.1f} GB/s "
                "streaming")
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps(done, indent=1))
        # a count without runs of its own takes the best program searched at the first count
        todo = [(n, None, best_program(load_runs(a, n, t) or load_runs(a, n, a.threads[0]), progs[n]))
                for n in a.workloads]
        if t == a.threads[0]:
            for name, shapes in HELDOUT:
                runs = [{"best": {"speedup": d["speedup"], "leir": d["leir"]}} for d in held.values()
                        if d["program"] == name and d["budget"] == a.budget and d.get("leir")]
                if not runs:            # not searched (no heldout phase): the original is not "ours"
                    continue
                prog = library_program(name, shapes)
                todo.append((name, shapes, best_program(runs, prog) or prog))
        for name, shapes, prog in todo:
            if name in done or prog is None:
                continue
            lib = GEMM_ACT if name == "gemm_relu" else (name, shapes) if shapes else None
            job = {"workload": lib[0] if lib else name, "shapes": lib[1] if lib else None, "threads": t,
                   "program": prog.to_json(), "build": a.build}
            row = in_process(job)
            row.update(work=roofline.work(progs[name] if name in progs else library_program(name, shapes)),
                       searched_at=t if name not in progs or load_runs(a, name, t) else a.threads[0])
            done[name] = row
            log(f"{name} at {t} thread(s): ours {row['ours']['median_ms']:.4f} ms, torch "
                + (f"{row['torch']['median_ms']:.4f} ms preallocated, " if "torch" in row else "")
                + f"{row['torch_alloc']['median_ms']:.4f} ms allocating")
            write_atomic(path, json.dumps(done, indent=1))


def load_torch(a, threads: int | None = None) -> dict:
    p = tdir(a, a.threads[0] if threads is None else threads) / "torch.json"
    return json.loads(p.read_text()) if p.exists() else {}


# ------------------------------------------------------------------------------------ table


def _fmt(v):
    return "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))


def _md(cols, rows) -> list[str]:
    return (["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
            + ["| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |" for r in rows])


def method_rows(a, runs, x_ms, torch_ms) -> list[dict]:
    """One row per algorithm/policy (medians over a random policy's seeds); samples-to-reach
    X on the search-time curve: X = random's median best at the same budget, MetaSchedule's best."""
    by = {}
    for r in runs:
        by.setdefault((r["options"]["algorithm"], r["options"]["policy"]), []).append(r)
    rand = {alg: {n: median(best_within(r, n) for r in rs) for n in (a.early, a.budget)}
            for (alg, pol), rs in by.items() if pol == "random"}
    rows = []
    for (alg, pol), rs in sorted(by.items()):
        conf = median(r["best"]["speedup"] for r in rs)
        orig_ms = median(r["original"]["median_ms"] for r in rs)
        best_ms = orig_ms / conf if conf else None
        row = {"method": f"{alg}/{pol}", "seeds": len(rs), "original_ms": orig_ms,
               f"best@{a.early}": median(best_within(r, a.early) for r in rs),
               f"best@{a.budget}": median(best_within(r, a.budget) for r in rs),
               f"confirmed@{a.budget}": conf, "best_ms": best_ms,
               "x_torch": best_ms / torch_ms if best_ms and torch_ms else None,
               "reach_ms": median(samples_to_reach(r, x_ms) for r in rs) if x_ms else None,
               "within_budget": all(r["summary"]["samples"] <= r["options"]["budget"] for r in rs),
               "replayed": all(r.get("check") and r["check"]["replayed"] for r in rs),
               "strategies": median(len(r["best"]["strategies"]) for r in rs),
               "samples": max(r["summary"]["samples"] for r in rs)}
        for n in (a.early, a.budget):
            x = rand.get(alg, {}).get(n)
            row[f"reach_random@{n}"] = median(samples_to_reach(r, x) for r in rs) if x and pol != "random" else None
        rows.append(row)
    return rows


def torch_ms_of(row: dict | None) -> float | None:
    """Torch's figure of a comparison row: preallocated outputs where the workload has that form,
    else allocating."""
    if not row:
        return None
    return (row.get("torch") or row.get("torch_alloc") or {}).get("median_ms")


def versus_rows(a) -> list[dict]:
    """Per thread count and workload: our best program, torch (preallocated, allocating) and the
    machine's limit, each as a time, a rate (GFLOP/s or GB/s) and a fraction of the limit."""
    import roofline
    rows = []
    for t in a.threads:
        done = load_torch(a, t)
        peak = done.get("machine")
        for name, row in done.items():
            if name == "machine":
                continue
            ours = row["ours"]["median_ms"]
            pre = (row.get("torch") or {}).get("median_ms")
            alloc = row["torch_alloc"]["median_ms"]
            f_ours = roofline.figure(ours, row["work"], peak)
            f_torch = roofline.figure(pre or alloc, row["work"], peak)
            limit = None
            if peak:
                limit = (peak["sgemm_gflops"] if f_ours["bound"] == "compute" else
                         peak["copy_gbs_cache"] if row["work"]["bytes"] <= 2 * roofline.L2_BYTES
                         else peak["copy_gbs_stream"])
            rows.append({"workload": name, "threads": t, "searched_at": row.get("searched_at", t),
                         "bound": f_ours["bound"], "unit": f_ours["unit"],
                         "ours_ms": ours, "ours_rate": f_ours["rate"], "ours_of_peak": f_ours["of_peak"],
                         "torch_ms": pre, "torch_alloc_ms": alloc, "torch_rate": f_torch["rate"],
                         "torch_of_peak": f_torch["of_peak"], "peak": limit,
                         "x_torch": ours / pre if pre else None, "x_torch_alloc": ours / alloc,
                         "held_out": name not in a.workloads})
    return rows


def phase_table(a, progs):
    from engine.leir.files import write_atomic
    rows, summary = [], {}
    torch = load_torch(a)
    torch = {n: {"torch_ms": torch_ms_of(r)} for n, r in torch.items() if n != "machine"}
    ms_name = f"ms{a.tune_trials}"
    rt_name = f"rewrite+ms{a.tune_trials}"
    for name in a.workloads:
        tune = load_tune(a, name)
        ms_full = tune.get(ms_name, {})
        ms_sp = ms_full.get("speedup") if ms_full.get("ok") else None
        torch_ms = torch.get(name, {}).get("torch_ms")
        ours = method_rows(a, load_runs(a, name), ms_sp, torch_ms)
        for r in ours:
            r["workload"] = name
        rows += ours
        for k in (f"ms{a.early}", ms_name, rt_name):
            d = tune.get(k)
            if d:
                sp = d.get("speedup") if d.get("ok") else None
                best_ms = d.get("tuned_ms") if d.get("ok") else None
                rows.append({"workload": name, "method": f"MetaSchedule {k}", "original_ms": d.get("original_ms"),
                             f"best@{a.early}": sp if k == f"ms{a.early}" else None,
                             f"best@{a.budget}": sp if k != f"ms{a.early}" else None,
                             f"confirmed@{a.budget}": sp if k != f"ms{a.early}" else None, "best_ms": best_ms,
                             "x_torch": best_ms / torch_ms if best_ms and torch_ms else None,
                             "samples": d.get("measured"), "ok": d.get("ok"), "reason": d.get("reason")})
        if torch_ms:
            rows.append({"workload": name, "method": f"torch eager ({a.threads[0]} threads)",
                         "best_ms": torch_ms, "x_torch": 1.0})
        best_ours = max((r[f"confirmed@{a.budget}"] for r in ours if r[f"confirmed@{a.budget}"]), default=None)
        reach = [r["reach_ms"] for r in ours if r["reach_ms"] is not None]
        rt = tune.get(rt_name, {})
        best_ms = min((r["best_ms"] for r in ours if r["best_ms"]), default=None)
        summary[name] = {"ours_best_confirmed": best_ours, "metaschedule": ms_sp,
                         "fewest_samples_to_reach_metaschedule": min(reach) if reach else None,
                         "reached_with_quarter_budget": bool(reach) and min(reach) <= a.budget // 4,
                         "rewrite_then_tune": rt.get("speedup") if rt.get("ok") else None,
                         "rewrite_then_tune_beats_tune": (rt.get("speedup") or 0) > (ms_sp or float("inf")),
                         "torch_ms": torch_ms, "ours_best_ms": best_ms,
                         "ours_x_slower_than_torch": best_ms / torch_ms if best_ms and torch_ms else None,
                         "all_within_budget": all(r["within_budget"] for r in ours),
                         "all_replayed": all(r["replayed"] for r in ours)}
    cols = ["workload", "method", "seeds", "original_ms", f"best@{a.early}", f"best@{a.budget}",
            f"confirmed@{a.budget}", "best_ms", "x_torch", f"reach_random@{a.early}", f"reach_random@{a.budget}",
            "reach_ms", "within_budget", "replayed", "strategies", "samples"]
    md = _md(cols, rows)
    md += ["", "| workload | ours (confirmed) | MetaSchedule | fewest samples to reach MS | <= budget/4 | "
           "rewrite+MS | rewrite+MS > MS | torch ms | ours / torch | within budget | replayed |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    md += [f"| {n} | {_fmt(s['ours_best_confirmed'])} | {_fmt(s['metaschedule'])} | "
           f"{_fmt(s['fewest_samples_to_reach_metaschedule'])} | {s['reached_with_quarter_budget']} | "
           f"{_fmt(s['rewrite_then_tune'])} | {s['rewrite_then_tune_beats_tune']} | {_fmt(s['torch_ms'])} | "
           f"{_fmt(s['ours_x_slower_than_torch'])} | {s['all_within_budget']} | {s['all_replayed']} |"
           for n, s in summary.items()]
    held_rows = heldout_rows(a, torch)
    if held_rows:
        md += ["", "Held-out (medians over random's seeds): confirmed speedup, samples to reach random's median "
               "best at the same budget, torch eager", ""]
        md += _md(["program", "budget", "method", "seeds", "speedup", "reach_random", "within_budget", "replayed",
                   "best_ms", "torch_ms", "x_torch"], held_rows)
    vs = versus_rows(a)
    if vs:
        md += ["", "The best program of each workload against torch eager and the machine, timed in alternation "
               "(medians; torch with preallocated outputs where it has them; rate: GFLOP/s when compute-bound, "
               "else GB/s of the minimal traffic; of_peak: the fraction of the measured SGEMM or copy rate)", ""]
        md += _md(["workload", "threads", "searched_at", "bound", "unit", "ours_ms", "ours_rate", "ours_of_peak", "torch_ms",
                   "torch_alloc_ms", "torch_rate", "torch_of_peak", "peak", "x_torch", "x_torch_alloc"], vs)
    text = "\n".join(md) + "\n"
    write_atomic(a.out / "table.md", text)
    write_atomic(a.out / "table.json", json.dumps({"rows": rows, "summary": summary, "heldout": held_rows,
                                                   "versus": vs}, indent=1))
    plot(a, rows)
    print(text)


def heldout_rows(a, torch) -> list[dict]:
    held = a.out / "heldout.json"
    if not held.exists():
        return []
    h = json.loads(held.read_text())
    groups = {}
    for d in h.values():
        groups.setdefault((d["program"], d["budget"], d["algorithm"], d["policy"]), []).append(d)
    rows = []
    for (prog, budget, alg, pol), ds in sorted(groups.items()):
        rand = groups.get((prog, budget, alg, "random"), [])
        x = median(max([1.0] + [sp for _, sp in d["curve"]]) for d in rand) if rand else None
        sp = median(d["speedup"] for d in ds)
        best_ms = median(d["original_ms"] for d in ds) / sp if sp else None
        tm = torch.get(prog, {}).get("torch_ms")
        rows.append({"program": prog, "budget": budget, "method": f"{alg}/{pol}", "seeds": len(ds), "speedup": sp,
                     "reach_random": median(samples_to_reach({"summary": {"curve": d["curve"]}}, x) for d in ds)
                     if x and pol != "random" else None,
                     "within_budget": all(d["check"]["within_budget"] for d in ds),
                     "replayed": all(d["check"]["replayed"] for d in ds), "best_ms": best_ms, "torch_ms": tm,
                     "x_torch": best_ms / tm if best_ms and tm else None})
    return rows


def plot(a, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(dict.fromkeys(r["workload"] for r in rows))
    methods = ["best ours", f"MetaSchedule ms{a.tune_trials}", f"MetaSchedule rewrite+ms{a.tune_trials}"]
    vals = {m: [] for m in methods}
    for n in names:
        ours = [r[f"confirmed@{a.budget}"] or 0 for r in rows
                if r["workload"] == n and "/" in r["method"] and not r["method"].startswith("Meta")]
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
    ax.set_ylabel(f"speedup over the original (llvm), {a.budget} samples / {a.tune_trials} trials")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out / "search.png")


def check_names(kind: str, names: list, known) -> None:
    """Algorithms and policies come from the search's registries (which grow): a name not there
    is the user's error."""
    from engine.leir.diagnostics import LeirError
    bad = [n for n in names if n not in known]
    if bad:
        raise LeirError(f"unknown {kind} {', '.join(bad)} (known: {', '.join(sorted(known))})")


def main(argv=None) -> int:
    from engine.leir.cli import run_cli
    return run_cli(_main, argv)


def _main(argv) -> int:
    from engine.leir.diagnostics import LeirError
    from search.algorithms import ALGORITHMS as KNOWN_ALGORITHMS
    from search.policies import POLICIES as KNOWN_POLICIES
    from lowering.builds import add_search_build_argument
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-search")
    ap.add_argument("--phase", choices=("search", "tune", "heldout", "torch", "table", "all"), default="all")
    ap.add_argument("--workloads", default=",".join((*EXAMPLES, "gemm_relu")))
    ap.add_argument("--algorithms", default=",".join(ALGORITHMS))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--budget", type=int, default=64)
    ap.add_argument("--early", type=int, default=16)
    ap.add_argument("--tune-trials", type=int, default=64, help="MetaSchedule trials (tune-alone and rewrite+tune)")
    ap.add_argument("--heldout-algorithms", default="greedy")
    ap.add_argument("--threads", default="1,2",
                    help="thread counts compared (TVM's pool and torch's): searches and comparisons run at each, "
                         "MetaSchedule and the held-out programs at the first")
    ap.add_argument("--ffi-path", default=os.environ.get("LEIR_TVM_FFI_PATH", ""),
                    help="a directory holding apache-tvm-ffi 0.1.14.post1, put first on the tuning subprocess's path "
                         "(when the environment has 0.1.15, which crashes MetaSchedule)")
    ap.add_argument("--tune-timeout", type=float, default=3600)
    add_search_build_argument(ap)
    a = ap.parse_args(argv)
    a.workloads = a.workloads.split(",")
    a.algorithms = a.algorithms.split(",")
    a.policies = a.policies.split(",")
    a.heldout_algorithms = a.heldout_algorithms.split(",")
    try:
        a.threads = [int(t) for t in a.threads.split(",")]
    except ValueError:
        a.threads = []
    if not a.threads or any(t < 1 for t in a.threads):
        raise LeirError(f"--threads: expected a comma list of positive counts, got {ap.parse_args(argv).threads!r}")
    check_names("algorithm", a.algorithms + a.heldout_algorithms, KNOWN_ALGORITHMS)
    check_names("policy", a.policies, KNOWN_POLICIES)
    a.out.mkdir(parents=True, exist_ok=True)
    progs = workloads()
    if a.phase in ("search", "all"):
        phase_search(a, progs)
    if a.phase in ("tune", "all"):
        phase_tune(a, progs)
    if a.phase in ("heldout", "all"):
        phase_heldout(a)
    if a.phase in ("torch", "all"):
        phase_torch(a, progs)
    if a.phase in ("table", "all"):
        phase_table(a, progs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
