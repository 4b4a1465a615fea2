"""Composed execution (lowering.compose): a program run as its slot kernels gives bit for bit the
outputs of its whole build, in f32, f16 and bf16; a candidate builds only the kernels it changes;
the Verifier's ``compose`` option verifies that way and counts how programs were built. The slow
sweep covers every corpus program (shrunk as ``dataset.generate --shrink`` shrinks it) and a
seeded sample of its one-step neighbours."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from conftest import EXAMPLES, corpus_records

from engine import parse_program

HALF = ("f16", "bf16")

SMALL_SOFTMAX = """input  A f32[4, 64]
output C f32[4, 64]
B^{4}_{tx=0}L^{64}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];
B^{4}_{tx=0}L^{64}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];
B^{4}_{tx=0}L^{64}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];
"""

# the first statement writes only D's odd elements: the even ones must read as 0 in both runs
PARTIAL = """input  A f32[8]
output C f32[8]
L^{4}_{a=0}[D^{f32,g}_{a*2+1}=A^{f32,g}_{a}*2.0;];
L^{8}_{a=0}[C^{f32,g}_{a}=D^{f32,g}_{a}+1.0;];
"""


def retyped(program, code: str):
    """``program`` with every f32 tensor declared and used as ``code`` (None: it does not analyse)."""
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import program_from_json
    text = json.dumps(program.to_json()).replace('"f32"', f'"{code}"').replace("{f32,", "{" + code + ",")
    try:
        return program_from_json(json.loads(text))
    except LeirError:
        return None


def shrunk(record):
    """A corpus record as ``dataset.generate --shrink`` verifies it (None: it skips the program, whose
    smallest instance is still over --max-points)."""
    from dataset.generate.driver import DEFAULT_MAX_POINTS
    from dataset.generate.shrink import WIDE_GRANULARITIES, points, shrink_with_granularity, smallest_instance
    from engine.leir.files import program_from_json
    p = program_from_json(record)
    small, _ = shrink_with_granularity(p, 16384, WIDE_GRANULARITIES)
    small = small if small is not None else smallest_instance(p)[0]
    return small if small is not None and points(small) <= DEFAULT_MAX_POINTS else None


def same_bits(a: dict, b: dict) -> bool:
    def raw(x):
        return np.ascontiguousarray(x).reshape(-1).view(np.uint8)
    return a.keys() == b.keys() and all(np.array_equal(raw(a[k]), raw(b[k])) for k in a)


def check_bitwise(program, trials: int = 2) -> str:
    """The composed build's method, after checking that it builds exactly when the whole build
    does and that both give the same bits on ``trials`` seeded inputs (or both fail to run)."""
    from lowering.compose import build_composed, run_composed
    from lowering.errors import LoweringError
    from lowering.inputs import random_inputs
    from lowering.run import build, run_built
    try:
        whole = build(program)
    except LoweringError:
        whole = None
    try:
        composed = build_composed(program)
    except LoweringError:
        composed = None
    assert (whole is None) == (composed is None), f"{program.name}: one build fails, the other does not"
    if whole is None:
        return "both fail"
    for t in range(trials):
        inputs = random_inputs(program, 0, t)
        got = []
        for run, built in ((run_built, whole), (run_composed, composed)):
            try:
                got.append(run(built, program, inputs))
            except LoweringError as e:
                got.append(e.stage)
        if isinstance(got[0], str) or isinstance(got[1], str):
            assert got[0] == got[1], f"{program.name}: one run fails, the other does not"
            continue
        assert same_bits(*got), f"{program.name} ({composed.method}), trial {t}: the outputs differ"
    return composed.method


@pytest.mark.parametrize("name", ["softmax", "layernorm", "attention", "conv2d", "matmul"])
@pytest.mark.parametrize("code", ("f32",) + HALF)
def test_examples_run_composed_bit_for_bit(name, code, tvm):
    from engine import load_program
    p = load_program(str(EXAMPLES / f"{name}.leir"))
    p = p if code == "f32" else retyped(p, code)
    method = check_bitwise(p)
    # matmul is one statement (its kernel is the program); the others are composed, except where a
    # bf16 accumulator crosses slots (softmax's sum, layernorm's mean: the whole build keeps it unrounded)
    assert method == ("single" if name == "matmul" else
                      "fallback" if code == "bf16" and name in ("softmax", "layernorm", "attention") else "composed")


def test_elements_a_statement_never_writes_read_as_zero(tvm):
    from lowering.compose import build_composed, run_composed
    from lowering.inputs import random_inputs
    p = parse_program(PARTIAL)
    assert check_bitwise(p) == "composed"
    out = run_composed(build_composed(p), p, random_inputs(p, 0, 0))["C"]
    assert np.array_equal(out[0::2], np.ones(4, np.float32))


def test_bf16_accumulator_crossing_slots_falls_back_and_says_why(tvm):
    from lowering.compose import build_composed
    p = retyped(parse_program(SMALL_SOFTMAX), "bf16")
    c = build_composed(p)
    assert c.method == "fallback" and "E" in c.note and c.whole is not None
    assert build_composed(retyped(parse_program(SMALL_SOFTMAX), "f16")).method == "composed"


def test_neighbours_of_softmax_run_composed_bit_for_bit(engine, tvm):
    p = parse_program(SMALL_SOFTMAX)
    steps = engine.enumerate(p)
    for s in random.Random(26).sample(steps, min(8, len(steps))):
        check_bitwise(s.program)


def test_a_candidate_builds_only_the_kernel_it_changes(engine, tvm):
    """The parent's kernels are built once; a one-statement candidate adds one kernel build."""
    from lowering import run as run_mod
    from lowering.compose import build_composed
    p = parse_program(SMALL_SOFTMAX)
    step = next(s for s in engine.enumerate(p) if s.strategy == "loop_split" and s.site[0] == 2)
    run_mod.clear_build_cache()
    build_composed(p)
    assert len(run_mod._CACHE) == 3
    build_composed(step.program)
    assert len(run_mod._CACHE) == 4


