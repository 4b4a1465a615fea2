"""The enumerator's stages and its one provenance record (issue 19 item 8): what each stage hands
the next is typed, and every provenance is a ``Step``."""
import json

import pytest

from engine.leir.files import load_programs
from engine.rewrite.engine import Engine
from engine.rewrite.steps import Step

from conftest import CORPUS


@pytest.fixture(scope="module")
def program():
    return next(p for p in load_programs(CORPUS) if p.name == "Sum_reduction_over_a_dimension")


@pytest.fixture(scope="module")
def engine():
    return Engine(strategies=["cache_read_write"])


def test_a_merged_neighbour_has_one_step_whose_alternatives_are_steps(engine, program):
    """cache_read_write's read and write rules give the same program here: one step, the other
    provenance an alternative with its own rule, site and key, replayable like the step."""
    steps = engine.enumerate(program)
    merged = [s for s in steps if s.alternatives]
    assert len(merged) == 1
    s = merged[0]
    (alt,) = s.alternatives
    assert isinstance(alt, Step) and {s.rule, alt.rule} == {"cache_read_write/read", "cache_read_write/write"}
    assert alt.key != s.key and alt.leir == s.leir
    assert engine.apply(program, alt).to_leir() == engine.apply(program, s).to_leir() == s.leir
    # the record round-trips: the alternative keeps its name, site and parameters
    back = Step.from_json(json.loads(json.dumps(s.to_json())), base=program)
    assert back == s and [a.key for a in back.alternatives] == [alt.key]
    assert back.alternatives[0].provenance() == alt.provenance()


def test_neighbour_provenances_are_steps_of_the_neighbour(engine, program):
    from engine.rewrite.enumerator import Enumerator
    enum = Enumerator(strategies=["cache_read_write"])
    res = enum.enumerate(program, validate=True)
    assert res.neighbours and res.invalid == []
    for nb in res.neighbours:
        for pv in nb.provenances:
            assert isinstance(pv, Step) and pv.leir == nb.leir and pv.program is nb.program
        assert nb.step.alternatives == tuple(nb.provenances[1:])
        assert nb.step.key == nb.provenances[0].key


def test_stage_outputs_are_typed(program):
    """Facts addressed by body path, Step rows as interned keys."""
    from engine.rewrite.enumerator import Enumerator
    from engine.rewrite.facts import analyse
    from engine.rewrite.rows import StepRow, decode_rows
    from engine.rewrite.session import Clock
    from engine.rewrite.terms import Interner, encode
    enum = Enumerator(strategies=["cache_read_write"])
    interner = Interner()
    enc = encode(program.body, interner, "l_prog", "l_")
    facts = analyse(program, enc)
    assert facts.at((0,)) == facts.nests[enc.path_key[(0,)]] and facts.at((0,))
    assert any(f[0] == "CacheOK" for path in enc.path_key if len(path) == 1 for f in facts.at(path))
    actions, _ = enum.facts.actions(facts, enc)
    with enum.session.query(enc.actions + actions, enum.select(), Clock({})) as eg:
        _, rows = decode_rows(eg, interner, enc, enum.compute)
    assert rows and all(isinstance(r, StepRow) and isinstance(r.lhs, int) and isinstance(r.rhs, int) for r in rows)
    assert {r.rule for r in rows} >= {"cache_read_write/read", "cache_read_write/write"}
    assert enum.session.depth == 0
