"""``python -m engine.lint [RULES_DIR] [--rules DIR ...] [--no-builtin-rules] [--examples[=WHICH]]``:
check rule files (engine/rewrite/lint.py), and with ``--examples`` run their examples."""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from engine.leir.cli import run_cli, say_defaults
from engine.leir.diagnostics import LeirError, shown_path
from engine.rewrite.sources import add_rules_options

DESCRIPTION = """\
Check rule files: metadata, names, relations, guards, identities, @example texts, what egglog
accepts, and that the code generator compiles every compute rule. Each mistake is reported once
as FILE:LINE:COL: error: MESSAGE, then the blocks checked and a count. Exit status 2 when there
is an error, else 0 (warnings do not fail).

RULES_DIR is read like --rules: a folder of your own strategy files is checked together with the
built-in rules; a complete rules directory (with its own leir.egg) alone. With --examples, every
block's examples are also run: enumerated with the block's strategy, replayed from their JSON
record with Engine.apply and verified on llvm (needs TVM; about a second per example).
"""

EPILOG = """\
examples:
  python -m engine.lint                                 # the built-in rules
  python -m engine.lint my_rules                        # your folder, with the built-in rules
  python -m engine.lint my_rules --examples=user        # ... and run only your blocks' examples
  python -m engine.lint --examples=loop_split,math      # the examples of a strategy and a category
"""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m engine.lint", description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", nargs="?", metavar="RULES_DIR", help="a rules folder (same as --rules RULES_DIR)")
    ap.add_argument("--examples", nargs="?", const="all", default=None, metavar="WHICH",
                    help="also run the examples (needs TVM). WHICH (default all) limits them: a comma list of "
                         "strategy names, strategy sets (all, paper, extra, user, a category) and rule folders "
                         "(the blocks of the files in that folder; a folder not loaded yet is added as with "
                         "--rules)")
    add_rules_options(ap)
    return say_defaults(ap)


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    sources = args.rules
    if args.folder is not None:
        if not Path(args.folder).exists():
            raise LeirError(f"RULES_DIR {args.folder}: no such file or folder")
        sources = replace(sources, dirs=(args.folder,) + sources.dirs)
    folders = [w for w in _items(args.examples) if _is_folder(w)]
    for w in folders:
        if not any(Path(d).resolve() == Path(w).resolve() for d in sources.dirs):
            sources = replace(sources, dirs=sources.dirs + (w,))
    from engine.rewrite.compute import helper_problems
    from engine.rewrite.lint import lint_book
    from engine.rewrite.rulebook import load_rulebook
    book = load_rulebook(sources)
    rep = lint_book(book)
    if not any(kind == "error" for *_, kind, _m in rep.items):
        for f, line, col, msg in helper_problems(sources):
            rep.error(f, line, col, msg)
    for f, line, col, kind, msg in sorted(rep.items):
        print(f"{shown_path(f)}:{line}:{col}: {kind}: {msg}", file=sys.stderr)
    print(checked_summary(book), file=sys.stderr)
    print(f"{rep.errors} error(s), {rep.warnings} warning(s)", file=sys.stderr)
    if rep.errors:
        return 2
    if args.examples is None:
        return 0
    return run_examples(sources, only=_selection(book, args.examples))


def checked_summary(book) -> str:
    """Which blocks were checked: per folder, the number of blocks, and the names of a user's."""
    from engine.rewrite.sources import RULES_DIR
    by_folder: dict[Path, list[str]] = {}
    for s in book.strategies:
        by_folder.setdefault(Path(s.file).parent, []).append(s.name)
    parts = []
    for folder, names in by_folder.items():
        where = shown_path(folder) + "/"
        if folder.resolve() == RULES_DIR.resolve():
            parts.append(f"{len(names)} built-in in {where}")
        else:
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            parts.append(f"{len(names)} in {where} ({shown})")
    files = len(book.files)
    return (f"checked {len(book.strategies)} strategy block(s) in {files} file(s): "
            + ("; ".join(parts) if parts else "none"))


def _items(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _is_folder(item: str) -> bool:
    return "/" in item or Path(item).is_dir()


def _selection(book, which: str) -> set[str] | None:
    """The strategy names ``--examples=WHICH`` selects (None: all)."""
    from engine.rewrite.engine import resolve_strategies
    items = _items(which)
    if items == ["all"]:
        return None
    names: set[str] = set()
    for it in items:
        if _is_folder(it):
            if not Path(it).is_dir():
                raise LeirError(f"--examples {it}: no such folder")
            folder = Path(it).resolve()
            names |= {s.name for s in book.strategies if Path(s.file).resolve().parent == folder}
        else:
            names |= set(resolve_strategies(book, [it], flag="--examples")[0])
    return names


def run_examples(rules, verifier=None, only: set[str] | None = None) -> int:
    """Check the examples of the rules (``only``: of these strategies); one line per failure,
    then a summary. Exit 2 on a failure. ``verifier``: a ``lowering.Verifier`` to share
    (default: one of its own)."""
    from engine.rewrite.example_check import ExampleChecker, format_outcome
    t0 = time.perf_counter()
    checker = ExampleChecker(rules, verifier=verifier)
    failed = 0
    try:
        exs = [ex for ex in checker.examples() if only is None or ex.strategy in only]
        for ex in exs:
            o = checker.check(ex)
            if not o.ok:
                failed += 1
                print(_relative(format_outcome(o)), file=sys.stderr)
    finally:
        checker.close()
    blocks = len({ex.strategy for ex in exs})
    print(f"{len(exs)} example(s) of {blocks} block(s): {len(exs) - failed} passed, {failed} failed "
          f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 2 if failed else 0


def _relative(line: str) -> str:
    """A message with the rule file's path relative to the working directory when it lies below it."""
    file, sep, rest = line.partition(":")
    return shown_path(file) + sep + rest


if __name__ == "__main__":
    sys.exit(run_cli(main))
