"""``python -m search.batch PROGRAMS -o DIR``: the paper's multi-step protocol over a set of
programs: every program x algorithm x policy x seed is one search run with the same budget and
options, in worker processes or on Ray (``engine.plumbing.jobs``). Each run is an idempotent
task writing its trajectory to ``DIR/runs/PROGRAM/ALGORITHM.POLICY.sSEED.json`` atomically; run
again, the batch skips finished runs and continues interrupted ones from their trajectory
(the search's ``--resume``: recorded verdicts and timings are reused). ``python -m
search.report DIR`` then prints the paper's Table 3.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from engine.leir.diagnostics import LeirError

EPILOG = """examples:
  python -m search.batch examples/corpus/programs.jsonl -o runs/ --algorithms greedy,mcts --policies cost,random --seeds 0,1 --budget 32 --workers 2
  python -m search.batch progs/ -o runs/ --policies llm --endpoint http://localhost:8000/v1 --model Qwen/Qwen3-8B
  python -m search.report runs/
"""
# search options a batch passes on to every run: (field, type, help); defaults are SearchOptions'
PASSED = (
    ("budget", int, "samples per run (default %(default)s)"),
    ("target", str, "llvm or cuda"),
    ("strategies", str, "strategy set or comma-separated names (--strategy is the same flag)"),
    ("iterations", int, "override the paper's iterations"),
    ("per_node", int, "override the proposals per expansion"),
    ("beam_width", int, "override beam's k"),
    ("max_depth", int, "override BFS/DFS depth"),
    ("rollout_depth", int, "override MCTS rollout length"),
    ("trials", int, "verification trials"),
    ("timeout", float, "seconds per build/run"),
    ("min_repeat_ms", float, "each timed repeat lasts this long at least"),
    ("repeat", int, "timed repeats"),
    ("confirm", int, "best nodes re-timed against the original at the end"),
    ("rounds", int, "most paired timing rounds of a comparison"),
    ("look_every", int, "rounds between two looks of the sequential rule (0: always --rounds)"),
    ("noise_floor", float, "a speedup within 1 +/- this is a tie"),
    ("confidence", float, "confidence of every verdict"),
    ("screen", int, "measure policy: candidates timed per choice"),
    ("explore", float, "cost policy: share of random picks"),
    ("endpoint", str, "llm policies: OpenAI-compatible base URL"),
    ("model", str, "llm policies: the served model's name"),
    ("api_key_env", str, "environment variable holding the API key"),
    ("constraint", str, "llm policy: how answers are tied to the menu"),
    ("temperature", float, "llm policies"),
    ("max_tokens", int, "llm policies"),
    ("llm_timeout", float, "llm policies: seconds per request"),
    ("retries", int, "llm policies: retries on 429/5xx/timeouts"),
    ("menu_size", int, "llm policy: menu entries shown at most"),
    ("menu_detail", str, "llm policy: compact (what changes) or full (whole statements)"),
    ("prompt_tokens", int, "llm policy: the menu prompt's token budget"),
    ("system_prompt", str, "llm policies"),
    ("gpu_name", str, "GPU named in the prompt for --target cuda"),
)


def parser() -> argparse.ArgumentParser:
    from .options import ALGORITHM_NAMES, POLICY_NAMES, SearchOptions
    d = SearchOptions()
    ap = argparse.ArgumentParser(prog="python -m search.batch", epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 description="Search every program with every algorithm x policy x seed (the "
                                             "paper's multi-step protocol); resumable.")
    ap.add_argument("programs", nargs="+", help=".leir/.json/.jsonl program files or folders of them")
    ap.add_argument("-o", "--output", required=True, help="folder of the runs' trajectories (created; resumable)")
    ap.add_argument("--algorithms", default="greedy", help=f"comma list of {', '.join(ALGORITHM_NAMES)} "
                                                           "(default greedy)")
    ap.add_argument("--policies", default="cost", help=f"comma list of {', '.join(POLICY_NAMES)} (default cost)")
    ap.add_argument("--seeds", default="0", help="comma list of seeds (default 0)")
    r = ap.add_argument_group("running")
    r.add_argument("--backend", choices=("local", "ray"), default="local")
    r.add_argument("--workers", type=int, default=1, help="runs at a time (local processes or CPUs of a local Ray)")
    r.add_argument("--address", help="Ray cluster address to join (e.g. 'auto' or HEAD:6379)")
    s = ap.add_argument_group("search options (as for python -m search)")
    for name, typ, text in PASSED:
        flags = ["--" + name.replace("_", "-")] + (["--strategy"] if name == "strategies" else [])
        s.add_argument(*flags, dest=name, type=typ, default=getattr(d, name), help=text)
    from engine.rewrite.rule_sources import add_rules_options
    add_rules_options(ap)
    from engine.leir.cli import say_defaults
    return say_defaults(ap)


def _list(text: str, what: str, noun: str = "", allowed=None, cast=str) -> list:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise LeirError(f"--{what} is empty")
    for t in items:
        if allowed is not None and t not in allowed:
            raise LeirError(f"unknown {noun} '{t}' in --{what} (expected one of {', '.join(allowed)})")
    try:
        return list(dict.fromkeys(cast(t) for t in items))
    except ValueError:
        raise LeirError(f"--{what} must be a comma list of integers, got '{text}'") from None


def _programs(paths: list[str]) -> list[tuple[str, object]]:
    """(run folder name, program) in the order given; names made unique with -2, -3, ..."""
    from engine.leir.files import load_programs
    out, seen = [], {}
    for p in paths:
        for prog in load_programs(p):
            base = "".join(c if c.isalnum() or c in "-_." else "_" for c in prog.name) or "program"
            seen[base] = seen.get(base, 0) + 1
            out.append((base if seen[base] == 1 else f"{base}-{seen[base]}", prog))
    return out


def plan(args) -> list[dict]:
    """Every run of the batch: its task id, output path, program and options."""
    from .options import ALGORITHM_NAMES, POLICY_NAMES, SearchOptions
    algorithms = _list(args.algorithms, "algorithms", "algorithm", ALGORITHM_NAMES)
    policies = _list(args.policies, "policies", "policy", POLICY_NAMES)
    seeds = _list(args.seeds, "seeds", cast=int)
    shared = {name: getattr(args, name) for name, _, _ in PASSED}
    if "," in shared["strategies"]:
        shared["strategies"] = [s.strip() for s in shared["strategies"].split(",") if s.strip()]
    runs = []
    for folder, prog in _programs(args.programs):
        for alg in algorithms:
            for pol in policies:
                for seed in seeds:
                    opts = SearchOptions(algorithm=alg, policy=pol, seed=seed, **shared).validate()
                    tid = f"{folder}/{alg}.{pol}.s{seed}"
                    runs.append({"id": tid, "path": Path(args.output) / "runs" / f"{tid}.json",
                                 "program": prog.to_json(), "options": opts.to_json()})
    return runs


def state_of(run: dict):
    """("done" | "partial" | "new", the recorded trajectory); ``LeirError`` when the file holds a
    run of another program or other options."""
    from .trajectory import load_trajectory
    path = run["path"]
    if not path.exists():
        return "new", None
    try:
        rec = load_trajectory(str(path)).record
    except LeirError:
        return "new", None                   # not a trajectory we wrote whole: start the run again
    from .options import SearchOptions
    if rec["program"] != run["program"] or SearchOptions.from_json(rec["options"]).to_json() != run["options"]:
        raise LeirError("holds a run of another program or with other options; use another output folder",
                        file=str(path))
    return ("done" if rec.get("complete") else "partial"), rec


def crashed(spec: dict, message: str) -> dict:
    return {"status": "crashed", "message": message}


def main(argv=None) -> int:
    from engine.leir.cli import run_cli
    return run_cli(_main, argv)


def _main(argv) -> int:
    a = parser().parse_args(argv)
    if a.workers < 1:
        raise LeirError(f"--workers must be at least 1, got {a.workers}")
    if a.address and a.backend != "ray":
        raise LeirError("--address joins a Ray cluster: use it with --backend ray")
    return run(a)


def run(a) -> int:
    from engine.leir.files import write_atomic
    from engine.plumbing.jobs import backend as job_backend

    from .trajectory import write_trajectory
    t0 = time.perf_counter()
    runs = plan(a)
    bundle = a.rules.bundle()             # the rule files' texts: a worker anywhere loads the same rules
    out = Path(a.output)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    states = {r["id"]: state_of(r) for r in runs}
    tasks = []
    for r in runs:
        st, rec = states[r["id"]]
        if st == "done":
            continue
        r["path"].parent.mkdir(parents=True, exist_ok=True)
        tasks.append((r["id"], {"id": r["id"], "program": r["program"], "options": r["options"], "rules": bundle,
                                "out": str(r["path"]), "resume": rec if st == "partial" else None}))
    by_id = {r["id"]: r for r in runs}
    status = {rid: "done" for rid, (st, _) in states.items() if st == "done"}
    messages: dict[str, str] = {}
    finished = [len(status)]
    print(f"{len(runs)} runs: {len(status)} done, "
          f"{sum(1 for _, s in tasks if s['resume'])} to resume, "
          f"{sum(1 for _, s in tasks if not s['resume'])} to start", file=sys.stderr)

    def commit(tid: str, result: dict) -> None:
        finished[0] += 1
        if result.get("status") == "ok":
            rec = result["record"]
            write_trajectory(str(by_id[tid]["path"]), rec)
            status[tid] = "done"
            best = rec["best"]
            line = f"{best['speedup']:.3f}x, {rec['summary']['samples']} samples ({rec['summary']['stop']})"
        else:
            status[tid] = result.get("status", "error")
            messages[tid] = result.get("message", "")
            line = f"{status[tid]}: {messages[tid].splitlines()[0] if messages[tid] else ''}"
        print(f"[{finished[0]}/{len(runs)}] {tid}: {line}", file=sys.stderr)

    backend = job_backend(a.backend, a.workers, "search.batch_worker", crashed, address=a.address,
                          log=str(out / "workers.log"))
    backend.run(tasks, None, commit)
    summary = {"runs": [{"id": r["id"], "path": str(r["path"].relative_to(out)), "status": status.get(r["id"], "?"),
                         **({"message": messages[r["id"]]} if r["id"] in messages else {})} for r in runs]}
    write_atomic(out / "batch.json", json.dumps(summary, indent=1) + "\n")
    failed = [r for r in summary["runs"] if r["status"] != "done"]
    print(f"{len(runs) - len(failed)} of {len(runs)} runs done -> {out} ({time.perf_counter() - t0:.1f} s); "
          f"python -m search.report {out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
