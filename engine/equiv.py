"""``python -m engine.equiv A B --steps K``: is B reachable from A within K rule steps?

A and B are program files (``.leir`` / ``.json`` / ``.jsonl``; ``--name-a`` / ``--name-b``
pick from multi-program files). Prints ``reachable in N step(s)`` and the rule path, or
``not reachable within K step(s)`` with the reason the search stopped (every level
explored, or a node / time / memory limit). Exit status: 0 reachable, 1 not reachable,
2 on user error.
"""
from __future__ import annotations

import argparse
import sys

from engine.leir.cli import run_cli
from engine.rewrite.sources import add_rules_options
from engine.leir.diagnostics import LeirError
from engine.leir.files import load_program
from engine.rewrite.enumerate import Enumerator
from engine.rewrite.saturate import Limits, explore


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.equiv", description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--name-a")
    ap.add_argument("--name-b")
    ap.add_argument("--steps", type=int, default=1, help="maximum number of rule steps (default 1)")
    ap.add_argument("--strategy", action="append", help="only these strategies (repeatable)")
    ap.add_argument("--category", action="append", help="only these categories (repeatable)")
    ap.add_argument("--max-nodes", type=int, default=20_000)
    ap.add_argument("--max-time", type=float, default=120.0, help="seconds")
    ap.add_argument("--max-memory", type=int, default=4096, help="MiB of resident memory the exploration may add")
    add_rules_options(ap)
    args = ap.parse_args(argv)
    if args.steps < 0:
        print("error: --steps must be non-negative", file=sys.stderr)
        return 2
    a = load_program(args.a, args.name_a)
    b = load_program(args.b, args.name_b)
    if {d.name: d for d in a.known} != {d.name: d for d in b.known}:
        raise LeirError("the two programs declare different known tensors", file=args.b)
    eng = Enumerator(args.rules)
    ex = explore(eng, a, Limits(args.steps, args.max_nodes, args.max_time, args.max_memory),
                 target=b.to_leir(), strategies=args.strategy, categories=args.category)
    if ex.found is not None:
        path = ex.path(ex.found)
        print(f"reachable in {len(path)} step(s)")
        for i, p in enumerate(path, 1):
            ps = ",".join(f"{k}={v}" for k, v in p.params.items())
            print(f"  {i}. {p.strategy} ({p.rule}) at site {list(p.site)} {ps}")
        return 0
    why = {"saturated": "no new programs", "iterations": "all levels explored"}.get(ex.stop_reason, ex.stop_reason + " limit")
    print(f"not reachable within {args.steps} step(s) (stopped: {why}; {ex.nodes} programs, {ex.elapsed_s:.2f} s)")
    return 1


if __name__ == "__main__":
    sys.exit(run_cli(main))
