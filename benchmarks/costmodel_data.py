"""Training moves for the cost model's prior: random searches over the corpus's training programs.

    PYTHONPATH=. .venv/bin/python benchmarks/costmodel_data.py -o out/costdata [--budget 24] [--points 16384]
                                                               [--programs N] [--seed 0] [--strategies paper,extra]

Each corpus program that ``search.costtrain`` does not hold out (its name hash; ``--held-out``: each one it
holds out, for the evaluation) is shrunk as
``dataset.generate --shrink`` does (to about ``--points`` iteration points) and searched with the
``random`` policy, greedy, composite moves on, the search's default strategy set (``--strategies``), ``--budget`` samples: every accepted sample is a move
(one step or a composite move) timed against the node it was made at in paired rounds, at the root
and deeper, which is exactly what the ``cost`` policy ranks. One trajectory per program in
``OUT/trajectories`` (resumable: a finished one is skipped), and one evaluation database
``OUT/evals.jsonl``. Then::

    python -m search.costmodel train OUT/trajectories [DATASET_DIR...] -o search/models/llvm.json --strategies paper,extra
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from search.features import DEFAULT_STRATEGIES  # noqa: E402 - after the path

CORPUS = ROOT / "examples" / "corpus" / "programs.jsonl"


def main(argv=None) -> int:
    from lowering.builds import add_search_build_argument
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--budget", type=int, default=24)
    ap.add_argument("--points", type=int, default=16384, help="shrink programs to about this many points")
    ap.add_argument("--programs", type=int, default=0, help="at most this many programs (0: all training ones)")
    ap.add_argument("--seed", type=int, default=0)
    add_search_build_argument(ap)
    ap.add_argument("--strategies", default=DEFAULT_STRATEGIES,
                    help="the strategy set searched (default: the search's, so the prior knows every move it ranks)")
    ap.add_argument("--held-out", action="store_true",
                    help="the programs the training holds out instead (rows to evaluate the model on: "
                         "benchmarks/costmodel.py)")
    a = ap.parse_args(argv)
    from dataset.generate.shrink import WIDE_GRANULARITIES, shrink_with_granularity, smallest_instance
    from engine import Engine
    from engine.leir.files import program_from_json
    from lowering import Verifier
    from search import SearchOptions
    from search.costtrain import is_held_out
    from search.run_database import RunDatabase, machine_of
    from search.run import run_search
    recs = [json.loads(x) for x in CORPUS.read_text().splitlines() if x.strip()]
    train = [r for r in recs if is_held_out(r["name"]) == a.held_out]
    if a.programs:
        train = train[:a.programs]
    (a.out / "trajectories").mkdir(parents=True, exist_ok=True)
    engine = Engine(strategies=a.strategies)
    db = RunDatabase(str(a.out / "evals.jsonl"), machine=machine_of("llvm"))
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    done = 0
    with Verifier("llvm", trials=3, timeout=300, timed_build=a.build) as verifier:
        for r in train:
            path = a.out / "trajectories" / f"{r['name']}.json"
            if path.exists() and json.loads(path.read_text()).get("complete"):
                done += 1
                continue
            prog = program_from_json(r)
            small, _ = shrink_with_granularity(prog, a.points, WIDE_GRANULARITIES)
            small = small or smallest_instance(prog)[0] or prog
            opts = SearchOptions(algorithm="greedy", policy="random", budget=a.budget, seed=a.seed,
                                 composites="on", confirm=0, strategies=a.strategies, build=a.build)
            try:
                traj = run_search(small, opts, engine=engine, verifier=verifier, out=str(path), database=db,
                                  progress=lambda m: None)
            except Exception as e:          # noqa: BLE001 - a program that does not run here is a note
                print(f"{r['name']}: {e}", file=sys.stderr)
                continue
            done += 1
            acc = sum(1 for s in traj.record["samples"] if s.get("status") == "accepted")
            print(f"[{done}/{len(train)}] {r['name']}: {acc} accepted of {traj.samples} samples "
                  f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    print(json.dumps({"programs": done, "budget": a.budget, "strategies": a.strategies, "seconds": round(time.perf_counter() - t0, 1),
                      "load_average_before": [round(x, 2) for x in load0],
                      "load_average_after": [round(x, 2) for x in os.getloadavg()]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
