"""``Engine``: the public face of the rewriting. It lists every one-step rewrite of a program
as ``Step``s, replays a step exactly (``apply``), and counts what each rule did (``stats``).

Strategy sets, by name (``SETS``): ``all`` (every strategy block loaded), ``paper`` (the
paper's 43: blocks with ``@origin paper``), ``extra`` (implemented beyond the paper:
dead_code_elimination), ``user`` (blocks of the user's own, ``@origin user`` or none), a
category (``graph``, ``operator``, ``memory``, ``math``) and ``bitwise`` (rules whose result is
bitwise identical: every step a reassociating rule makes is left out). A set may also be a
strategy name or a list of names and set names.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Iterable, Mapping

from engine.leir.diagnostics import LeirError
from engine.rewrite.enumerator import Enumerator, InvalidNeighbour
from engine.rewrite.meta import CATEGORIES
from engine.rewrite.rule_sources import RuleSources
from engine.rewrite.steps import Step, step_from_neighbour
from engine.rewrite.unknown import UnknownStrategy, did_you_mean

# set name -> which strategy blocks (engine.rewrite.rulebook.Strategy) it holds
SETS = {
    "all": lambda s: True,
    "paper": lambda s: s.origin == "paper",
    "extra": lambda s: s.origin == "extra",
    "user": lambda s: s.origin == "user",
    **{c: (lambda s, c=c: s.category == c) for c in CATEGORIES},
}
SET_NAMES = ("all", "paper", "extra", "user", "bitwise") + CATEGORIES


class StepError(LeirError):
    """A step that does not apply to the program it was given."""


class Engine:
    """Rules loaded once; ``enumerate``, ``apply`` and ``stats`` over any number of programs.

    ``rules``: None (the built-in rules), a folder of rule files or a list of them (added to
    the built-in rules; a folder with its own schema (leir/) is a complete rules directory that
    replaces them), or a ``RuleSources``. ``strategies``: a set name, a strategy name, or a
    list of them (default ``all``); only those strategies are loaded, which makes every query
    cheaper."""

    def __init__(self, rules=None, strategies=None):
        from engine.rewrite.rulebook import load_rulebook
        self.rule_sources = RuleSources.of(rules)
        book = load_rulebook(self.rule_sources)
        names, self.bitwise_only = resolve_strategies(book, strategies)
        self._all = len(names) == len(book.strategies)
        self._enum = Enumerator(rules, rulebook=book, strategies=None if self._all else names)
        self.strategies: tuple[str, ...] = self._enum.loaded
        self._counts: dict[str, list] = {}          # rule -> [steps listed, programs with a match]
        self._invalid: list[dict] = []              # rule bugs seen: {program, rule, error}
        self._seconds = 0.0
        self._programs = 0
        self._memo: OrderedDict = OrderedDict()     # (program text, decls, strategy) -> steps (apply)

    # ------------------------------------------------------------------ metadata

    @property
    def rulebook(self):
        return self._enum.book

    @property
    def rule_manifest(self) -> list[dict]:
        """The rule files loaded, as results record them: ``[{"file", "sha256"}, ...]``."""
        return self._enum.book.manifest()

    def strategy(self, name: str):
        """One strategy block (``engine.rewrite.rulebook.Strategy``; its typed header: ``.metadata``)."""
        try:
            return self._enum.strategies[name]
        except KeyError:
            raise UnknownStrategy(name, self._enum.strategies,
                                  any(s.origin == "user" for s in self.rulebook.strategies)) from None

    def owner(self, rule: str):
        """The strategy block that owns a rule name, or None."""
        return self._enum.owner.get(rule)

    # ------------------------------------------------------------------ listing

    def enumerate(self, program, strategies=None, validate: bool = True) -> list[Step]:
        """Every one-step rewrite of ``program``, in a stable order, one ``Step`` per distinct
        result. ``strategies`` narrows this engine's set (a set name, a name or a list).

        With ``validate`` (the default) each result is re-analysed now; a rule that builds an
        invalid program is a rule bug, counted in ``stats()`` and left out."""
        t0 = time.perf_counter()
        steps, invalid = self._list(program, strategies, validate)
        self._seconds += time.perf_counter() - t0
        self._record(program, steps, invalid)
        return steps

    def _list(self, program, strategies, validate: bool) -> tuple[list[Step], list[dict]]:
        """(steps, rule bugs as {program, rule, error}) of one program."""
        subset, bitwise = None, False
        if strategies is not None:
            names, bitwise = resolve_strategies(self._enum.book, strategies)
            subset = [n for n in names if n in self.strategies]
            if not subset:
                return [], []
        res = self._enum.enumerate(program, subset, validate=validate)
        steps = [step_from_neighbour(nb) for nb in res.neighbours]
        if self.bitwise_only or bitwise:
            steps = [s for s in steps if s.exactness == "bitwise"]
        invalid = [{"program": program.name, "rule": bad.provenance.rule, "error": bad.error} for bad in res.invalid]
        return steps, invalid

    def _record(self, program, steps: list[Step], invalid: list[dict]) -> None:
        self._programs += 1
        seen = set()
        for s in steps:
            c = self._counts.setdefault(s.rule, [0, 0])
            c[0] += 1
            if s.rule not in seen:
                c[1] += 1
                seen.add(s.rule)
        self._invalid.extend(invalid)

    def enumerate_many(self, programs: Iterable, workers: int = 1, strategies=None) -> list[list[Step]]:
        """``enumerate`` of each program, in order. With ``workers`` > 1 the programs are spread
        over that many processes (each loads the rules once); the steps come back with their
        text and build their program on first use."""
        programs = list(programs)
        if workers <= 1 or len(programs) <= 1:
            return [self.enumerate(p, strategies) for p in programs]
        from engine.rewrite.parallel import enumerate_in_processes
        return enumerate_in_processes(self, programs, workers, strategies)

    # ------------------------------------------------------------------ replay

    def apply(self, program, step) -> "object":
        """The program ``step`` gives when applied to ``program``, byte for byte what the
        enumeration listed. ``step``: a ``Step`` or a dict with ``rule``, ``site`` and ``params``.
        A step that does not apply raises ``StepError`` saying what did not match."""
        if isinstance(step, Mapping):
            step = Step.from_json(step)
        elif not isinstance(step, Step):
            raise StepError("a step must be a Step or a dict with 'rule', 'site' and 'params'")
        owner = self._enum.owner.get(step.rule)
        if owner is None:
            raise StepError(f"no strategy has a rule named '{step.rule}'{did_you_mean(step.rule, self._enum.owner)}")
        if owner.name not in self.strategies:
            raise StepError(f"rule '{step.rule}' belongs to strategy '{owner.name}', which this engine does not load")
        candidates, by_key = self._steps_of(program, owner.name)
        got = by_key.get(step.key)
        if got is None:
            raise StepError(_mismatch(step, candidates))
        try:
            return got.program                # re-analysed here, for this step only
        except InvalidNeighbour as e:
            raise StepError(f"rule '{step.rule}' at site {list(step.site)} builds an invalid program "
                            f"(a rule bug, never listed by enumerate): {e}") from None

    def replay(self, program, steps: Iterable) -> list:
        """The programs of a trajectory: each step applied to the previous result."""
        out = []
        for i, st in enumerate(steps):
            try:
                program = self.apply(program, st)
            except StepError as e:
                raise StepError(f"step {i + 1}: {e.message}") from None
            out.append(program)
        return out

    def _steps_of(self, program, strategy: str) -> tuple[list[Step], dict[str, Step]]:
        """The steps of one strategy on ``program`` and each step by the key of every provenance
        (its own and its alternatives': keys are unique per program), memoised: a trajectory
        or a whole enumeration replays many steps of one program. Not re-analysed here: ``apply``
        re-analyses the one step it returns."""
        key = (program.to_leir(), tuple((d.name, d.dtype, d.shape) for d in program.known), strategy)
        got = self._memo.get(key)
        if got is None:
            steps = [step_from_neighbour(nb) for nb in
                     self._enum.enumerate(program, [strategy], validate=False).neighbours]
            by_key: dict[str, Step] = {}
            for s in steps:
                for k in [s.key] + [a.key for a in s.alternatives]:
                    by_key.setdefault(k, s)
            got = self._memo[key] = (steps, by_key)
            if len(self._memo) > 64:
                self._memo.popitem(last=False)
        else:
            self._memo.move_to_end(key)
        return got

    # ------------------------------------------------------------------ statistics

    def stats(self) -> dict:
        """What the rules did so far: per rule, the steps listed, the programs it gave steps of and
        egglog's matches (a match whose result is the program itself, or a duplicate, lists no
        step); the seconds of each query phase (egglog runs the selected rules in one pass and
        times only the whole: an engine of one strategy gives that strategy's time); the rule
        bugs seen (results that failed re-analysis)."""
        matches = self._enum.rule_matches
        rules = {}
        for name in sorted(set(self._counts) | set(matches)):
            steps, progs = self._counts.get(name, (0, 0))
            owner = self._enum.owner.get(name)
            rules[name] = {"strategy": owner.name if owner else None, "steps": steps, "programs": progs,
                           "matches": matches.get(name, 0)}
        return {"programs": self._programs, "seconds": round(self._seconds, 6),
                "steps": sum(c[0] for c in self._counts.values()), "rules": rules,
                "phase_seconds": {k: round(v, 6) for k, v in self._enum.phase_seconds.items()},
                "invalid": list(self._invalid)}


def resolve_strategies(book, spec, flag: str | None = None) -> tuple[list[str], bool]:
    """(strategy names in rule-file order, bitwise only?) of a set name, a strategy name or a
    list of them. An unknown name raises ``UnknownStrategy`` (naming ``flag`` when given)."""
    order = [s.name for s in book.strategies]
    if spec is None:
        return order, False
    items = [t.strip() for t in spec.split(",") if t.strip()] if isinstance(spec, str) else list(spec)
    bitwise = "bitwise" in items
    items = [it for it in items if it != "bitwise"] or ["all"]
    by_name = book.by_name()
    chosen: set[str] = set()
    for it in items:
        if it in SETS:
            chosen |= {s.name for s in book.strategies if SETS[it](s)}
        elif it in by_name:
            chosen.add(it)
        else:
            raise UnknownStrategy(it, order, any(s.origin == "user" for s in book.strategies), flag)
    return [n for n in order if n in chosen], bitwise


def _mismatch(step: Step, candidates: list[Step]) -> str:
    """Why ``step`` matched none of the program's steps of its strategy."""
    want = f"rule '{step.rule}' at site {list(step.site)}"
    choice = step.choice
    same_rule = [s for s in candidates if s.rule == step.rule] + \
        [s for s in candidates if any(a.rule == step.rule for a in s.alternatives)]
    if not same_rule:
        return f"{want} does not apply: the rule has no match in this program"
    sites = sorted({tuple(s.site) for s in same_rule})
    at_site = [s for s in same_rule if tuple(s.site) == tuple(step.site)]
    if not at_site:
        shown = ", ".join(str(list(x)) for x in sites[:8]) + (", ..." if len(sites) > 8 else "")
        return f"{want} does not apply: the rule matches at site(s) {shown} only"
    opts = "; ".join(", ".join(f"{k}={v}" for k, v in s.choice.items()) or "(no parameters)" for s in at_site[:6])
    got = ", ".join(f"{k}={v}" for k, v in choice.items()) or "(no parameters)"
    return f"{want} does not apply with parameters {got}: at that site the rule gives {opts}"
