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

from engine.leir.cli import description, run_cli, say_defaults
from engine.leir.diagnostics import LeirError
from engine.leir.files import load_program
from engine.rewrite.engine import resolve_strategies
from engine.rewrite.enumerator import Enumerator
from engine.rewrite.meta import CATEGORIES
from engine.rewrite.rule_sources import add_rules_options, add_strategies_option
from engine.rewrite.unknown import did_you_mean
from engine.rewrite.saturate import Limits, explore


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m engine.equiv", description=description(__doc__),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", metavar="A", help="the program to start from (.leir, .json or .jsonl)")
    ap.add_argument("b", metavar="B", help="the program to reach (same known tensors as A)")
    ap.add_argument("--name-a", help="program name inside a multi-program file A")
    ap.add_argument("--name-b", help="program name inside a multi-program file B")
    ap.add_argument("--steps", type=int, default=1, help="maximum number of rule steps (default 1)")
    add_strategies_option(ap, "only these strategies or strategy sets (default: all)")
    ap.add_argument("--category", action="append", help="only these categories (repeatable)")
    ap.add_argument("--max-nodes", type=int, default=20_000, help="programs explored at most (default 20000)")
    ap.add_argument("--max-time", type=float, default=120.0, help="seconds of exploration at most (default 120)")
    ap.add_argument("--max-memory", type=int, default=4096,
                    help="MiB of resident memory the exploration may add (default 4096)")
    add_rules_options(ap)
    return say_defaults(ap)


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    for flag, value, low in (("--steps", args.steps, 0), ("--max-nodes", args.max_nodes, 1),
                             ("--max-memory", args.max_memory, 1)):
        if value < low:
            raise LeirError(f"{flag} must be at least {low}, got {value}")
    if not args.max_time > 0:
        raise LeirError(f"--max-time must be positive, got {args.max_time}")
    unknown = [c for c in args.category or () if c not in CATEGORIES]
    if unknown:
        raise LeirError(f"--category: unknown category '{unknown[0]}'{did_you_mean(unknown[0], CATEGORIES)} "
                        f"(categories: {', '.join(CATEGORIES)})")
    a = load_program(args.a, args.name_a)
    b = load_program(args.b, args.name_b)
    if {d.name: d for d in a.known} != {d.name: d for d in b.known}:
        raise LeirError("the two programs declare different known tensors", file=args.b)
    eng = Enumerator(args.rules)
    names = None
    if args.strategies:
        names = resolve_strategies(eng.book, args.strategies, flag="--strategies")[0]
    ex = explore(eng, a, Limits(args.steps, args.max_nodes, args.max_time, args.max_memory),
                 target=b.to_leir(), strategies=names, categories=args.category)
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
