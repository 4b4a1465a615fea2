"""Replay rewriting steps on a program: ``python -m engine.apply PROG --step STEP.json``
applies one step, ``--steps TRAJ.jsonl`` a trajectory (each step applied to the previous
result). Prints the resulting canonical LEIR on one line, or the last step's record with
``--json``, or writes a program file with ``-o FILE``.

A step is a record of ``python -m engine.enumerate --json`` (or any object with ``rule``,
``site`` and ``params``), a row of a generated dataset (``rows.jsonl``), or, with
``--steps``, a search trajectory (its best program's steps). Each step applies to the program
its predecessor printed (read back from that text), so a trajectory gives what applying its
steps one command at a time gives. A step that does not apply is reported with what did not
match, exit status 2; so is a row or trajectory made with other rule files than the ones
loaded (the difference is named).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.leir.cli import description, run_cli, say_defaults
from engine.rewrite.rule_sources import add_rules_options
from engine.leir.diagnostics import LeirError
from engine.leir.files import load_program, loads_json, read_text, write_atomic
from engine.rewrite.engine import Engine, StepError
from engine.rewrite.steps import Step


TRAJECTORY = "leir-search-trajectory"


def read_steps(path: str, many: bool) -> list[tuple[int, dict]]:
    """(line, record) of each step in a JSON file (one object; with ``many`` also a list or a
    search trajectory) or a JSON-lines file. Read like every user file (``loads_json``: bounded
    depth and integers)."""
    text = read_text(path)
    try:
        if not many:
            rec = loads_json(text)
            if isinstance(rec, list):
                raise LeirError("--step takes one step object; use --steps for a list", 1, 1)
            return [(1, rec)]
        if text.lstrip().startswith("["):          # a JSON list of steps is accepted too
            return [(1, r) for r in loads_json(text)]
        if text.lstrip().startswith("{") and "\n" in text.strip():
            try:
                whole = loads_json(text)
            except LeirError:
                whole = None
            if isinstance(whole, dict) and whole.get("format") == TRAJECTORY:
                steps = (whole.get("best") or {}).get("steps") or []
                return [(1, {**st, "rules": whole.get("rules")}) for st in steps]
        return [(i, loads_json(line, i)) for i, line in enumerate(text.split("\n"), 1) if line.strip()]
    except LeirError as e:
        raise e.located(path, text) from None


def as_step(rec):
    """The step of a record: a dataset row's ``step`` (``Step.to_json()``; params read as JSON
    text too, as a Parquet copy holds them), else the record."""
    if isinstance(rec, dict) and isinstance(rec.get("step"), dict) and "program" in rec:
        st = rec["step"]
        params = loads_json(st["params"]) if isinstance(st.get("params"), str) else st.get("params", {})
        return {"rule": st.get("rule"), "site": st.get("site"), "params": params, "strategy": st.get("strategy", "")}
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.apply", description=description(__doc__),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("program", help=".leir, .json or .jsonl program file")
    ap.add_argument("--name", help="program name inside a multi-program file (default: the file's only program)")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--step", metavar="STEP.json", help="one step record (JSON), or a dataset row")
    g.add_argument("--steps", metavar="TRAJ",
                   help="a trajectory: one step record per line (JSON lines), a JSON list of them, a search "
                        "trajectory (its best program's steps) or a dataset's rows.jsonl")
    ap.add_argument("--json", action="store_true", help="print the step record of the last step, result included")
    ap.add_argument("-o", "--output", help="write the result as a program file (.leir, or .json)")
    add_rules_options(ap)
    args = say_defaults(ap).parse_args(argv)
    prog = load_program(args.program, args.name)
    path = args.step or args.steps
    records = read_steps(path, many=args.steps is not None)
    if not records:
        raise LeirError("no steps in this file", file=path)
    engine = Engine(args.rules)
    from engine.rewrite.rule_sources import check_same_rules
    for line, rec in records:
        if isinstance(rec, dict) and isinstance(rec.get("rules"), list):
            try:
                check_same_rules(rec["rules"], engine.rule_manifest, "this step")
            except LeirError as e:
                raise LeirError(e.message, line, 1, file=path) from None
    last = None
    for line, rec in records:
        try:
            last = Step.from_json(as_step(rec))
            prog = engine.apply(prog, last)
        except StepError as e:
            raise StepError(e.message, line, 1, file=path) from None
        except LeirError as e:
            if e.file is None:
                e.file, e.line, e.col = path, line, 1
            raise
    if args.output:
        out = Path(args.output)
        text = json.dumps(prog.to_json()) + "\n" if out.suffix in (".json", ".jsonl") else prog.to_leir_file()
        write_atomic(out, text)
    if args.json:
        rec = last.provenance()
        rec["key"] = last.key
        rec["leir"] = prog.to_leir()
        print(json.dumps(rec))
    elif not args.output:
        print(prog.to_leir())
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
