"""``Engine.apply`` is a function of (program text, step) (issue 29): a step gives the same
program whether the program it is applied to was built by a rule or read back from its text,
and whichever of the two an engine saw first (its memo is keyed by the text).

Random paths of steps are walked from corpus programs (and the handwritten programs on which
the math identities fire); along each, every step is applied four ways: by an engine to the
rule-built program and then to the program re-read from its text, and by a second engine in
the other order. All four must print the same, and the printed result must read back to a
program that prints the same again. The default run walks a seeded sample (two corpus
programs, the quick start's softmax, two paths through the math identities); ``slow`` walks
every corpus program and more math paths.
"""
from __future__ import annotations

import random

import pytest

from conftest import ROOT, corpus_records

PATH_LENGTH = 3
SAMPLE_PROGRAMS = ("Hingeloss", "cumprod")           # with examples/softmax.leir; slow: the whole corpus
MATH_SEEDS = 2                                      # random paths through the math identities; slow: 8


def _reread(p):
    """``p`` as the parser builds it from its printed text."""
    from engine.leir.parser import parse_body
    return p.with_body(parse_body(p.to_leir()))


def walk(engine, program, seed: int, length: int = PATH_LENGTH) -> list:
    """[(program before, step)] along a seeded random path (the rule-built programs)."""
    rng = random.Random(seed)
    out = []
    for _ in range(length):
        steps = engine.enumerate(program)
        if not steps:
            break
        st = steps[rng.randrange(len(steps))]
        out.append((program, st))
        program = st.program
    return out


def disagreements(path, engines) -> list[str]:
    """Where applying a path's steps both ways, in both orders, gives different texts.
    ``engines``: two engines that have not seen the path's programs (apply memoises by text):
    the first is given each rule-built program first, the second its read-back text first."""
    first, second = engines
    bad = []
    for i, (before, st) in enumerate(path):
        record = st.to_json()
        text = _reread(before)
        a1 = first.apply(before, record).to_leir()       # rule-built first
        a2 = first.apply(text, record).to_leir()
        b1 = second.apply(text, record).to_leir()        # read-back first
        b2 = second.apply(before, record).to_leir()
        got = {a1, a2, b1, b2, st.leir}
        if len(got) > 1:
            bad.append(f"step {i + 1} {st.rule} at {list(st.site)} on {before.name}: {sorted(got)}")
        elif _reread(st.program).to_leir() != st.leir:
            bad.append(f"step {i + 1} {st.rule}: its text does not read back to itself")
    return bad


def _programs(names=None, handwritten=True):
    """The corpus programs (those ``names`` and the quick start's softmax, or all of them), and
    the handwritten programs on which the math identities and S43 fire."""
    from engine.leir.files import load_program, program_from_json
    from test_neighbours_lower import handwritten as extra
    progs = [program_from_json(r) for r in corpus_records() if names is None or r["name"] in names]
    if names is not None:
        progs.append(load_program(ROOT / "examples" / "softmax.leir"))
    return progs + (list(extra()) if handwritten else [])


@pytest.fixture(scope="module")
def engine():
    from engine import Engine
    return Engine()


@pytest.fixture(scope="module")
def engines():
    """The two engines ``disagreements`` applies steps with, loaded once: each path's programs
    are new to them (a text seen on an earlier path gives its memoised steps, which must agree
    all the same)."""
    from engine import Engine
    return Engine(), Engine()


def layout(node):
    """A statement or expression as a tuple that keeps the ``paren`` flags (equality ignores them)."""
    from dataclasses import fields, is_dataclass
    if isinstance(node, tuple):
        return tuple(layout(x) for x in node)
    if not is_dataclass(node):
        return node
    return (type(node).__name__,) + tuple(layout(getattr(node, f.name)) for f in fields(node) if f.name != "pos")


def test_the_issues_case_collect_after_collect():
    """(A+D)*E - D*E built by collect from A*E+D*E-D*E, and the same text read back: collect
    gives ((A+D)-D)*E on both (the parenthesis of A+D is in the text either way)."""
    from engine import Engine
    from rulekit import prog_f32
    body = ("L^{8}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}*E^{f32,g}_{a}+D^{f32,g}_{a}*E^{f32,g}_{a}"
            "-D^{f32,g}_{a}*E^{f32,g}_{a};];")
    p = prog_f32(body, [("A", [8]), ("D", [8]), ("E", [8])], [("C", [8])])
    eng = Engine(strategies=["collect"])
    built = next(s for s in eng.enumerate(p) if s.rule == "collect/sum").program
    assert built.to_leir() == ("L^{8}_{a=0}[C^{f32,g}_{a}=(A^{f32,g}_{a}+D^{f32,g}_{a})*E^{f32,g}_{a}"
                               "-D^{f32,g}_{a}*E^{f32,g}_{a};];")
    want = "L^{8}_{a=0}[C^{f32,g}_{a}=((A^{f32,g}_{a}+D^{f32,g}_{a})-D^{f32,g}_{a})*E^{f32,g}_{a};];"
    for first in (built, _reread(built)):                 # a fresh engine, each order
        e = Engine(strategies=["collect"])
        assert [s.leir for s in e.enumerate(first)] == [want]
        other = _reread(built) if first is built else built
        assert [s.leir for s in e.enumerate(other)] == [want]


def test_neighbours_are_built_as_their_text_reads_back(engine):
    """Every neighbour's tree, paren flags included, is what the parser builds from its text."""
    bad = []
    for p in _programs(("GELU",), handwritten=False):
        for st in engine.enumerate(p):
            if layout(st.program.body) != layout(_reread(st.program).body):
                bad.append((p.name, st.rule, st.leir))
    assert bad == []


def _math_paths(engine, engines, seeds) -> list[str]:
    """Random paths through the math identities (collect, expand_collect, ...)."""
    from test_neighbours_lower import handwritten
    math = handwritten()[0]
    bad = []
    for seed in seeds:
        bad += disagreements(walk(engine, math, seed, 4), engines)
    return bad


def test_a_rule_built_program_and_its_text_give_the_same_steps(engine, engines):
    assert _math_paths(engine, engines, range(MATH_SEEDS)) == []


@pytest.mark.slow
def test_more_paths_through_the_math_identities(engine, engines):
    assert _math_paths(engine, engines, range(MATH_SEEDS, 8)) == []


def test_random_paths_on_a_sample_apply_the_same_both_ways(engine, engines):
    bad = []
    for k, p in enumerate(_programs(SAMPLE_PROGRAMS, handwritten=False)):
        bad += disagreements(walk(engine, p, seed=k), engines)
    assert bad == []


@pytest.mark.slow
def test_random_paths_on_the_whole_corpus_apply_the_same_both_ways(engine, engines):
    bad = []
    for k, p in enumerate(_programs()):
        for j in range(2):
            bad += disagreements(walk(engine, p, seed=1000 * k + j), engines)
    assert bad == []
