"""``Neighbour``: one distinct result of an enumeration, built lazily, and every way it was
obtained. What a rule did is recorded once, as ``engine.rewrite.steps.Step``: while splicing a
match is a plain tuple (``Match``: strategy, category, rule, site, params, exactness), and it
becomes a ``Step`` only when asked for, with its fresh-name placeholders resolved.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.leir.diagnostics import LeirError
from engine.leir.printer import Printer, with_printed_parens
from engine.rewrite.names import UnknownPlaceholder, fresh_plan, rename_item, resolve_params
from engine.rewrite.steps import Step

# A match as the splicer records it: (strategy, category, rule, site, params, exactness),
# params as ((key, value), ...) in rule order with placeholders unresolved. A tuple, not a
# record: an enumeration makes one per Step row and site, and most are never looked at.
Match = tuple


class InvalidNeighbour(Exception):
    """A rule built a program that fails re-analysis: a bug in that rule."""


class Shared:
    """What one enumeration's neighbours share: a printer that remembers the text of every
    node (neighbours share almost all of their nodes with the program and each other)."""

    __slots__ = ("printer",)

    def __init__(self):
        self.printer = Printer({})


class Neighbour:
    """One distinct neighbour and every way it was obtained.

    The body, its text and the fresh names are materialised on first use (most callers
    sample a few neighbours of many): the new statements are printed with their placeholders
    and the fresh names substituted in the text, so listing texts never rebuilds an AST; the
    renamed body is built only when asked for, its new statements as the parser would read
    them back from their text (``with_printed_parens``). ``program`` re-analyses the body with
    ``check_inits`` (the printed text must carry the initialisation the rule built);
    failure raises ``InvalidNeighbour``.
    """

    __slots__ = ("base", "lo", "hi", "_new", "_taken", "matches", "_provs", "_body", "_leir", "_names",
                 "_program", "_shared", "_texts", "_maps", "_step")

    def __init__(self, base, lo: int, hi: int, new, taken: set, matches: list, shared: Shared | None = None):
        self.base, self.lo, self.hi, self._new, self._taken = base, lo, hi, new, taken
        self._shared = shared or Shared()      # one enumeration's neighbours share it
        self.matches: list[Match] = matches     # as the rules wrote them (placeholders unresolved)
        self._body = self._leir = self._names = self._program = self._provs = self._texts = self._maps = None
        self._step = None

    @property
    def provenances(self) -> list[Step]:
        """Every way this neighbour was obtained, best first, as ``Step``s whose parameters
        have the fresh-name placeholders replaced by the names this neighbour actually uses."""
        if self._provs is None:
            names = self.fresh_names
            try:
                self._provs = [_step(m, resolve_params(m[2], m[4], names), self) for m in self.matches]
            except UnknownPlaceholder as e:
                raise InvalidNeighbour(str(e)) from None
        return self._provs

    @property
    def raw_provenances(self) -> list[Step]:
        """The matches as the rules wrote them (placeholders unresolved), best first."""
        return [_step(m, m[4], self) for m in self.matches]

    @property
    def step(self) -> Step:
        """The step of this neighbour: its best provenance with the fresh names it chose
        (``new_names``), the others as ``alternatives``."""
        if self._step is None:
            first, *rest = self.provenances
            params = dict(first.params)
            names = self.fresh_names
            if names:
                params["new_names"] = [names[k] for k in sorted(names)]
            self._step = Step(first.strategy, first.category, first.rule, first.site, params, first.exactness,
                              tuple(rest), self)
        return self._step

    def _plan(self):
        """Decode the new statements, print them (placeholders and all) and choose names."""
        if self._maps is None:
            if callable(self._new):
                self._new = self._new()
            texts = [self._shared.printer.item(n) for n in self._new]
            self._maps, self._names, self._texts = fresh_plan(self._taken, self._new, texts)

    @property
    def body(self) -> tuple:
        if self._body is None:
            self._plan()
            new = tuple(with_printed_parens(rename_item(n, names) if names else n)
                        for n, names in zip(self._new, self._maps))
            self._body = self.base.body[:self.lo] + new + self.base.body[self.hi:]
        return self._body

    @property
    def fresh_names(self) -> dict:
        """{placeholder: fresh name} chosen for this neighbour."""
        self._plan()
        return self._names

    @property
    def leir(self) -> str:
        if self._leir is None:
            self._plan()
            item, body = self._shared.printer.item, self.base.body
            self._leir = ("".join(item(n) for n in body[:self.lo]) +
                          "".join(self._texts) +
                          "".join(item(n) for n in body[self.hi:]))
        return self._leir

    @property
    def program(self):
        if self._program is None:
            try:
                self._program = self.base.with_body(self.body, check_inits=True)
            except LeirError as e:
                raise InvalidNeighbour(f"{self.matches[0][2]}: {e.message}") from e
        return self._program

    def to_json(self) -> dict:
        return self.step.to_json()


def _step(m: Match, params: tuple, source) -> Step:
    return Step.trusted(m[0], m[1], m[2], m[3], params, m[5], (), source)


@dataclass
class Invalid:
    """A rule result that failed re-analysis: a rule bug, reported, never silently dropped."""

    provenance: Step
    leir: str
    error: str


@dataclass
class Enumeration:
    neighbours: list[Neighbour]
    invalid: list[Invalid]
    step_rows: int