def test_the_verifier_composes_finds_a_wrong_candidate_and_counts_builds(engine):
    from lowering import Verifier
    p = parse_program(SMALL_SOFTMAX)
    wrong = parse_program(SMALL_SOFTMAX.replace("/E^{f32,g}_{tx}", "/(E^{f32,g}_{tx}+1.0)"))
    step = next(s for s in engine.enumerate(p) if s.strategy == "loop_split")
    with Verifier(trials=2, timeout=120, compose=True) as v:
        good = v.verify_step(p, step)
        bad = v.verify(p, wrong)
        assert good.equal and good.builds == {"original": "composed", "candidate": "composed"}
        assert not bad.equal and bad.reason == "not equal"
        assert v.builds == {"composed": 4}
        against = v.verify_against(p, [{"A": np.zeros((4, 64), np.float32)}], [{"C": np.full((4, 64), 1 / 64)}])
        assert against.equal and against.builds == {"program": "composed"}


@pytest.mark.slow
def test_every_corpus_program_and_neighbours_run_composed_bit_for_bit(tvm):
    """Every corpus program, shrunk, in f32, f16 and bf16, and 3 seeded one-step neighbours of each
    (f32): the composed build gives the whole build's bits (or both fail alike)."""
    from engine import Engine
    engine = Engine(strategies="paper")
    methods: dict = {}
    for rec in corpus_records():
        p = shrunk(rec)
        if p is None:
            continue
        for code in ("f32",) + HALF:
            q = p if code == "f32" else retyped(p, code)
            if q is not None:
                m = check_bitwise(q)
                methods[m] = methods.get(m, 0) + 1
        steps = engine.enumerate(p)
        for s in random.Random(f"26:{rec['name']}").sample(steps, min(3, len(steps))):
            m = check_bitwise(s.program)
            methods[m] = methods.get(m, 0) + 1
    assert methods.get("composed", 0) > 200, methods
