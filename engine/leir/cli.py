"""Shared command-line plumbing: user errors become ``file:line:col: error: ...`` and exit 2."""
from __future__ import annotations

import re
import sys
from typing import Callable

from engine.leir.diagnostics import LeirError

EXIT_USER_ERROR = 2


def description(doc: str) -> str:
    """A command's ``--help`` description from its module docstring, whole: the leading
    ``python -m ...``: usage (argparse prints its own) and the reST quotes left out. Use with
    ``formatter_class=argparse.RawDescriptionHelpFormatter``."""
    text = doc.strip()
    m = re.match(r"``python -m [^`]*``:\s*", text)
    if m:
        rest = text[m.end():]
        text = rest[:1].upper() + rest[1:]
    return text.replace("``", "") + "\n"


def say_defaults(parser):
    """Every option of ``parser`` (its groups included) whose help does not give its default
    gets `` (default X)``: ``--help`` names each default once; a value outside an option's
    choices gets the closest ones ("did you mean"). Returns the parser."""
    import argparse
    import types
    parser.error = types.MethodType(_error_with_suggestion, parser)
    for a in parser._actions:
        if not a.option_strings or a.nargs == 0 or a.default in (None, False, argparse.SUPPRESS):
            continue
        if a.help is argparse.SUPPRESS or "default" in (a.help or ""):
            continue
        shown = ",".join(map(str, a.default)) if isinstance(a.default, (list, tuple)) else a.default
        a.help = (a.help + " " if a.help else "") + f"(default {shown})".replace("%", "%%")
    return parser


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)$")


def _error_with_suggestion(parser, message: str):
    import argparse
    import difflib
    m = _INVALID_CHOICE.search(message)
    if m:
        choices = re.findall(r"'([^']*)'", m.group(2))
        close = difflib.get_close_matches(m.group(1), choices, n=2, cutoff=0.6)
        if close:
            message += f"; did you mean {' or '.join(repr(c) for c in close)}?"
    argparse.ArgumentParser.error(parser, message)


def report(err: LeirError, file=None) -> None:
    print(err.format(), file=file or sys.stderr)


def warn(err: LeirError, file=None) -> None:
    print(err.format().replace(": error: ", ": warning: ", 1), file=file or sys.stderr)


def run_cli(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> int:
    """Run ``main``; a ``LeirError`` anywhere is printed without a traceback and exits 2."""
    try:
        return main(argv)
    except LeirError as err:
        report(err)
        return EXIT_USER_ERROR
    except OSError as err:  # unreadable input, unwritable output: the user's to fix
        where = f"{err.filename}: " if err.filename else ""
        print(f"{where}error: {err.strerror or err}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
