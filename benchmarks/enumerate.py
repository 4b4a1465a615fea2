"""Per-program one-step enumeration time over the corpus, in one process after imports.

    python benchmarks/enumerate.py [--set graph_operator|all|both] [--strategy S ...] [--shared]
                                   [--validate] [--repeat N] [--json] [--rules DIR]

For each strategy set it reports median / p90 / max milliseconds per program (wall clock, and
CPU time of the process, which a loaded machine inflates less), neighbours
per program, the median and p90 of every query phase (engine.enumerate's ``phase_seconds``:
encode, facts, push, insert, analysis, step, decode, pop, expand) and the peak resident
memory of the process. Sets: ``graph_operator`` = the paper's graph and operator strategies
(dead-code elimination, a project addition, excluded); ``all`` = every strategy of the rule
files. Each set runs on an engine that loads only its strategies (``Enumerator(strategies=...)``;
``--shared``: one engine with everything loaded), ``both`` runs each set in a process of its own. Enumeration means insert, analyse, step, decode (helper terms evaluated), expand and
merge; each neighbour's body, text and resolved provenances are materialised lazily, so the
listing time (``median_ms``...) is followed by the time to materialise every neighbour's
canonical text and provenances (``materialise_*``) and the sum of both per program
(``with_text_*``). ``--validate`` also re-analyses every neighbour (``Neighbour.program``)
and reports that time separately.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PHASES = ("encode", "facts", "push", "insert", "analysis", "step", "decode", "pop", "expand")


def _ms(xs: list[float]) -> dict:
    ts = sorted(xs)
    return {"median_ms": round(1000 * statistics.median(ts), 2),
            "p90_ms": round(1000 * ts[int(0.9 * (len(ts) - 1))], 2),
            "max_ms": round(1000 * ts[-1], 2)}


def strategy_set(engine, name: str, explicit=None) -> list[str]:
    if explicit:
        return list(explicit)
    if name == "graph_operator":
        return [s.name for s in engine.book.strategies if s.category in ("graph", "operator")
                and s.origin == "paper"]
    return [s.name for s in engine.book.strategies]


def run_set(engine, progs, strategies, validate: bool, repeat: int = 1) -> dict:
    engine.enumerate(progs[0], strategies)  # warm-up: combined ruleset, schedule
    rows = []
    for p in progs:
        best = None
        for _ in range(repeat):             # the fastest of ``repeat`` runs (load spikes only add)
            engine.phase_seconds.clear()
            c0 = time.process_time()
            t0 = time.perf_counter()
            res = engine.enumerate(p, strategies)
            t1 = time.perf_counter()
            c1 = time.process_time()
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, c1 - c0, dict(engine.phase_seconds))
        seconds, cpu_seconds, phases = best
        t1 = time.perf_counter()
        for nb in res.neighbours:      # the lazily built parts: body, fresh names, text, provenances
            _ = nb.leir
            _ = nb.provenances
        t2 = time.perf_counter()
        row = {"program": p.name, "seconds": seconds, "cpu_seconds": cpu_seconds, "neighbours": len(res.neighbours),
               "step_rows": res.step_rows, "phases": phases, "materialise_seconds": t2 - t1,
               "total_seconds": seconds + t2 - t1}
        if validate:
            for nb in res.neighbours:
                _ = nb.program
            row["validate_seconds"] = time.perf_counter() - t2
        rows.append(row)
    summary = {"programs": len(rows), "strategies": len(strategies)}
    summary.update(_ms([r["seconds"] for r in rows]))
    summary.update({"cpu_" + k: v for k, v in _ms([r["cpu_seconds"] for r in rows]).items()})
    m = _ms([r["materialise_seconds"] for r in rows])
    summary["materialise_median_ms"], summary["materialise_p90_ms"] = m["median_ms"], m["p90_ms"]
    m = _ms([r["total_seconds"] for r in rows])
    summary["with_text_median_ms"], summary["with_text_p90_ms"] = m["median_ms"], m["p90_ms"]
    summary["neighbours_median"] = statistics.median(r["neighbours"] for r in rows)
    summary["neighbours_total"] = sum(r["neighbours"] for r in rows)
    summary["phases"] = {ph: {k: v for k, v in _ms([r["phases"].get(ph, 0.0) for r in rows]).items() if k != "max_ms"}
                         for ph in PHASES}
    if validate:
        v = _ms([r["validate_seconds"] for r in rows])
        summary["validate_median_ms"], summary["validate_p90_ms"] = v["median_ms"], v["p90_ms"]
    return {"summary": summary, "programs": rows}


def _measure(args) -> tuple[float, int, dict]:
    """(peak RSS in MiB, compute fallbacks, {set: result}) of the sets ``args`` asks for."""
    from engine.rewrite.enumerator import Enumerator
    from engine.leir.files import load_programs
    progs = load_programs(args.corpus)
    shared = Enumerator(args.rules)
    sets = ["custom"] if args.strategy else ["graph_operator", "all"] if args.set == "both" else [args.set]
    out = {}
    fallbacks = 0
    for name in sets:
        strategies = strategy_set(shared, name, args.strategy)
        eng = shared if args.shared or len(strategies) == len(shared.book.strategies) else \
            Enumerator(args.rules, strategies=strategies)
        out[name] = run_set(eng, progs, strategies, args.validate, max(1, args.repeat))
        out[name]["summary"]["engine"] = "shared" if eng is shared else "dedicated"
        fallbacks += eng.compute_fallbacks if eng is not shared else 0
    fallbacks += shared.compute_fallbacks
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), fallbacks, out


def _each_in_its_own_process(args) -> tuple[float, int, dict]:
    """Both sets, each measured in a fresh process: the second set measured in the process
    that ran the first came out slower (push/pop about 2.5 ms each), an artefact of the
    allocator's state, not of the engine a user would run."""
    import subprocess
    common = ["--corpus", args.corpus, "--repeat", str(args.repeat), "--json"]
    common += (["--rules", args.rules] if args.rules else []) + (["--validate"] if args.validate else [])
    peak, fallbacks, out = 0.0, 0, {}
    for name in ("graph_operator", "all"):
        proc = subprocess.run([sys.executable, __file__, "--set", name, *common],
                              capture_output=True, text=True, check=True)
        d = json.loads(proc.stdout)
        peak = max(peak, d["peak_rss_mib"])
        fallbacks += d["compute_fallbacks"]
        out.update(d["sets"])
    return peak, fallbacks, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(ROOT / "examples" / "corpus" / "programs.jsonl"))
    ap.add_argument("--rules", default=None)
    ap.add_argument("--set", choices=("graph_operator", "all", "both"), default="both")
    ap.add_argument("--strategy", action="append", help="benchmark exactly these strategies instead")
    ap.add_argument("--shared", action="store_true",
                    help="one engine with every strategy loaded for all sets (default: an engine that "
                         "loads only the set's strategies, cheaper per query)")
    ap.add_argument("--validate", action="store_true")
    ap.add_argument("--repeat", type=int, default=1,
                    help="enumerate each program N times and keep the fastest run (steadier on a shared machine)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.set == "both" and not args.strategy and not args.shared:
        peak, fallbacks, out = _each_in_its_own_process(args)
    else:
        peak, fallbacks, out = _measure(args)
    machine = {"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]}
    if args.json:
        print(json.dumps({"peak_rss_mib": peak, "compute_fallbacks": fallbacks, "machine": machine,
                          "sets": out}))
        return 0
    for name, res in out.items():
        s = res["summary"]
        print(f"== {name}: {s['strategies']} strategies, {s['programs']} programs")
        for r in sorted(res["programs"], key=lambda r: -r["seconds"])[:5]:
            print(f"   {r['program']:<50} {1000 * r['seconds']:9.1f} ms {r['neighbours']:6d} neighbours")
        print("   " + " ".join(f"{k}={v}" for k, v in s.items() if k != "phases"))
        print("   phases (median/p90 ms): " + "  ".join(f"{ph} {v['median_ms']}/{v['p90_ms']}"
                                                     for ph, v in s["phases"].items()))
    print(f"peak_rss_mib={peak} compute_fallbacks={fallbacks} cpus={machine['cpus']} "
          f"load_average={machine['load_average']} (timings are wall clock: a loaded machine inflates them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
