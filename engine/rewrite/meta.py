"""A strategy block's header: comment directives read into a typed, frozen ``StrategyMeta``.

A header is the ``;; @key value`` comment lines of a block (several directives may share a
line: ``;; @K 1 @P 3 @S 2``). ``DIRECTIVES`` declares every key once: the field of
``StrategyMeta`` it fills, the parser of its text (which raises ``MetaError`` with a message
for a bad value; the loader locates it at the directive), whether a block must give it, and
whether it may be repeated (its values then accumulate in order, one per line).

Adding a directive is one entry in ``DIRECTIVES`` and one field of ``StrategyMeta`` (with a
default when the directive is optional).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping

CATEGORIES = ("graph", "operator", "memory", "math")
DIFFICULTIES = ("easy", "medium", "difficult")
EXACTNESS = ("bitwise", "reassociating")
ORIGINS = ("paper", "extra", "user")          # the paper's 43, implemented beyond them, a user's own
# what a strategy can improve (@benefit, a comma-separated list); "none": nothing by itself (it
# enables other steps, or undoes one)
BENEFITS = {
    "parallelism": "more independent iterations, or iterations spread over cores, threads or blocks",
    "vector_width": "operations on several elements at once (SIMD lanes, vectorised loops)",
    "memory_traffic": "fewer bytes moved to and from memory (fewer or smaller intermediate tensors)",
    "locality": "accesses closer in time or space (caches, shared or local memory, contiguous layouts)",
    "reuse": "a value computed once and reused, or hoisted out of a loop it does not depend on",
    "arithmetic": "fewer or cheaper arithmetic operations",
    "launch_count": "fewer loop nests (kernels) run, one pass instead of several",
    "loop_overhead": "fewer loop iterations to control (branches, index updates)",
    "numerical_stability": "values kept in a safer range (less overflow, underflow or cancellation)",
    "none": "nothing by itself: it enables other strategies or undoes one",
}
# names a strategy may not take: they name strategy sets (engine.rewrite.sets)
RESERVED_NAMES = ("all", "paper", "extra", "user", "bitwise") + CATEGORIES
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class MetaError(ValueError):
    """A directive's value is not valid (the message says why)."""


