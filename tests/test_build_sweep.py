"""Issue 29, bullet 3: every step the engine offers lowers and builds on llvm.

``slow``: the whole sweep (tests/build_sweep.py: every neighbour of every corpus program, in
``LEIR_SWEEP_WORKERS`` processes, default the CPUs up to 8) reports 0 failures, and the
statement-by-statement builds agree with whole builds on every neighbour they found failing.
The default run builds a sample whole with ``lowering.run.build``: one neighbour of every fourth
rule that fires on a few small corpus programs (shrunk) and the handwritten programs of the math
identities (``slow``: of every rule), and one of every fourth rule on the quick start's matmul kernel,
which once offered a precompute_indices step that did not build (``slow``: two of every rule).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

import build_sweep

# small corpus programs, shrunk (dataset.generate.shrink) so that a build takes a fraction of a second
SAMPLE = ("softmax", "Hingeloss", "cumprod", "GELU", "Argmax_over_a_dimension", "Max_Pooling_2D", "L2Norm",
          "CrossEntropyLoss", "Matmul_Min_Subtract", "cumsum_exclusive", "Matmul_with_transposed_A")


@pytest.fixture(scope="module")
def engine():
    from engine import Engine
    return Engine()


def _failures(pairs) -> list:
    from lowering.errors import LoweringError
    from lowering.run import build
    bad = []
    for p, st in pairs:
        try:
            build(st.program)
        except LoweringError as e:
            bad.append((p.name, st.rule, list(st.site), dict(st.params), e.message[:200]))
    return bad


@pytest.fixture(scope="module")
def sample(engine):
    """(program, step): the first neighbour of each rule, in program order, over the sample."""
    from dataset.generate.shrink import shrink_program
    from test_neighbours_lower import handwritten
    corpus = build_sweep.corpus_programs(set(SAMPLE))
    assert len(corpus) == len(SAMPLE)
    programs = [shrink_program(p, 4096) or p for p in corpus] + list(handwritten())
    pairs, seen = [], set()
    for p in programs:
        for st in build_sweep.per_rule(engine.enumerate(p), 1):
            if st.rule not in seen:
                seen.add(st.rule)
                pairs.append((p, st))
    assert len({st.rule for _, st in pairs}) >= 55 and len({st.strategy for _, st in pairs}) >= 35
    return pairs


def test_a_neighbour_of_every_fourth_rule_on_a_sample_builds(sample):
    """The default run's share of the next test (a build is a TVM compile: about a second)."""
    assert _failures(sample[::4]) == []


@pytest.mark.slow
def test_one_neighbour_of_every_rule_on_a_sample_builds(sample):
    assert _failures(sample) == []


def _quick_start_kernel(engine):
    """The matmul kernel of the quick start's kernel search (loop_reorder, loop_split by 64,
    loop_vectorization) and its steps."""
    from engine import load_program
    p = load_program(ROOT / "examples" / "matmul.leir")
    for step in ({"rule": "loop_reorder", "site": [0], "params": {"outer": "a", "inner": "c", "exactness": "bitwise"}},
                 {"rule": "loop_split", "site": [0], "params": {"loop": "a", "factor": 64, "outer": 3,
                                                                "new_names": ["d"]}},
                 {"rule": "loop_vectorization", "site": [0], "params": {"loop": "a"}}):
        p = engine.apply(p, step)
    return p, engine.enumerate(p)


def test_the_quick_start_kernel_no_longer_offers_to_table_its_written_index(engine, tvm):
    """precompute_indices once offered to table the written index d*64+a of the kernel's
    reduction, which does not lower; a neighbour of every fourth rule there builds."""
    p, steps = _quick_start_kernel(engine)
    assert not [s for s in steps if s.strategy == "precompute_indices" and "d*64+a" in str(s.params)]
    assert len(steps) > 50
    assert _failures([(p, st) for st in build_sweep.per_rule(steps, 1)[::4]]) == []


@pytest.mark.slow
def test_the_quick_start_kernel_offers_only_steps_that_build(engine, tvm):
    p, steps = _quick_start_kernel(engine)
    assert _failures([(p, st) for st in build_sweep.per_rule(steps, 2)]) == []


def test_the_incremental_builder_agrees_with_whole_builds(engine, tvm):
    """A statement that does not build fails its neighbour; one whose vectorised form does not
    build but whose serial form does passes, as lowering.run.build's second attempt does."""
    from lowering.errors import LoweringError
    from lowering.run import build
    b = build_sweep.IncrementalBuilder()
    p = build_sweep.corpus_programs({"softmax"})[0]
    for st in engine.enumerate(p)[:10]:
        try:
            build(st.program)
            whole = None
        except LoweringError as e:
            whole = e.message
        assert (b.error(st.program) is None) == (whole is None), st.leir
    assert b.seen and b.whole == 0


@pytest.mark.slow
def test_every_neighbour_of_the_corpus_builds(tmp_path):
    workers = int(os.environ.get("LEIR_SWEEP_WORKERS") or min(8, os.cpu_count() or 1))
    procs = [subprocess.Popen([sys.executable, str(ROOT / "tests" / "build_sweep.py"), "-o", str(tmp_path),
                               "--chunk", f"{k}/{workers}"], cwd=ROOT, stdout=subprocess.DEVNULL)
             for k in range(1, workers + 1)]
    assert [p.wait() for p in procs] == [0] * workers
    rep = build_sweep.report(tmp_path)
    assert rep["programs"] == 99 and rep["neighbours"] > 50_000
    assert rep["failures"] == 0, json.dumps(rep["causes"][:10], indent=1)
    assert rep["incremental_only"] == 0
