"""User-facing errors: ``file:line:col: error: message`` with the offending line and a caret."""
from __future__ import annotations

from typing import Optional


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
        where = self.file or "<input>"
        if self.line is not None:
            where += f":{self.line}:{self.col or 1}"
        out = f"{where}: error: {self.message}"
        if self.line is not None and self.source is not None:
            lines = self.source.splitlines()
            if 1 <= self.line <= len(lines):
                text = lines[self.line - 1]
                col = max(1, min(self.col or 1, len(text) + 1))
                # keep very long lines (one-line LEIR programs) readable around the caret
                lo = max(0, col - 60)
                hi = min(len(text), col + 60)
                snippet = ("..." if lo else "") + text[lo:hi] + ("..." if hi < len(text) else "")
                caret = col - lo + (3 if lo else 0)
                out += "\n    " + snippet.expandtabs(1) + "\n    " + " " * (caret - 1) + "^"
        return out

    def __str__(self) -> str:
        return self.format()