def _one_of(values, what: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in values:
            raise MetaError(f"{what} must be one of {', '.join(values)}, got '{text}'")
        return text
    return parse


def _count(key: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.isdigit():
            raise MetaError(f"@{key} must be a non-negative integer, got '{text}'")
        return int(text)
    return parse


def _name(text: str) -> str:
    if not _NAME.match(text):
        raise MetaError(f"strategy name '{text}' must be an identifier (letters, digits, _)")
    if text in RESERVED_NAMES:
        raise MetaError(f"'{text}' names a strategy set ({', '.join(RESERVED_NAMES)}): choose another name")
    return text


def _inverse(text: str) -> str:
    if text != "none" and not _NAME.match(text):
        raise MetaError(f"@inverse must be a strategy name or 'none', got '{text}'")
    return text


def _text(key: str, why: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if not text:
            raise MetaError(f"@{key} {why}")
        return text
    return parse


def _benefit(text: str) -> tuple[str, ...]:
    items = tuple(t.strip() for t in text.split(","))
    bad = [t for t in items if t not in BENEFITS]
    if not text or bad:
        raise MetaError(f"@benefit: unknown benefit '{bad[0] if bad else ''}' (a comma-separated list of: "
                        f"{', '.join(BENEFITS)})")
    if len(set(items)) != len(items):
        raise MetaError("@benefit names a benefit twice")
    if "none" in items and len(items) > 1:
        raise MetaError("@benefit none stands alone")
    return items


@dataclass(frozen=True)
class Directive:
    key: str                       # written @key
    field: str                     # the StrategyMeta field it fills
    parse: Callable[[str], object]
    required: bool = True
    repeatable: bool = False       # values accumulate, in order, as a tuple


DIRECTIVES: dict[str, Directive] = {d.key: d for d in (
    Directive("strategy", "name", _name),
    Directive("category", "category", _one_of(CATEGORIES, "@category")),
    Directive("difficulty", "difficulty", _one_of(DIFFICULTIES, "@difficulty")),
    Directive("K", "K", _count("K")),
    Directive("P", "P", _count("P")),
    Directive("S", "S", _count("S")),
    Directive("inverse", "inverse", _inverse),
    Directive("exactness", "exactness", _one_of(EXACTNESS, "@exactness")),
    Directive("description", "description", _text("description", "must say what the strategy does")),
    Directive("range", "range", _text("range", "must say what can overflow or underflow"), required=False),
    Directive("benefit", "benefit", _benefit, required=False),
    Directive("origin", "origin", _one_of(ORIGINS, "@origin"), required=False),
    # the templates' slots are checked against the facts and the rules' parameters when the book
    # loads (engine.rewrite.cot_template); here each line is kept as written
    Directive("cot", "cot", str, required=False, repeatable=True),
)}
REQUIRED = tuple(k for k, d in DIRECTIVES.items() if d.required)
OPTIONAL = tuple(k for k, d in DIRECTIVES.items() if not d.required)


@dataclass(frozen=True)
class StrategyMeta:
    """Everything a strategy block's header says, typed."""

    name: str
    category: str
    difficulty: str                  # the paper's bucket: easy, medium, difficult
    K: int
    P: int
    S: int
    inverse: str                     # a strategy name or "none"
    exactness: str                   # bitwise or reassociating
    description: str
    file: str
    line: int                        # of @strategy
    range: str = ""                  # why some rules are range-guarded ("" when none is)
    benefit: tuple[str, ...] = ()    # what it can improve (BENEFITS); () when the block does not say
    origin: str = "user"             # paper, extra or user (a block without @origin is a user's)
    cot: tuple[str, ...] = ()        # the @cot lines as written (Strategy.cot holds them parsed)
    where: Mapping[str, tuple[int, int]] = field(default_factory=dict, compare=False, repr=False)

    def score(self) -> float:
        """The paper's difficulty score 0.1*K + 0.5*(P-1) + S (dataset.md 2.1)."""
        return 0.1 * self.K + 0.5 * (self.P - 1) + self.S

    def at(self, key: str) -> tuple[int, int]:
        """(line, column) of a directive, or of @strategy when the block lacks it."""
        return self.where.get(key, self.where.get("strategy", (self.line, 1)))


_DIRECTIVE = re.compile(r"@(\w+)\s*((?:(?!\s@\w).)*)")


@dataclass
class Header:
    """The directives of one block as written: key -> [(text, line, col), ...]."""

    file: str
    line: int
    col: int
    entries: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.entries["strategy"][0][0]


def scan_headers(text: str, filename: str, foreign=()) -> tuple[list[Header], list[tuple[int, int, str]]]:
    """The headers of a rule file in order (a header starts at each ``@strategy``), and the
    directives found outside any block, as problems (line, col, message). A line starting with
    a ``foreign`` key (``@example``, ``@after``) belongs to another reader and is skipped whole."""
    headers: list[Header] = []
    problems: list[tuple[int, int, str]] = []
    for no, raw in enumerate(text.split("\n"), 1):
        s = raw.strip()
        if not s.startswith(";;") or "@" not in s:
            continue
        body = s.lstrip(";").strip()
        if not body.startswith("@"):
            continue
        offset = raw.index(body)
        for m in _DIRECTIVE.finditer(body):
            key, value, col = m.group(1), m.group(2).strip(), offset + m.start() + 1
            if key in foreign:
                break
            if key == "strategy":
                headers.append(Header(filename, no, col))
            elif not headers:
                problems.append((no, col, f"directive @{key} outside a strategy block"))
                continue
            headers[-1].entries.setdefault(key, []).append((value, no, col))
    return headers, problems


def read_meta(header: Header) -> tuple[StrategyMeta | None, list[tuple[int, int, str]]]:
    """The typed record of a header, or None and its problems (line, col, message)."""
    values: dict[str, object] = {}
    where: dict[str, tuple[int, int]] = {}
    problems: list[tuple[int, int, str]] = []
    name = header.entries["strategy"][0][0]
    for key, found in header.entries.items():
        d = DIRECTIVES.get(key)
        line, col = found[0][1], found[0][2]
        if d is None:
            close = difflib.get_close_matches(key, list(DIRECTIVES), n=1, cutoff=0.6)
            hint = f" (did you mean @{close[0]}?)" if close else f" (known: {', '.join(DIRECTIVES)})"
            problems.append((line, col, f"unknown metadata key @{key}{hint}"))
            continue
        if len(found) > 1 and not d.repeatable:
            problems.append((found[1][1], found[1][2], f"duplicate @{key} in block '{name}'"))
        where[key] = (line, col)
        parsed = []
        for text, ln, cl in found if d.repeatable else found[:1]:
            try:
                parsed.append(d.parse(text))
            except MetaError as e:
                problems.append((ln, cl, str(e)))
        if len(parsed) == (len(found) if d.repeatable else 1):
            values[d.field] = tuple(parsed) if d.repeatable else parsed[0]
    for key in REQUIRED:
        if key not in header.entries:
            problems.append((header.line, header.col, f"strategy '{name}' has no @{key}"))
    if problems:
        return None, problems
    return StrategyMeta(file=header.file, line=header.line, where=MappingProxyType(where), **values), []
