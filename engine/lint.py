"""``python -m engine.lint [RULES_DIR] [--rules DIR ...] [--no-builtin-rules] [--examples]``: check
rule files (metadata, names, relations, guards, examples, and
that the code generator compiles every compute rule: a helper is defined by its rules alone). RULES_DIR is read like ``--rules``: a
folder of one's own strategy files is checked with the built-in rules, a complete rules directory
(with its own leir.egg) alone. ``--examples`` also runs every block's examples (enumerate, replay,
verify on llvm: engine/rewrite/example_check.py)."""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from engine.leir.cli import run_cli
from engine.rewrite.compute import helper_problems
from engine.rewrite.lint import lint
from engine.rewrite.sources import add_rules_options


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.lint", description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", metavar="RULES_DIR", help="a rules folder (same as --rules RULES_DIR)")
    ap.add_argument("--examples", action="store_true",
                    help="also run every block's examples: enumerate, replay, verify on llvm (needs TVM)")
    add_rules_options(ap)
    args = ap.parse_args(argv)
    sources = args.rules
    if args.folder is not None:
        if not Path(args.folder).exists():
            print(f"error: {args.folder}: no such file or directory", file=sys.stderr)
            return 2
        sources = replace(sources, dirs=(args.folder,) + sources.dirs)
    rep = lint(sources)
    for f, line, col, msg in helper_problems(sources):
        rep.error(f, line, col, msg)
    for line in rep.lines():
        print(line, file=sys.stderr)
    n = len(rep.items) - rep.errors
    print(f"{rep.errors} error(s), {n} warning(s)", file=sys.stderr)
    if rep.errors:
        return 2
    return run_examples(sources) if args.examples else 0


def run_examples(rules, verifier=None) -> int:
    """Check every example of the rules; one line per failure, then a summary. Exit 2 on a
    failure. ``verifier``: a ``lowering.Verifier`` to share (default: one of its own)."""
    from engine.rewrite.example_check import ExampleChecker, format_outcome
    t0 = time.perf_counter()
    checker = ExampleChecker(rules, verifier=verifier)
    failed = 0
    try:
        exs = checker.examples()
        for ex in exs:
            o = checker.check(ex)
            if not o.ok:
                failed += 1
                print(_relative(format_outcome(o)), file=sys.stderr)
    finally:
        checker.close()
    print(f"{len(exs)} example(s): {len(exs) - failed} passed, {failed} failed "
          f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 2 if failed else 0


def _relative(line: str) -> str:
    """A message with the rule file's path relative to the working directory when it lies below it."""
    file, sep, rest = line.partition(":")
    try:
        rel = os.path.relpath(file)
    except ValueError:
        return line
    return (rel if not rel.startswith("..") else file) + sep + rest


if __name__ == "__main__":
    sys.exit(run_cli(main))
