"""``python -m engine.enumerate PROG``: every one-step rewrite of a program, with its strategy,
rule, site and parameters (``--json``: one step record per line, replayable with
``python -m engine.apply``)."""
from __future__ import annotations

import argparse
import json
import sys

from engine.leir.cli import run_cli
from engine.rewrite.sources import add_rules_options
from engine.leir.files import load_program, write_atomic
from engine.rewrite.engine import Engine, resolve_strategies


def step_records(prog, steps) -> list[dict]:
    """Steps as corpus-format program records (same known tensors) with their provenance."""
    base = prog.to_json()
    out = []
    for i, st in enumerate(steps):
        d = st.to_json()
        out.append({"name": f"{prog.name}.{i}.{d['strategy']}", "inputs": base["inputs"],
                    "outputs": base["outputs"], "leir": d.pop("leir"), "provenance": d})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.enumerate",
                                 description="List the one-step neighbours of a LEIR program.")
    ap.add_argument("program", help=".leir, .json or .jsonl file (use --name to pick from several)")
    ap.add_argument("--name", help="program name inside a multi-program file")
    ap.add_argument("--strategy", action="append",
                    help="only this strategy or strategy set (all, paper, extra, user, bitwise, a category); repeatable")
    ap.add_argument("--category", action="append", help="only this category (repeatable)")
    ap.add_argument("--json", action="store_true", help="one JSON step record per line")
    ap.add_argument("--limit", type=int, default=None, help="print at most N neighbours")
    add_rules_options(ap)
    ap.add_argument("--emit-jsonl", metavar="OUT",
                    help="also write the listed neighbours as corpus-format program records (one per line), "
                         "ready for `python -m lowering.verify PROG OUT --name NAME`")
    args = ap.parse_args(argv)
    prog = load_program(args.program, args.name)
    engine = Engine(args.rules)
    wanted = args.strategy or args.category
    if args.strategy and args.category:       # both given: the strategies of those categories
        names, bitwise = resolve_strategies(engine.rulebook, args.strategy)
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
