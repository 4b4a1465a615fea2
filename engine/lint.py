"""``python -m engine.lint [RULES_DIR] [--rules DIR ...] [--no-builtin-rules]``: check rule files
(metadata, names, relations, guards). RULES_DIR is read like ``--rules``: a folder of one's own
strategy files is checked with the built-in rules, a complete rules directory (with its own
leir.egg) alone."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from engine.leir.cli import run_cli
from engine.rewrite.lint import lint
from engine.rewrite.sources import add_rules_options


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.lint", description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", metavar="RULES_DIR", help="a rules folder (same as --rules RULES_DIR)")
    add_rules_options(ap)
    args = ap.parse_args(argv)
    sources = args.rules
    if args.folder is not None:
        from pathlib import Path
        if not Path(args.folder).exists():
            print(f"error: {args.folder}: no such file or directory", file=sys.stderr)
            return 2
        sources = replace(sources, dirs=(args.folder,) + sources.dirs)
    rep = lint(sources)
    for line in rep.lines():
        print(line, file=sys.stderr)
    n = len(rep.items) - rep.errors
    print(f"{rep.errors} error(s), {n} warning(s)", file=sys.stderr)
    return 2 if rep.errors else 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
