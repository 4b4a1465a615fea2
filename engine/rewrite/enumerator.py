"""One-step neighbour enumeration: every rule match of every strategy, with provenance.

A query runs in stages, each a module with typed inputs and outputs:

1. encode the program (engine.rewrite.terms: interned keys, where each occurs);
2. analyse it in Python and turn the facts into insert actions (engine.rewrite.facts);
3. in the egglog session (engine.rewrite.session): insert, saturate the analyses, run the
   selected strategies for ONE iteration, and read the Step rows before the pop
   (engine.rewrite.rows; helper terms evaluated by engine.rewrite.compute on the way);
4. splice each row into the ORIGINAL program at every position where its left-hand side
   occurs and merge identical results (engine.rewrite.splice) into ``Neighbour``s, whose
   placeholders get fresh names (engine.rewrite.names) and which are re-analysed with
   ``check_inits`` on first use (the printed neighbour must mean what the rule built).

One long-lived EGraph holds the schema and rules; each query runs between push and pop.
"""
from __future__ import annotations

from engine.leir.diagnostics import LeirError
from engine.rewrite.compute import ComputeRules
from engine.rewrite.facts import STATIC_RELATIONS, FactInserter, value_tables
from engine.rewrite.names import _Uncovered, fresh_plan, loop_names, rename_text, tensor_names
from engine.rewrite.neighbour import Enumeration, Invalid, InvalidNeighbour, Neighbour
from engine.rewrite.rows import decode_rows
from engine.rewrite.rulebook import Rulebook, load_rulebook
from engine.rewrite.schema import Unsupported
from engine.rewrite.session import Clock, Session, gc_paused
from engine.rewrite.splice import Splicer
from engine.rewrite.terms import Interner, encode
from engine.rewrite.unknown import UnknownStrategy
from engine.rewrite.validate import check_rulebook

# names other modules and tests import from here
__all__ = ["Enumeration", "Enumerator", "Invalid", "InvalidNeighbour", "Neighbour", "STATIC_RELATIONS",
           "_Uncovered", "default_engine", "fresh_plan", "loop_names", "neighbours", "rename_text",
           "tensor_names"]


class _NeedsCompute(Exception):
    """engine.compute could not decide a helper term: re-run the query with egglog's compute."""


