"""Rule files are checked before anything uses them.

Every command that loads rules (engine.enumerate, apply, equiv, check of a dataset, the
search, the dataset generator, ...) builds its engine through ``Enumerator``, which calls
``check_rulebook``: the errors ``engine.lint`` reports (engine.rewrite.lint, warnings left
out), all of them, located, as one ``RuleFileErrors`` (a ``LeirError``: exit status 2, no
traceback). A rule book is checked once per process and content (the files' names and
sha256), so the many engines of a test run or a worker pay for it once.
"""
from __future__ import annotations

from engine.leir.diagnostics import LeirError, shown_path
from engine.rewrite.rule_sources import digest

_CHECKED: dict[tuple, list[tuple[str, int, int, str]]] = {}


class RuleFileErrors(LeirError):
    """Every error of a rule book, each ``file:line:col: error: message``."""

    def __init__(self, errors: list[tuple[str, int, int, str]]):
        file, line, col, msg = errors[0]
        super().__init__(msg, line, col, file=file)
        self.errors = list(errors)

    def format(self) -> str:
        lines = [f"{shown_path(f)}:{line}:{col}: error: {msg}" for f, line, col, msg in self.errors]
        n = len(self.errors)
        lines.append(f"{n} error{'s' if n != 1 else ''} in the rule files: nothing was run "
                     "(python -m engine.lint [--rules DIR] checks rule files)")
        return "\n".join(lines)


def rulebook_errors(book) -> list[tuple[str, int, int, str]]:
    """(file, line, col, message) of every error ``engine.lint`` finds in ``book``."""
    key = tuple((str(f), digest(book.texts[str(f)])) for f in book.files)
    got = _CHECKED.get(key)
    if got is None:
        from engine.rewrite.lint import lint_book
        rep = lint_book(book, warnings=False)
        got = _CHECKED[key] = [(f, line, col, msg) for f, line, col, kind, msg in sorted(rep.items)
                               if kind == "error"]
    return got


def check_rulebook(book) -> None:
    """Raise ``RuleFileErrors`` when ``book`` has an error."""
    errors = rulebook_errors(book)
    if errors:
        raise RuleFileErrors(errors)
