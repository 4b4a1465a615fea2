"""User-facing errors: ``file:line:col: error: message`` with the offending line and a caret."""
from __future__ import annotations

from typing import Optional


def quoted(value, limit: int = 40) -> str:
    """User text inside a one-line message: quoted, control and invisible characters escaped,
    long text cut (a file name or a JSON string may hold anything)."""
    text = value if isinstance(value, str) else repr(value)
    cut = len(text) > limit
    text = text[:limit]
    shown = "".join(ch if ch.isprintable() and ch != "'" else ("\\'" if ch == "'" else ascii(ch)[1:-1])
                    for ch in text)
    return f"'{shown}{'...' if cut else ''}'"


def shown_path(path) -> str:
    """A file name as messages show it: relative to the working folder when it lies below it."""
    import os
    text = str(path)
    if not os.path.isabs(text):
        return text
    try:
        rel = os.path.relpath(text)
    except ValueError:               # another drive
        return text
    return text if rel.startswith("..") else rel


def _visible(text: str) -> str:
    """A source line as printed under a message: tabs and invisible characters become spaces,
    so the caret stays under the column it points at."""
    return "".join(ch if ch.isprintable() else " " for ch in text)


class LeirError(Exception):
    """An error in user input. Carries a location so the CLI can point at it; never a bug."""

    def __init__(self, message: str, line: Optional[int] = None, col: Optional[int] = None,
                 file: Optional[str] = None, source: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col
        self.file = file
        self.source = source

    def located(self, file: Optional[str] = None, source: Optional[str] = None,
                line_offset: int = 0, col_offset: int = 0) -> "LeirError":
        """Fill in the file and source text (and shift a position found in an embedded text)."""
        if self.file is None:
            self.file = file
        if self.source is None:
            self.source = source
        if self.line is not None and (line_offset or col_offset):
            if self.line == 1:
                self.col = (self.col or 1) + col_offset
            self.line += line_offset
        return self

    def format(self) -> str:
        """``file:line:col: error: message`` (``<input>`` for text with no file); an error about
        no file and no line (a command-line argument, whose message names the flag) is
        ``error: message``."""
        if self.file is None and self.line is None:
            return f"error: {self.message}"
        where = self.file or "<input>"
        if self.line is not None:
            where += f":{self.line}:{self.col or 1}"
        out = f"{where}: error: {self.message}"
        if self.line is not None and self.source is not None:
            lines = self.source.split("\n")  # the parser counts lines by "\n" alone
            if 1 <= self.line <= len(lines):
                text = lines[self.line - 1]
                col = max(1, min(self.col or 1, len(text) + 1))
                # keep very long lines (one-line LEIR programs) readable around the caret
                lo = max(0, col - 60)
                hi = min(len(text), col + 60)
                snippet = ("..." if lo else "") + text[lo:hi] + ("..." if hi < len(text) else "")
                caret = col - lo + (3 if lo else 0)
                out += "\n    " + _visible(snippet) + "\n    " + " " * (caret - 1) + "^"
        return out

    def __str__(self) -> str:
        return self.format()
