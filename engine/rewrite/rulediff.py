"""Compare the egglog programs two rule directories load, form by form.

A rule file may be rewritten without changing what it means to egglog (constructor terms
into LEIR identities or ``(leir ...)`` macros, reformatting, comments): the loaded programs
are then equal form for form once each form is put on one line. This prints every form that
differs, keyed by file and rule name (the schema's forms by ``leir/``, whether it is one file or
the folder it was split into), and exits 1 when one does::

    python -m engine.rewrite.rulediff OLD_RULES_DIR NEW_RULES_DIR
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.rewrite.rulebook import keyword, load_rulebook, read_sexps, sexp_text
from engine.rewrite.rule_sources import SCHEMA_DIR, schema_files


def loaded_forms(rules_dir) -> dict[tuple[str, str], str]:
    """(file name, rule name or the form's text) -> the form on one line, over the whole
    loaded program (identities and macros expanded, rulesets assigned)."""
    book = load_rulebook(rules_dir)
    if book.problems:
        p = book.problems[0]
        raise ValueError(f"{p[0]}:{p[1]}:{getattr(p, 'col', 1)}: error: {p[2]}")
    out: dict[tuple[str, str], str] = {}
    schema = {str(f) for f in book.schema_files}
    for filename, text in book.programs():
        shown = SCHEMA_DIR + "/" if filename in schema else Path(filename).name
        for form in read_sexps(text):
            name = keyword(form, ":name") if form.is_list else None
            one = sexp_text(form)
            out[(shown, name.value.strip('"') if name is not None else one)] = one
    return out


def diff(old_dir, new_dir) -> list[tuple[tuple[str, str], str | None, str | None]]:
    """(key, old form, new form) of every form that differs (None: absent), sorted."""
    a, b = loaded_forms(old_dir), loaded_forms(new_dir)
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.rewrite.rulediff", description=__doc__.split("\n\n")[0])
    ap.add_argument("old", help="a rules directory")
    ap.add_argument("new", help="another rules directory")
    args = ap.parse_args(argv)
    for d in (args.old, args.new):
        try:
            complete = Path(d).is_dir() and schema_files(Path(d)) is not None
        except Exception as e:                   # a LeirError: a schema folder that lacks a file
            print(f"{d}: error: {getattr(e, 'message', e)}", file=sys.stderr)
            return 2
        if not complete:
            print(f"{d}: error: not a rules directory (no schema: {SCHEMA_DIR}/ or leir.egg)", file=sys.stderr)
            return 2
    try:
        changes = diff(args.old, args.new)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    for (f, name), old, new in changes:
        print(f"{f} {name}")
        print(f"  - {old}" if old is not None else "  - (absent)")
        print(f"  + {new}" if new is not None else "  + (absent)")
    print(f"{len(changes)} form(s) differ")
    return 1 if changes else 0


if __name__ == "__main__":
    sys.exit(main())