class Enumerator:
    """Schema and rules loaded once into a long-lived EGraph; one push/pop per query."""

    def __init__(self, rules_dir=None, rulebook: Rulebook | None = None, python_compute: bool = True,
                 strategies=None, stratified: bool = True):
        """``python_compute``: helper terms are evaluated by engine.compute and the e-graph is
        loaded without the compute ruleset; a query engine.compute cannot decide is re-run on
        a second engine that saturates the compute ruleset in egglog (built on first need).

        ``strategies``: load only these strategies' rules (every query may select only among
        them). Each query clones the e-graph's rules at its push, so an engine for a subset is
        cheaper per query (graph + operator only: push + pop about half).

        ``stratified``: saturate the analysis ruleset stratum by stratum (engine.strata); False
        saturates it as one ruleset (same result, slower: tests compare the two).

        A rule book with an error (every error ``engine.lint`` reports: engine.rewrite.validate),
        or with a compute rule the code generator cannot compile (engine.rewrite.codegen), is
        refused here with its file and line."""
        self.book = rulebook or load_rulebook(rules_dir)
        check_rulebook(self.book)
        self.strategies = self.book.by_name()
        self.owner = self.book.rule_owner()
        self.order = {s.name: i for i, s in enumerate(self.book.strategies)}
        for st in strategies or ():
            if st not in self.strategies:
                raise self._unknown(st)
        self.loaded = tuple(s.name for s in self.book.strategies if strategies is None or s.name in strategies)
        self.compute = ComputeRules(self.book.programs())
        if self.compute.problems:
            f, line, col, msg = self.compute.problems[0]
            raise LeirError(msg, line, col, file=f)
        self._stripped = python_compute      # the session lacks the compute ruleset's rules
        self.session = Session(self.book, self.loaded, self.order, not python_compute, self.compute.mentioned,
                               stratified)
        self.facts = FactInserter(self.session.declared, self.session.queried, self.session.static,
                                  self.book.schema_place, value_tables(self.book.schema_forms()))
        self.splicer = Splicer(self.owner, self.order)
        self.compute_fallbacks = 0           # queries whose helpers needed egglog's compute ruleset
        self.python_compute = python_compute  # False: every query saturates compute in egglog
        self._full: Enumerator | None = None     # the engine with egglog's compute ruleset (fallback)
        self.phase_seconds: dict[str, float] = {}   # seconds spent per query phase, accumulated

    # the session's state, as earlier callers and tests name it
    eg = property(lambda self: self.session.eg)
    rule_matches = property(lambda self: self.session.rule_matches)
    _depth = property(lambda self: self.session.depth)
    _queried = property(lambda self: self.session.queried)
    _static = property(lambda self: self.session.static)

    def _unknown(self, name: str) -> UnknownStrategy:
        return UnknownStrategy(name, self.strategies, any(s.origin == "user" for s in self.book.strategies))

    def select(self, strategies=None, categories=None) -> tuple[str, ...] | None:
        """The selected strategies in rule-file order (None: every strategy, all loaded)."""
        if not strategies and not categories:
            return None if len(self.loaded) == len(self.book.strategies) else self.loaded
        names = []
        for s in self.book.strategies:
            if strategies and s.name not in strategies:
                continue
            if categories and s.category not in categories:
                continue
            names.append(s.name)
        for s in strategies or ():
            if s not in self.strategies:
                raise self._unknown(s)
        if len(self.loaded) != len(self.book.strategies):
            names = [n for n in names if n in self.loaded]
            missing = sorted(set(strategies or ()) - set(self.loaded))
            if missing:
                raise LeirError(f"strategy '{missing[0]}' is not loaded in this engine "
                                f"(loaded: {', '.join(self.loaded)})")
        return tuple(names)

    def enumerate(self, program, strategies=None, categories=None, validate: bool = False) -> Enumeration:
        """Every one-step neighbour of ``program`` (a ``Program``), merged and sorted.

        With ``validate`` every neighbour is re-analysed now and failures are returned in
        ``invalid``; otherwise ``Neighbour.program`` does it on first use.
        """
        selected = self.select(strategies, categories)
        if selected == ():
            return Enumeration([], [], 0)
        program = program.as_read_back()     # its neighbours a function of its text, not of its history
        if self._stripped and not self.python_compute:
            self.compute_fallbacks += 1
            return self._egglog_compute().enumerate(program, strategies, categories, validate)
        try:
            with gc_paused():
                return self._enumerate(program, selected, validate)
        except _NeedsCompute:
            self.compute_fallbacks += 1
            return self._egglog_compute().enumerate(program, strategies, categories, validate)

    def _egglog_compute(self) -> "Enumerator":
        if self._full is None:
            self._full = Enumerator(rulebook=self.book, python_compute=False,
                                    strategies=None if len(self.loaded) == len(self.book.strategies) else self.loaded)
        return self._full

    def _enumerate(self, program, selected, validate: bool) -> Enumeration:
        clock = Clock(self.phase_seconds)
        interner = Interner()
        enc = encode(program.body, interner, "l_prog", "l_")
        clock("encode")
        actions, static = self.facts.actions(self.facts.analyse(program, enc), enc)
        for fact in static:                  # kept for good: inserted at the base level, below the push
            self.session.keep(fact, self.facts.action(fact))
        with self.session.query(enc.actions + actions, selected, clock) as eg:
            if self._stripped:
                try:
                    dec, rows = decode_rows(eg, interner, enc, self.compute)
                except (Unsupported, KeyError, RecursionError) as e:
                    raise _NeedsCompute(str(e)) from e
            else:
                eg.run_program(*self.session.run_compute)
                dec, rows = decode_rows(eg, interner, enc, None)
        out = self.splicer.expand(program, enc, dec, rows, validate)
        clock("expand")
        return out


_ENGINE: Enumerator | None = None


def default_engine() -> Enumerator:
    """A process-wide engine over the project's rules/ directory."""
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = Enumerator()
    return _ENGINE


def neighbours(program, strategies=None, categories=None) -> list[Neighbour]:
    """Convenience: the valid neighbours of ``program`` under the default engine."""
    return default_engine().enumerate(program, strategies, categories, validate=True).neighbours
