"""``python -m engine.lint [--examples] [RULES_DIR]``: check rule files (metadata, names, relations,
guards, examples); ``--examples`` also runs every block's examples (enumerate, replay, verify on
llvm: engine/rewrite/example_check.py)."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from engine.leir.cli import run_cli
from engine.rewrite.lint import lint

USAGE = "usage: python -m engine.lint [--examples] [RULES_DIR]"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    examples = "--examples" in argv
    argv = [a for a in argv if a != "--examples"]
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print(USAGE, file=sys.stderr)
        return 2
    path = argv[0] if argv else None
    if path is not None and not Path(path).exists():
        print(f"error: {path}: no such file or directory", file=sys.stderr)
        return 2
    rep = lint(path)
    for line in rep.lines():
        print(line, file=sys.stderr)
    n = len(rep.items) - rep.errors
    print(f"{rep.errors} error(s), {n} warning(s)", file=sys.stderr)
    if rep.errors:
        return 2
    return run_examples(path) if examples else 0


def run_examples(path, verifier=None) -> int:
    """Check every example of the rules; one line per failure, then a summary. Exit 2 on a
    failure. ``verifier``: a ``lowering.Verifier`` to share (default: one of its own)."""
    from engine.rewrite.example_check import ExampleChecker, format_outcome
    t0 = time.perf_counter()
    checker = ExampleChecker(path, verifier=verifier)
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
