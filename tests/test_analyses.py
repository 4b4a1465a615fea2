"""The analyses' registry (engine/rewrite/analyses/program.py): each analysis names only the
relations it provides, so an engine may run just the analyses its loaded rules read; every
provided relation is declared by the rule files; a fact of an unprovided relation is an error."""
from __future__ import annotations

import pytest
from conftest import CORPUS

from engine.leir.diagnostics import LeirError
from engine.leir.files import load_programs
from engine.rewrite.analyses.program import ANALYSES, PROVIDED, STATIC_RELATIONS, Found, program_facts
from engine.rewrite.facts import FactInserter, analyse, value_tables
from engine.rewrite.rulebook import load_rulebook
from engine.rewrite.terms import Interner, encode


@pytest.fixture(scope="module")
def encoded():
    out = []
    for p in load_programs(CORPUS):
        out.append((p, encode(p.body, Interner(), "l_prog", "l_")))
    return out


def _relations(found: Found) -> set[str]:
    return ({f[0] for f in found.glob} | {f[0] for fs in found.nests.values() for f in fs}
            | {f[0] for f in found.pairs} | {f[0] for f in found.repeated})


def test_each_analysis_produces_only_what_it_provides(encoded):
    produced: set[str] = set()
    for a in ANALYSES:
        for p, enc in encoded:
            found = Found()
            a.facts(p, enc, found)
            got = _relations(found)
            assert got <= a.provides, (a.name, p.name, sorted(got - a.provides))
            produced |= got
    assert produced == PROVIDED, sorted(PROVIDED - produced)     # the corpus exercises every one


def test_running_some_analyses_gives_their_facts_unchanged(encoded):
    """What an engine loading a few strategies computes: the facts of the wanted relations are
    those of a run of every analysis, in the same order."""
    for wanted in ({"Divisor", "Reads"}, {"PadConv", "Dead"}, {"Repeated", "RAW", "Fusible"}, {"InexactOK"}):
        for p, enc in encoded:
            every, some = program_facts(p, enc), program_facts(p, enc, wanted)
            assert [f for f in some.glob if f[0] in wanted] == [f for f in every.glob if f[0] in wanted]
            assert [f for f in some.pairs if f[0] in wanted] == [f for f in every.pairs if f[0] in wanted]
            keys = set(every.nests) | set(some.nests)
            assert ({k: {f for f in some.nests.get(k, ()) if f[0] in wanted} for k in keys}
                    == {k: {f for f in every.nests.get(k, ()) if f[0] in wanted} for k in keys})


def test_the_rule_files_declare_every_provided_relation_and_its_kind():
    book = load_rulebook()
    declared = {f.value[1].value for f in book.schema_forms() if f.head in ("relation", "function")}
    assert PROVIDED <= declared, sorted(PROVIDED - declared)
    assert value_tables(book.schema_forms()) & PROVIDED == {"ThreadProduct"}   # set to a value
    assert STATIC_RELATIONS == {"Divisor", "Cut"}


def test_a_fact_of_an_unprovided_or_undeclared_relation_is_an_error(encoded):
    p, enc = encoded[0]
    facts = analyse(p, enc)
    bogus = facts._replace(glob=facts.glob + [("Bogus", 1)])
    ins = FactInserter(PROVIDED, PROVIDED, set(), "rules/leir")
    with pytest.raises(LeirError, match="'Bogus', which no analysis"):
        ins.actions(bogus, enc)
    ins = FactInserter(PROVIDED - {"Reads"}, PROVIDED, set(), "rules/leir")
    with pytest.raises(LeirError, match="'Reads', which no rule file declares"):
        ins.actions(facts, enc)
