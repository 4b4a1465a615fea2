"""The analysis facts of one query: computed in Python (engine.rewrite.analyses, one registry:
``analyses.program.ANALYSES``), turned into the egglog actions that insert them.

The analyses see the program and its encoding and answer with one ``ProgramFacts``: facts
about the whole program, about the nest at a body path (a nest that occurs at several paths
is one e-class, so its facts are those true at every one of them), about pairs of top-level
nests, and the repeated expressions. Only the analyses providing a relation some loaded rule
reads run, and only such facts are inserted: egglog compiles each action of the insert rule at
tens of microseconds apiece, so an engine loading a few strategies skips the facts only the
others use.
"""
from __future__ import annotations

from typing import NamedTuple

import egglog.bindings as b

from engine.leir.diagnostics import LeirError
from engine.rewrite.analyses.program import ANALYSES, PROVIDED, STATIC_RELATIONS, program_facts
from engine.rewrite.terms import SP, call, lit_i, lit_s

__all__ = ["ANALYSES", "STATIC_RELATIONS", "FactInserter", "ProgramFacts", "analyse", "fact_action", "value_tables"]

_ACTIONS: dict = {}


class ProgramFacts(NamedTuple):
    """What the analyses found about one program (a relation's name first in every fact)."""

    glob: list[tuple]            # (relation, args...) about the program
    nests: dict[int, set]        # nest key -> {(relation, args...)}, the nest argument left out
    pairs: list[tuple]           # (relation, key of nest i, key of nest j, args...), top level
    repeated: list[tuple]        # ("Repeated", expression key): expressions occurring twice or more
    path_key: dict               # body path -> key of the item there (the encoding's)

    def at(self, path: tuple) -> set:
        """The facts about the nest at body ``path`` (e.g. ``(0, 1)``)."""
        return self.nests.get(self.path_key[tuple(path)], set())

    def relations(self) -> set[str]:
        """Every relation a fact names."""
        out = {f[0] for f in self.glob} | {f[0] for fs in self.nests.values() for f in fs} | {f[0] for f in self.pairs}
        return out | ({"Repeated"} if self.repeated else set())


def analyse(program, enc, wanted=None) -> ProgramFacts:
    """The facts of ``program`` as encoded by ``enc`` (engine.rewrite.terms.encode), of the
    analyses providing a relation in ``wanted`` (None: every analysis)."""
    f = program_facts(program, enc, wanted)
    return ProgramFacts(f.glob, f.nests, f.pairs, f.repeated, enc.path_key)


def value_tables(schema_forms) -> frozenset:
    """The tables of a schema declared ``(function NAME (ARGS) SORT ...)``: a fact of one is set
    to a value (its last argument), not asserted."""
    return frozenset(f.value[1].value for f in schema_forms
                     if f.head == "function" and len(f.value) > 3 and f.value[3].value != "Unit")


def fact_action(fact: tuple, items: tuple, value: bool = False):
    """The action inserting ``fact`` (relation, literal args...) about the nests bound to the
    variables ``items``; ``value``: the relation is a function, its value the last argument.
    Shared across queries, like ``lit_s``: item variables are named after small interned keys,
    so the same few thousand facts recur from query to query, and building the pyo3 objects was
    most of the facts phase."""
    k = (fact, items, value)
    got = _ACTIONS.get(k)
    if got is None:
        if len(_ACTIONS) > 200_000:
            _ACTIONS.clear()
        rel, *args = fact
        vals = [b.Var(SP, v) for v in items] + [lit_i(a) if isinstance(a, int) else lit_s(a) for a in args]
        got = b.Set(SP, rel, vals[:-1], vals[-1]) if value else b.Expr_(SP, call(rel, vals))
        _ACTIONS[k] = got
    return got


class FactInserter:
    """Facts -> insert actions for one session: ``declared`` are the tables the rule files
    declare, ``queried`` those some loaded rule reads, ``static`` the facts of
    STATIC_RELATIONS the base e-graph holds already, ``values`` the tables that are functions
    (``value_tables``); ``first_file`` is named in errors."""

    def __init__(self, declared: set[str], queried: set[str], static: set[tuple], first_file, values=frozenset()):
        self.declared, self.queried, self.static, self.first_file = declared, queried, static, first_file
        self.values = values
        self._checked: set[str] = set()

    def _check_relations(self, names) -> None:
        """Every relation a fact names is one its analysis provides and the rule files declare:
        egglog itself panics while formatting the error for an unknown one."""
        for rel in names:
            if rel not in self._checked:
                if rel not in PROVIDED:
                    raise LeirError(f"internal error: an analysis produced a fact for '{rel}', which no analysis "
                                    "of engine.rewrite.analyses.program.ANALYSES provides")
                if rel not in self.declared:
                    raise LeirError(f"the Python analyses (engine.rewrite.analyses) produced a fact for '{rel}', "
                                    f"which no rule file declares (declare it in {self.first_file})")
                self._checked.add(rel)

    def analyse(self, program, enc) -> ProgramFacts:
        """The facts of the analyses some loaded rule reads."""
        return analyse(program, enc, self.queried)

    def action(self, fact: tuple, items: tuple = ()):
        return fact_action(fact, items, fact[0] in self.values)

    def actions(self, facts: ProgramFacts, enc) -> tuple[list, list]:
        """(actions inserting this query's facts, facts of STATIC_RELATIONS the base e-graph
        lacks yet: the caller keeps them there)."""
        self._check_relations(facts.relations())
        used = self.queried
        acts, static = [], []
        for fact in facts.glob:
            if fact[0] in used:
                if fact[0] not in STATIC_RELATIONS:
                    acts.append(self.action(fact))
                elif fact not in self.static:
                    static.append(fact)
        per_key = facts.nests
        for key in sorted(per_key):
            g = (enc.nest_globals[key],)
            for fact in sorted(per_key[key], key=repr):
                if fact[0] in used:
                    acts.append(self.action(fact, g))
        for rel, k1, k2, *args in facts.pairs:
            if rel in used:
                acts.append(self.action((rel, *args), (enc.nest_globals[k1], enc.nest_globals[k2])))
        for (_, k) in facts.repeated if "Repeated" in used else ():
            acts.append(b.Expr_(SP, call("Repeated", [enc.exprs[k]])))
        return acts, static
