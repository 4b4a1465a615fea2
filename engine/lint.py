"""``python -m engine.lint [RULES_DIR]``: check rule files (metadata, names, relations, guards, and
that the code generator compiles every compute rule: a helper is defined by its rules alone)."""
from __future__ import annotations

import sys
from pathlib import Path

from engine.leir.cli import run_cli
from engine.rewrite.compute import helper_problems
from engine.rewrite.lint import lint


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) > 1 or (argv and argv[0] in ("-h", "--help")):
        print("usage: python -m engine.lint [RULES_DIR]", file=sys.stderr)
        return 2
    path = argv[0] if argv else None
    if path is not None and not Path(path).exists():
        print(f"error: {path}: no such file or directory", file=sys.stderr)
        return 2
    rep = lint(path)
    for f, line, col, msg in helper_problems(path):
        rep.error(f, line, col, msg)
    for line in rep.lines():
        print(line, file=sys.stderr)
    n = len(rep.items) - rep.errors
    print(f"{rep.errors} error(s), {n} warning(s)", file=sys.stderr)
    return 2 if rep.errors else 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
