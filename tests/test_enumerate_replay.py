"""Provenance is unique and replayable: within one program no two steps share a key (rule, site
and parameters, the derived ``new_names`` left out) unless they give the same program, and
``Engine.apply`` of every listed step, read back from its JSON record, gives the listed program
byte for byte, for the step's own provenance and for each alternative one."""
from __future__ import annotations

import json

import pytest

from conftest import CORPUS, EXAMPLES
from engine import Engine, load_program, load_programs
from engine.rewrite.steps import step_key

# small corpus programs whose steps, with the attention example, exercise 60 of the 66 rules that
# fire on the corpus and the examples, among them every rule that used to give two programs at one
# (rule, site, params) (softmax, Tanh, the poolings, conv3d's index sums)
SPREAD = ("conv_standard_1D_dilated_strided", "CrossEntropyLoss", "SELU", "Average_Pooling_2D", "Sigmoid",
          "cumsum_exclusive", "cumprod", "HardSigmoid", "Argmax_over_a_dimension", "softmax", "Tanh",
          "Max_Pooling_2D", "TripletMarginLoss", "conv1d_conv1d_padding", "cumsum_reverse",
          "conv_standard_3D__square_input__square_kernel")


@pytest.fixture(scope="module")
def engine():
    return Engine(strategies="all")


def corpus():
    if not CORPUS.exists():
        pytest.skip("corpus not available")
    return {p.name: p for p in load_programs(CORPUS)}


def check_program(engine, program) -> set[str]:
    """Assert both properties for every step of ``program``; the rules seen."""
    steps = engine.enumerate(program)
    owner: dict[str, str] = {}
    for s in steps:
        for rule, site, params in [(s.rule, s.site, s.params)] + [(a.rule, a.site, a.params) for a in s.alternatives]:
            k = step_key(rule, site, params)
            assert owner.setdefault(k, s.leir) == s.leir, \
                f"{program.name}: {rule} at {list(site)} with {dict(params)} gives two different programs"
    rules = set()
    for s in steps:
        record = json.loads(json.dumps(s.to_json()))          # what a dataset row stores
        provs = [record] + record.get("also", [])
        for prov in provs:
            rules.add(prov["rule"])
            got = engine.apply(program, {"rule": prov["rule"], "site": prov["site"], "params": prov["params"]})
            assert got.to_leir() == s.leir, (program.name, prov["rule"], prov["site"], prov["params"])
    return rules


@pytest.mark.long
def test_spread_of_corpus_programs_replays_with_unique_keys(engine):
    progs = corpus()
    rules = set()
    for name in SPREAD:
        rules |= check_program(engine, progs[name])
    rules |= check_program(engine, load_program(EXAMPLES / "attention.leir"))
    families = {r.split("/")[0] for r in rules}
    assert len(rules) >= 60 and {"expression_splitting", "common_subexpression_elimination", "precompute_indices",
                                 "cache_read_write", "layout_transformation", "exponential_split",
                                 "multiplicative_split", "flashattention_wo_tiling"} <= families, sorted(rules)


def test_softmax_example_splits_are_told_apart_by_the_expression(engine):
    """The case the issue names: two expression_splitting steps at site [1] moved A-D and exp(A-D)."""
    p = load_program(EXAMPLES / "softmax.leir")
    at1 = [s for s in engine.enumerate(p, "expression_splitting") if list(s.site) == [1]]
    assert sorted(s.params["expr"] for s in at1) == ["A^{f32,g}_{tx,a}-D^{f32,g}_{tx}",
                                                     "exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})"]
    assert len({s.key for s in at1}) == 2
    for s in at1:
        assert engine.apply(p, {"rule": s.rule, "site": [1], "params": {"expr": s.params["expr"]}}).to_leir() == s.leir


def test_a_step_with_another_expression_does_not_apply(engine):
    from engine import StepError
    p = load_program(EXAMPLES / "softmax.leir")
    with pytest.raises(StepError, match="does not apply with parameters expr=A"):
        engine.apply(p, {"rule": "expression_splitting", "site": [1], "params": {"expr": "A^{f32,g}_{tx,a}"}})


@pytest.mark.slow
def test_whole_corpus_and_examples_replay_with_unique_keys(engine):
    for p in corpus().values():
        check_program(engine, p)
    for f in sorted(EXAMPLES.glob("*.leir")):
        check_program(engine, load_program(f))


BUGGY = """
;; @strategy loop_unrolling
;; @category operator
;; @difficulty medium
;; @K 0 @P 1 @S 0
;; @inverse none
;; @exactness bitwise
;; @description unrolls a loop (and, deliberately, renames it in the header only: a rule bug)
;; @example
;;   input  A f32[4, 8]
;;   output C f32[4, 8]
;;   B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];
;; @after loop_unrolling loop=a
;;   B^{4}_{tx=0}U^{8}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];
(rule ((= s (Nest ls body)) (LoopAt ls i l) (= l (Lp "L" v n)) (> n 1))
      ((Step s (Nest (LSet ls i (Lp "U" "zz" n)) body) "loop_unrolling" (PStr "loop" v (PNil))))
      :ruleset step :name "loop_unrolling")
"""


def test_a_step_that_builds_an_invalid_program_is_a_clear_error(tmp_path):
    """apply re-analyses only the step it returns; a rule bug there is a StepError, and enumerate
    never lists it (it is counted in stats()['invalid'])."""
    from engine import StepError
    from rulekit import rule_file_dir
    eng = Engine(rules=rule_file_dir(tmp_path, BUGGY))
    p = load_program(EXAMPLES / "softmax.leir")
    assert eng.enumerate(p) == [] and eng.stats()["invalid"]
    with pytest.raises(StepError, match="builds an invalid program"):
        eng.apply(p, {"rule": "loop_unrolling", "site": [0], "params": {"loop": "a"}})
