"""The egglog session of an enumerator: schema and rules loaded once into a long-lived EGraph,
and the schedule of one query run between a push and a pop.

Loading: every rule file except the rulesets of strategies not loaded (and, when helpers are
evaluated in Python, the compute ruleset); the analysis rules only when some loaded rule reads
what they derive, one ruleset per stratum (engine.rewrite.strata). A query: insert the
program and its facts (one rule whose actions insert everything, run once), saturate the
analyses, run the selected strategies for ONE iteration; the caller reads the Step rows
inside ``query`` (pop discards them).
"""
from __future__ import annotations

import contextlib
import gc
import time

import egglog.bindings as b

from engine.rewrite.strata import needed, queried_tables, strata
from engine.rewrite.terms import SP


@contextlib.contextmanager
def gc_paused():
    """No cyclic garbage collection during a query. A query allocates hundreds of thousands
    of small objects (interned keys, helper results) and almost no cycles; the collector's
    passes over the engine's long-lived tables it triggers were a quarter of the query time.
    Whatever cycles the query leaves are collected once it returns."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class Clock:
    """Adds the time since the previous call to ``acc[phase]`` (benchmarks/enumerate.py)."""

    __slots__ = ("acc", "t")

    def __init__(self, acc: dict):
        self.acc, self.t = acc, time.perf_counter()

    def __call__(self, phase: str) -> None:
        t = time.perf_counter()
        self.acc[phase] = self.acc.get(phase, 0.0) + t - self.t
        self.t = t


class Session:
    """One EGraph with a rule book's schema and rules.

    ``book``: the rule book; ``loaded``: the strategies whose rules are loaded; ``order``:
    strategy -> rule-file position; ``with_compute``: load the compute ruleset (egglog then
    evaluates helper terms); ``mentioned``: tables the Python helper evaluation may look up
    (kept like those a rule reads); ``stratified``: saturate the analyses stratum by stratum."""

    def __init__(self, book, loaded: tuple[str, ...], order: dict[str, int], with_compute: bool,
                 mentioned: set[str], stratified: bool = True):
        self.book, self.order = book, order
        self.strategies = book.by_name()
        drop = {s.ruleset for s in book.strategies if s.name not in loaded}
        self.eg = b.EGraph()
        if not with_compute:
            drop.add("compute")
        analysis = []                        # the analysis rules, loaded stratified below
        wanted: set[str] = set()             # tables the loaded strategy (and compute) rules read
        for filename, text in book.programs(drop):
            cmds = self.eg.parse_program(text, filename=filename)
            rest = []
            for c in cmds:
                if isinstance(c, b.RuleCommand) and c.rule.ruleset == "analysis":
                    analysis.append(c)
                else:
                    rest.append(c)
                    wanted |= queried_tables(c)
            self.eg.run_program(*rest)
        wanted |= mentioned                  # evaluated in Python, compute rules look functions up
        tables = set(self.eg.freeze().functions)
        kept, self.queried = needed([c.rule for c in analysis], tables, wanted)  # queried: facts to insert
        if stratified:
            self._analysis_schedule = self._load_strata(kept, tables)
        else:
            self.eg.run_program(*(b.RuleCommand(r) for r in kept))
            self._analysis_schedule = "(run-schedule (saturate (run analysis)))"
        self.run_compute = self.eg.parse_program("(run-schedule (saturate (run compute)))")
        self._run_insert = b.RunSchedule(b.Repeat(SP, 1, b.Run(SP, b.RunConfig("q_insert", None))))
        self.rule_matches: dict[str, int] = {}      # egglog matches per strategy rule, accumulated
        self._schedules: dict[tuple | None, list] = {}
        self._combined: set[str] = set()
        self.depth = 0                       # open push scopes on self.eg (queries only)
        self.declared = set(self.eg.freeze().functions)
        self.static: set[tuple] = set()      # facts kept in the base e-graph (engine.rewrite.facts)

    def _load_strata(self, rules: list, tables: set[str]) -> str:
        """Declare one ruleset per analysis stratum (engine.strata), add its rules and return
        the schedule that saturates them in order."""
        layers = strata(rules, tables)
        runs = []
        for i, (layer, recursive) in enumerate(layers):
            name = f"analysis_{i}"
            self.eg.run_program(b.AddRuleset(SP, name),
                                *(b.RuleCommand(b.Rule(r.span, r.head, r.body, r.name, name)) for r in layer))
            runs.append(f"(saturate (run {name}))" if recursive else f"(run {name})")
        return f"(run-schedule (seq {' '.join(runs)}))" if runs else "(run-schedule (saturate (run analysis)))"

    def _ruleset(self, selected: tuple[str, ...] | None) -> str:
        """The ruleset that runs exactly the selected strategies for one iteration.

        A subset of several strategies needs a combined ruleset. egglog keeps rulesets in
        the e-graph state that push/pop saves and restores, so a ruleset declared inside a
        query's push would vanish at its pop while the schedule cache still named it (the
        "no entry found for key" panic). Combined rulesets are therefore declared only at
        the top level (``self.depth == 0``), once per subset, and live as long as the engine.
        """
        if selected is None:
            return "step"
        if len(selected) == 1:
            return self.strategies[selected[0]].ruleset
        name = "q_" + "_".join(str(self.order[s]) for s in selected)
        if name not in self._combined:
            if self.depth:
                raise RuntimeError("combined rulesets must be declared outside a query's push/pop")
            self.eg.run_program(b.UnstableCombinedRuleset(SP, name, [self.strategies[s].ruleset for s in selected]))
            self._combined.add(name)
        return name

    def schedule(self, selected: tuple[str, ...] | None) -> list:
        """Commands: saturate analysis, one step of the selected rulesets. The helper terms the
        step built are evaluated in Python while decoding (engine.compute), not by saturating
        the compute ruleset, unless the session loaded it (then the caller runs ``run_compute``)."""
        sched = self._schedules.get(selected)
        if sched is None:
            rs = self._ruleset(selected)
            text = self._analysis_schedule + f"(run {rs} 1)"
            sched = self._schedules[selected] = self.eg.parse_program(text)
        return sched

    def keep(self, fact: tuple, action) -> None:
        """Insert a fact true of every program (engine.rewrite.facts.STATIC_RELATIONS) at the
        base level, below any push: later queries find it there."""
        self.static.add(fact)
        self.eg.run_program(b.ActionCommand(action))

    @contextlib.contextmanager
    def query(self, actions: list, selected: tuple[str, ...] | None, clock: Clock):
        """Insert ``actions`` (the program and its facts), saturate the analyses and run one
        step of ``selected``; the body of the ``with`` reads the results before the pop."""
        eg = self.eg
        # one rule with an empty query whose actions insert everything, run once: egglog
        # handles each top-level command separately, which costs far more
        insert = [b.AddRuleset(SP, "q_insert"),
                  b.RuleCommand(b.Rule(SP, actions, [], "q_insert", "q_insert")),
                  self._run_insert]
        clock("facts")
        schedule = self.schedule(selected)  # before push: a combined ruleset must outlive the pop
        eg.run_program(b.Push(1))
        self.depth += 1
        clock("push")
        try:
            eg.run_program(*insert)
            clock("insert")
            eg.run_program(schedule[0])
            clock("analysis")
            for out in eg.run_program(*schedule[1:]):
                if isinstance(out, b.RunScheduleOutput):
                    self._count(out.report)
            clock("step")
            yield eg
            clock("decode")
        finally:
            eg.run_program(b.Pop(SP, 1))
            self.depth -= 1
            clock("pop")

    def _count(self, report) -> None:
        """Accumulate egglog's per-rule match counts of a step run. (egglog runs the selected
        rules as one ruleset and times only the whole: ``phase_seconds["step"]``.)"""
        for rule, n in report.num_matches_per_rule.items():
            if n:
                self.rule_matches[rule] = self.rule_matches.get(rule, 0) + n
