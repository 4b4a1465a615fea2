"""The engine reproduces a recorded neighbour snapshot exactly (guards enumeration speed work).

The snapshot (tests/data/enumerate_snapshot.json) holds, for corpus programs of different
sizes, the sorted (strategy, rule, digest of the neighbour text) triples of every provenance of
every neighbour under the strategies recorded with it (digests keep the file small: the
largest programs have thousands of neighbours of 3,000 characters each). Strategies added later are not part of the
check. When a rule change alters the neighbour set on purpose, regenerate it with

    .venv/bin/python tests/test_enumerate_snapshot.py --write [--without STRATEGY ...]

and say so in the commit message.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "tests" / "data" / "enumerate_snapshot.json"
CORPUS = ROOT / "examples" / "corpus" / "programs.jsonl"
# corpus programs of increasing size (from 72 to 3,000 characters of LEIR)
PROGRAMS = ("ReLU", "Product_reduction_over_a_dimension", "Matmul_with_large_K_dimension", "Matmul3D",
            "conv_depthwise_2D_square_input_square_kernel", "Matmul_with_transposed_A",
            "conv_standard_3D__square_input__square_kernel", "FrobeniusNorm", "softmax",
            "Average_Pooling_1D", "TripletMarginLoss", "Matmul_for_symmetric_matrices", "GroupNorm",
            "Gemm_BatchNorm_Scaling_Softmax", "MQA_Gemm")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def triples(engine, program, strategies) -> list[list[str]]:
    res = engine.enumerate(program, strategies)
    return sorted([p.strategy, p.rule, digest(nb.leir)] for nb in res.neighbours for p in nb.provenances)


def record(without=()) -> dict:
    from engine.rewrite.enumerator import Enumerator
    from engine.leir.files import load_programs
    eng = Enumerator()
    strategies = sorted(s.name for s in eng.book.strategies if s.name not in without)
    progs = {p.name: p for p in load_programs(CORPUS)}
    return {"strategies": strategies,
            "programs": {name: triples(eng, progs[name], strategies) for name in PROGRAMS}}


@pytest.fixture(scope="module")
def snapshot():
    if not CORPUS.exists():
        pytest.skip("corpus not available")
    return json.loads(SNAPSHOT.read_text())


@pytest.fixture(scope="module")
def engine():
    from engine.rewrite.enumerator import Enumerator
    return Enumerator()


@pytest.fixture(scope="module")
def programs():
    from engine.leir.files import load_programs
    return {p.name: p for p in load_programs(CORPUS)}


def test_snapshot_covers_programs_of_every_size(snapshot):
    sizes = [len(snapshot["programs"][n]) for n in PROGRAMS]
    assert set(snapshot["programs"]) == set(PROGRAMS)
    assert min(sizes) > 0 and max(sizes) > 1000


@pytest.mark.parametrize("name", PROGRAMS)
def test_neighbours_match_snapshot(snapshot, engine, programs, name):
    missing = set(snapshot["strategies"]) - set(engine.strategies)
    assert not missing, f"strategies of the snapshot no longer exist: {sorted(missing)}"
    got = triples(engine, programs[name], snapshot["strategies"])
    want = [list(t) for t in snapshot["programs"][name]]
    if got != want:
        gs, ws = {tuple(t) for t in got}, {tuple(t) for t in want}
        extra, lost = sorted(gs - ws)[:3], sorted(ws - gs)[:3]
        pytest.fail(f"{name}: {len(got)} triples, snapshot {len(want)}; new {extra}; lost {lost}")


def test_helpers_evaluated_in_python_match_egglog_compute(programs):
    """engine.compute evaluates the helper terms of Step rows in Python; saturating the compute
    ruleset in egglog (the fallback) gives the same neighbours, and no fallback was needed."""
    from engine.rewrite.enumerator import Enumerator
    fast, slow = Enumerator(), Enumerator()
    slow.python_compute = False
    for name in ("Matmul3D", "softmax", "Average_Pooling_1D"):
        got = triples(fast, programs[name], None)
        assert got == triples(slow, programs[name], None) and len(got) > 50
    assert fast.compute_fallbacks == 0 and slow.compute_fallbacks == 3


def test_engine_loading_a_subset_gives_the_same_neighbours(engine, programs):
    """Enumerator(strategies=...) loads only those strategies' rules (cheaper push/pop per query)
    and enumerates exactly what the full engine does for that selection; others are refused."""
    from engine.leir.diagnostics import LeirError
    from engine.rewrite.enumerator import Enumerator
    subset = ["loop_split", "loop_reorder", "compute_inline", "operator_fusion"]
    small = Enumerator(strategies=subset)
    for name in ("Matmul3D", "softmax"):
        got = triples(small, programs[name], None)
        assert got == triples(engine, programs[name], subset) and got
    with pytest.raises(LeirError, match="not loaded"):
        small.enumerate(programs["softmax"], ["loop_tiling"])


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] != ["--write"] or len(args) % 2 != 1 or any(a != "--without" for a in args[1::2]):
        sys.exit("usage: tests/test_enumerate_snapshot.py --write [--without STRATEGY ...]")
    sys.path.insert(0, str(ROOT))
    data = record(set(args[2::2]))
    SNAPSHOT.write_text(json.dumps(data, separators=(",", ":"), sort_keys=True).replace("],[", "],\n[") + "\n")
    print(f"wrote {SNAPSHOT}: {sum(len(v) for v in data['programs'].values())} triples")
