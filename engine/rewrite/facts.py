"""The analysis facts of one query: computed in Python (engine.rewrite.analyses), turned into
the egglog actions that insert them.

The analyses see the program and its encoding and answer with one ``ProgramFacts``: facts
about the whole program, about the nest at a body path (a nest that occurs at several paths
is one e-class, so its facts are those true at every one of them), about pairs of top-level
nests, and the repeated expressions. Only facts some loaded rule can read are inserted:
egglog compiles each action of the insert rule at tens of microseconds apiece, so an engine
loading a few strategies skips the facts only the others use.
"""
from __future__ import annotations

from typing import NamedTuple

import egglog.bindings as b

from engine.leir.diagnostics import LeirError
from engine.rewrite.analyses.program import program_facts
from engine.rewrite.terms import SP, call, lit_i, lit_s

# Python-computed relations that are pure functions of their integer arguments (the divisors
# and cut points of an extent): true in every program, so a fact stays in the base e-graph
# once inserted and later queries skip it (every rule joins them to an extent of the query's
# own loops). Each action of a query's insert rule costs egglog tens of microseconds.
STATIC_RELATIONS = frozenset({"Divisor", "Cut"})

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


def analyse(program, enc) -> ProgramFacts:
    """The facts of ``program`` as encoded by ``enc`` (engine.rewrite.terms.encode)."""
    glob, per_key, pairs, rep = program_facts(program, enc)
    return ProgramFacts(glob, per_key, pairs, rep, enc.path_key)


def fact_action(fact: tuple, items: tuple):
    """The action inserting ``fact`` (relation, literal args...) about the nests bound to the
    variables ``items``. Shared across queries, like ``lit_s``: item variables are named
    after small interned keys, so the same few thousand facts recur from query to query, and
    building the pyo3 objects was most of the facts phase."""
    k = (fact, items)
    got = _ACTIONS.get(k)
    if got is None:
        if len(_ACTIONS) > 200_000:
            _ACTIONS.clear()
        rel, *args = fact
        vals = [b.Var(SP, v) for v in items] + [lit_i(a) if isinstance(a, int) else lit_s(a) for a in args]
        if rel == "ThreadProduct":       # a function: its value is the last argument
            got = b.Set(SP, rel, vals[:-1], vals[-1])
        else:
            got = b.Expr_(SP, call(rel, vals))
        _ACTIONS[k] = got
    return got


class FactInserter:
    """Facts -> insert actions for one session: ``declared`` are the tables the rule files
    declare, ``queried`` those some loaded rule reads, ``static`` the facts of
    STATIC_RELATIONS the base e-graph holds already; ``first_file`` is named in errors."""

    def __init__(self, declared: set[str], queried: set[str], static: set[tuple], first_file):
        self.declared, self.queried, self.static, self.first_file = declared, queried, static, first_file
        self._checked: set[str] = set()

    def _check_relations(self, names) -> None:
        """Every relation the Python analyses produce must be declared by the rule files:
        egglog itself panics while formatting the error for an unknown one."""
        for rel in names:
            if rel not in self._checked:
                if rel not in self.declared:
                    raise LeirError(f"the Python analyses (engine.rewrite.analyses) produced a fact for '{rel}', "
                                    f"which no rule file declares (declare it in {self.first_file})")
                self._checked.add(rel)

    def actions(self, facts: ProgramFacts, enc) -> tuple[list, list]:
        """(actions inserting this query's facts, facts of STATIC_RELATIONS the base e-graph
        lacks yet: the caller keeps them there)."""
        self._check_relations(facts.relations())
        used = self.queried
        acts, static = [], []
        for fact in facts.glob:
            if fact[0] in used:
                if fact[0] not in STATIC_RELATIONS:
                    acts.append(fact_action(fact, ()))
                elif fact not in self.static:
                    static.append(fact)
        per_key = facts.nests
        for key in sorted(per_key):
            g = (enc.nest_globals[key],)
            for fact in sorted(per_key[key], key=repr):
                if fact[0] in used:
                    acts.append(fact_action(fact, g))
        for rel, k1, k2, *args in facts.pairs:
            if rel in used:
                acts.append(fact_action((rel, *args), (enc.nest_globals[k1], enc.nest_globals[k2])))
        for (_, k) in facts.repeated if "Repeated" in used else ():
            acts.append(b.Expr_(SP, call("Repeated", [enc.exprs[k]])))
        return acts, static
