"""``python -m engine.lint [RULES_DIR] [--rules DIR ...] [--no-builtin-rules]``: check rule files
(metadata, names, relations, guards, examples, and that the code generator compiles every compute
rule: a helper is defined by its rules alone). RULES_DIR is read like ``--rules``: a folder of
one's own strategy files is checked with the built-in rules, a complete rules directory (with its
own leir.egg) alone. Running every block's examples (enumerate, replay, verify on llvm) needs the
lowering: ``python -m lowering.rule_examples``, same arguments."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from engine.leir.cli import run_cli
from engine.rewrite.compute import helper_problems
from engine.rewrite.lint import lint
from engine.rewrite.sources import RuleSources, add_rules_options


def main(argv=None) -> int:
    sources = parse_sources(argparse.ArgumentParser(prog="python -m engine.lint",
                                                    description=__doc__.splitlines()[0]), argv)
    return 2 if sources is None else report(sources)


def parse_sources(ap: argparse.ArgumentParser, argv=None) -> RuleSources | None:
    """The rule sources a lint-like command names (RULES_DIR and the rules options); None after
    printing the error when RULES_DIR does not exist."""
    ap.add_argument("folder", nargs="?", metavar="RULES_DIR", help="a rules folder (same as --rules RULES_DIR)")
    add_rules_options(ap)
    args = ap.parse_args(argv)
    sources = args.rules
    if args.folder is not None:
        if not Path(args.folder).exists():
            print(f"error: {args.folder}: no such file or directory", file=sys.stderr)
            return None
        sources = replace(sources, dirs=(args.folder,) + sources.dirs)
    return sources


def report(sources: RuleSources) -> int:
    """Lint the rules, one line per problem, then a summary; 2 when there is an error."""
    rep = lint(sources)
    for f, line, col, msg in helper_problems(sources):
        rep.error(f, line, col, msg)
    for line in rep.lines():
        print(line, file=sys.stderr)
    n = len(rep.items) - rep.errors
    print(f"{rep.errors} error(s), {n} warning(s)", file=sys.stderr)
    return 2 if rep.errors else 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
