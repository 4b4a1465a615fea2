"""Does a search find the same program on a shared machine? Each benchmark workload searched twice:
on a quiet machine, and with a CPU-bound process pinned to one of the cores.

    PYTHONPATH=. .venv/bin/python benchmarks/shared_machine.py [--out out/shared] [--algorithm kernels]
                                                               [--budget 16] [--workloads matmul,...] [--json]

Both runs use the same options and seed. Their best programs are then timed together against the
original on the quiet machine (one paired comparison, ``lowering.measure``), so the two results are
compared as programs, not as figures measured under different loads. A workload passes when both
runs return the same program (modulo renaming) or the loaded run's program is within 10% of the
quiet run's speedup. Resumable: finished runs are files under OUT. Report the load average: the
quiet runs mean nothing on a busy machine.
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

TOLERANCE = 0.10
HOG = "import os\nos.sched_setaffinity(0, {%d})\nwhile True:\n    pass\n"


def hog(core: int) -> subprocess.Popen:
    """A CPU-bound process pinned to ``core``."""
    return subprocess.Popen([sys.executable, "-c", HOG % core])


def search(program, opts, path: Path, engine, verifier):
    from search.run import run_search
    if path.exists() and json.loads(path.read_text()).get("complete"):
        return json.loads(path.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    return run_search(program, opts, engine=engine, verifier=verifier, out=str(path), progress=lambda m: None).record


def main(argv=None) -> int:
    from lowering.builds import add_search_build_argument
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "shared")
    ap.add_argument("--algorithm", default="kernels")
    ap.add_argument("--policy", default="cost")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--workloads", default="")
    ap.add_argument("--core", type=int, default=(os.cpu_count() or 2) - 1, help="the core the CPU-bound process holds")
    ap.add_argument("--json", action="store_true")
    add_search_build_argument(ap)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    return _main(a)


def bench_workloads() -> dict:
    """The six workloads of ``benchmarks/search.py`` (loaded by path: its module name is the package's)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_search", ROOT / "benchmarks" / "search.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.workloads()


def _main(a) -> int:
    from engine import Engine
    from engine.leir.canonical import renaming_key
    from engine.leir.parser import parse_body
    from lowering import Verifier
    from lowering.measure import Measurer, Protocol, machine_label
    from search import SearchOptions
    progs = bench_workloads()
    names = a.workloads.split(",") if a.workloads else list(progs)
    engine = Engine(strategies="paper")
    opts = SearchOptions(algorithm=a.algorithm, policy=a.policy, budget=a.budget, seed=0, build=a.build)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    rows = []
    with Verifier("llvm", trials=3, timeout=300, timed_build=a.build) as verifier:
        for name in names:
            prog = progs[name]
            quiet = search(prog, opts, a.out / f"{name}-quiet.json", engine, verifier)
            path = a.out / f"{name}-loaded.json"
            h = None if path.exists() else hog(a.core)
            try:
                loaded = search(prog, opts, path, engine, verifier)
            finally:
                if h is not None:
                    h.kill()
                    h.wait()
            bests = [prog.with_body(parse_body(r["best"]["leir"])) for r in (quiet, loaded)]
            same = renaming_key(bests[0]) == renaming_key(bests[1])
            recs = Measurer(verifier, Protocol()).compare(prog, bests, reuse=False)
            sp = [r["speedup"] if r else None for r in recs]
            ok = same or (sp[0] and sp[1] and sp[1] >= (1 - TOLERANCE) * sp[0])
            rows.append({"workload": name, "same_program": same, "quiet_speedup": sp[0], "loaded_program_speedup": sp[1],
                         "quiet_ci": recs[0]["ci"] if recs[0] else None, "loaded_ci": recs[1]["ci"] if recs[1] else None,
                         "reported": [quiet["best"]["speedup"], loaded["best"]["speedup"]], "pass": bool(ok)})
            print(f"{name}: same program {same}; re-timed quietly {sp[0]} vs {sp[1]}: {'pass' if ok else 'FAIL'}",
                  file=sys.stderr, flush=True)
    out = {"machine": machine_label("llvm"), "algorithm": a.algorithm, "policy": a.policy, "budget": a.budget,
           "rows": rows, "passed": sum(r["pass"] for r in rows), "workloads": len(rows),
           "load_average_before": [round(x, 2) for x in load0],
           "load_average_after": [round(x, 2) for x in os.getloadavg()], "seconds": round(time.perf_counter() - t0)}
    (a.out / "shared.json").write_text(json.dumps(out, indent=1))
    if a.json:
        print(json.dumps(out))
    else:
        print("| workload | same program | quiet run's best (re-timed) | loaded run's best (re-timed) | within 10% |")
        print("|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['workload']} | {'yes' if r['same_program'] else 'no'} | {r['quiet_speedup']} | "
                  f"{r['loaded_program_speedup']} | {'yes' if r['pass'] else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
