"""This checkout's enumeration time against another checkout's, paired and interleaved.

    python benchmarks/enumerate_pair.py OTHER_CHECKOUT [--rounds N] [--set graph_operator|all ...]
                                        [--corpus FILE] [--json]

A round runs ``benchmarks/enumerate.py --set S --json`` of both checkouts, one after the other
(which goes first alternates from round to round), each in a fresh process importing its own
tree. Each program's time in one checkout is paired with its time in the other in the same
round, so a machine that slows down between rounds (another job, thermal state) slows both
sides of a pair alike. The figure per set is ``lowering.measure.stats.derive`` over those pairs: the
median ratio OTHER/THIS (above 1: this checkout is faster) with its sign-test interval, on the
CPU time of the process (``cpu``, which a loaded machine inflates less) and on wall time. A
speed claim needs the interval clear of 1 by more than the noise of the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _run(tree: Path, name: str, corpus: str) -> dict:
    """{program: (cpu seconds, wall seconds)} of one run of ``tree``'s enumeration benchmark."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, str(tree / "benchmarks" / "enumerate.py"), "--set", name, "--corpus",
                           corpus, "--json"], capture_output=True, text=True, check=True, env=env, cwd=tree)
    rows = json.loads(proc.stdout)["sets"][name]["programs"]
    return {r["program"]: (r["cpu_seconds"], r["seconds"]) for r in rows}


def compare(other: Path, sets: list[str], rounds: int, corpus: str, progress=print) -> dict:
    from lowering.measure.stats import CONFIDENCE, derive
    out = {}
    for name in sets:
        pairs: dict[str, list] = {"cpu": [[], []], "wall": [[], []]}
        for r in range(rounds):
            order = [(ROOT, "this"), (other, "other")]
            if r % 2:
                order.reverse()
            got = {label: _run(tree, name, corpus) for tree, label in order}
            for prog, (cpu, wall) in got["this"].items():
                o = got["other"].get(prog)
                if o is None:
                    continue
                pairs["cpu"][0].append(1000 * o[0])
                pairs["cpu"][1].append(1000 * cpu)
                pairs["wall"][0].append(1000 * o[1])
                pairs["wall"][1].append(1000 * wall)
            progress(f"{name}: round {r + 1}/{rounds} done (load average {os.getloadavg()[0]:.1f})")
        out[name] = {}
        for kind, (a, b) in pairs.items():
            d = derive(a, b, CONFIDENCE, 0.0)
            out[name][kind] = {"speedup": d["speedup"], "ci": d["ci"], "other_median_ms": d["parent_ms"],
                               "this_median_ms": d["candidate_ms"], "pairs": len(a)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/enumerate_pair.py", description=__doc__.splitlines()[0])
    ap.add_argument("other", help="the other checkout (its benchmarks/enumerate.py and its package)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--set", action="append", choices=("graph_operator", "all"),
                    help="strategy set(s) to compare (default: both)")
    ap.add_argument("--corpus", default=str(ROOT / "examples" / "corpus" / "programs.jsonl"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    other = Path(args.other).resolve()
    if not (other / "benchmarks" / "enumerate.py").is_file():
        print(f"error: {args.other}: not a leir-engine checkout (no benchmarks/enumerate.py)", file=sys.stderr)
        return 2
    if args.rounds < 1:
        print("error: --rounds must be at least 1", file=sys.stderr)
        return 2
    from lowering.measure.machine import machine_label
    try:
        res = compare(other, args.set or ["graph_operator", "all"], args.rounds, str(Path(args.corpus).resolve()),
                      progress=lambda m: print(m, file=sys.stderr))
    except ValueError as e:        # too few pairs for an interval: a corpus of few programs, few rounds
        print(f"error: {e}: raise --rounds or use a larger --corpus", file=sys.stderr)
        return 2
    record = {"other": other.name, "rounds": args.rounds, "machine": machine_label("llvm"),
              "load_average": [round(x, 2) for x in os.getloadavg()], "sets": res}
    if args.json:
        print(json.dumps(record))
        return 0
    for name, kinds in res.items():
        for kind, d in kinds.items():
            print(f"{name:15s} {kind:4s}: other/this per program {d['speedup']:.3f}x "
                  f"[{d['ci'][0]:.3f}, {d['ci'][1]:.3f}] over {d['pairs']} pairs "
                  f"(median {d['other_median_ms']:.1f} ms other, {d['this_median_ms']:.1f} ms this)")
    print(f"machine: {record['machine']}, load average {record['load_average']} (above 1: this checkout is faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
