"""``python -m engine.lint [RULES_DIR] [--rules DIR ...] [--no-builtin-rules]``: check rule files
(engine/rewrite/lint.py). Running the blocks' examples needs the lowering, a floor above the
engine: ``python -m lowering.rule_examples`` takes the same arguments and ``--only WHICH``."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from engine.leir.cli import run_cli, say_defaults
from engine.leir.diagnostics import LeirError, shown_path
from engine.rewrite.rule_sources import add_rules_options

DESCRIPTION = """\
Check rule files: metadata, names, relations, guards, identities, @example texts, what egglog
accepts, and that the code generator compiles every compute rule. Each mistake is reported once
as FILE:LINE:COL: error: MESSAGE, then the blocks checked and a count. Exit status 2 when there
is an error, else 0 (warnings do not fail).

RULES_DIR is read like --rules: a folder of your own strategy files is checked together with the
built-in rules; a complete rules directory (with its own schema leir/) alone. To run every block's
examples too (enumerated with the block's strategy, replayed from their JSON record with
Engine.apply and verified on llvm; needs TVM, about a second per example):
python -m lowering.rule_examples [RULES_DIR] [--only WHICH].
"""

EPILOG = """\
examples:
  python -m engine.lint                                 # the built-in rules
  python -m engine.lint my_rules                        # your folder, with the built-in rules
  python -m lowering.rule_examples my_rules --only user            # lint, then run your blocks' examples
  python -m lowering.rule_examples --only loop_split,math           # the examples of a strategy and a category
"""


def parser(prog: str = "python -m engine.lint", only: bool = False) -> argparse.ArgumentParser:
    """The lint's arguments; ``only``: also ``--only WHICH`` (the examples to run)."""
    ap = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", nargs="?", metavar="RULES_DIR", help="a rules folder (same as --rules RULES_DIR)")
    if only:
        ap.add_argument("--only", default="all", metavar="WHICH",
                        help="the examples to run: a comma list of strategy names, strategy sets (all, paper, "
                             "extra, user, a category) and rule folders (the blocks of the files in that "
                             "folder; a folder not loaded yet is added as with --rules)")
    add_rules_options(ap)
    return say_defaults(ap)


def main(argv=None) -> int:
    return checked(parser().parse_args(argv))[2]


def checked(args):
    """(rule sources, rule book, exit status) of the rules ``args`` name, linted: every problem
    printed, located, then which blocks were checked and a count; status 2 on an error."""
    sources = args.rules
    if args.folder is not None:
        if not Path(args.folder).exists():
            raise LeirError(f"RULES_DIR {args.folder}: no such file or folder")
        sources = replace(sources, dirs=(args.folder,) + sources.dirs)
    for w in (w for w in _items(getattr(args, "only", None)) if _is_folder(w)):
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
    return sources, book, 2 if rep.errors else 0


def checked_summary(book) -> str:
    """Which blocks were checked: per folder, the number of blocks, and the names of a user's."""
    from engine.rewrite.rule_sources import RULES_DIR
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


def selection(book, which: str) -> set[str] | None:
    """The strategy names ``--only WHICH`` selects (None: all)."""
    from engine.rewrite.engine import resolve_strategies
    items = _items(which)
    if items == ["all"]:
        return None
    names: set[str] = set()
    for it in items:
        if _is_folder(it):
            if not Path(it).is_dir():
                raise LeirError(f"--only {it}: no such folder")
            folder = Path(it).resolve()
            names |= {s.name for s in book.strategies if Path(s.file).resolve().parent == folder}
        else:
            names |= set(resolve_strategies(book, [it], flag="--only")[0])
    return names


if __name__ == "__main__":
    sys.exit(run_cli(main))
