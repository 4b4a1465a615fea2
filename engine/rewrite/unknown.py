"""Errors for names a user got wrong: the closest known names ("did you mean") and where the
name may be missing from."""
from __future__ import annotations

import difflib

from engine.leir.diagnostics import LeirError
from engine.rewrite.meta import RESERVED_NAMES


def did_you_mean(word: str, candidates, n: int = 3, cutoff: float = 0.6) -> str:
    """`` (did you mean 'a' or 'b'?)`` for the candidates close to ``word``, else ""."""
    close = difflib.get_close_matches(word, sorted(set(candidates)), n=n, cutoff=cutoff)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


class UnknownStrategy(LeirError):
    """A strategy or strategy-set name that no loaded block has. ``for_flag`` names the
    command-line flag it came from."""

    def __init__(self, name: str, known, user_loaded: bool, flag: str | None = None):
        self.name, self.known, self.user_loaded = name, tuple(known), user_loaded
        msg = (f"unknown strategy or strategy set '{name}'{did_you_mean(name, tuple(known) + RESERVED_NAMES)}; "
               f"sets: {', '.join(RESERVED_NAMES)}")
        if not user_loaded:
            msg += "; a strategy of your own is loaded with its folder: --rules DIR"
        super().__init__(f"{flag}: {msg}" if flag else msg)

    def for_flag(self, flag: str) -> "UnknownStrategy":
        return UnknownStrategy(self.name, self.known, self.user_loaded, flag)
