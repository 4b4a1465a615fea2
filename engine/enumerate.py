"""``python -m engine.enumerate PROG``: every one-step rewrite of a program, with its strategy,
rule, site and parameters (``--json``: one step record per line, replayable with
``python -m engine.apply``)."""
from __future__ import annotations

import argparse
import json
import sys

from engine.leir.cli import run_cli, say_defaults
from engine.leir.diagnostics import LeirError
from engine.leir.files import load_program, write_atomic
from engine.rewrite.engine import Engine, resolve_strategies
from engine.rewrite.meta import CATEGORIES
from engine.rewrite.rule_sources import add_rules_options, add_strategies_option
from engine.rewrite.unknown import did_you_mean


def step_records(prog, steps) -> list[dict]:
    """Steps as corpus-format program records (same known tensors) with their provenance."""
    base = prog.to_json()
    out = []
    for i, st in enumerate(steps):
        d = st.to_json()
        out.append({"name": f"{prog.name}.{i}.{d['strategy']}", "inputs": base["inputs"],
                    "outputs": base["outputs"], "leir": d.pop("leir"), "provenance": d})
    return out


DESCRIPTION = """\
List the one-step neighbours of a LEIR program: every rewrite the loaded strategies offer, one
per distinct result, with its strategy, rule, site and parameters and the resulting program.
With --json each is a step record (one JSON object per line) that python -m engine.apply
replays. Exit status 0; 1 when a rule built an invalid program (a rule bug, reported on
stderr); 2 on a user error (a bad program file, an unknown strategy, a rule-file error).
"""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m engine.enumerate", description=DESCRIPTION,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("program", help=".leir, .json or .jsonl file (use --name to pick from several)")
    ap.add_argument("--name", help="program name inside a multi-program file (default: the file's only program)")
    add_strategies_option(ap, "only these strategies or strategy sets (all, paper, extra, user, bitwise, a "
                              "category; default: every loaded strategy)")
    ap.add_argument("--category", action="append", metavar="C",
                    help="only strategies of this category (graph, operator, memory, math); repeatable")
    ap.add_argument("--json", action="store_true", help="one JSON step record per line")
    ap.add_argument("--limit", type=int, default=None, metavar="N", help="print at most N neighbours (default: all)")
    add_rules_options(ap)
    ap.add_argument("--emit-jsonl", metavar="OUT",
                    help="also write the listed neighbours as corpus-format program records (one per line), "
                         "ready for `python -m lowering.verify PROG OUT --name NAME`")
    return say_defaults(ap)


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.limit is not None and args.limit < 0:
        raise LeirError(f"--limit must be at least 0, got {args.limit}")
    unknown = [c for c in args.category or () if c not in CATEGORIES]
    if unknown:
        raise LeirError(f"--category: unknown category '{unknown[0]}'{did_you_mean(unknown[0], CATEGORIES)} "
                        f"(categories: {', '.join(CATEGORIES)})")
    prog = load_program(args.program, args.name)
    engine = Engine(args.rules)
    names, bitwise = resolve_strategies(engine.rulebook, args.strategies, flag="--strategies")
    wanted = args.strategies or args.category
    if args.strategies and args.category:       # both given: the strategies of those categories
        cats = set(args.category)
        wanted = [n for n in names if engine.strategy(n).category in cats] + (["bitwise"] if bitwise else [])
    steps = engine.enumerate(prog, wanted) if wanted != [] else []
    shown = steps if args.limit is None else steps[:args.limit]
    for st in shown:
        if args.json:
            print(json.dumps(st.to_json()))
        else:
            extra = f" (+{len(st.alternatives)} more)" if st.alternatives else ""
            ps = ",".join(f"{k}={v}" for k, v in st.params.items() if k != "new_names")
            print(f"{st.strategy}\t{st.rule}\tsite={'.'.join(map(str, st.site))}\t{ps}{extra}\n  {st.leir}")
    if args.emit_jsonl:
        recs = step_records(prog, shown)
        write_atomic(args.emit_jsonl, "".join(json.dumps(r) + "\n" for r in recs))
        print(f"wrote {len(recs)} neighbour program(s) to {args.emit_jsonl}", file=sys.stderr)
    bugs = engine.stats()["invalid"]
    for bad in bugs:
        print(f"error: rule {bad['rule']} produced an invalid program: {bad['error']}", file=sys.stderr)
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
