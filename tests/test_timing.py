"""Speed labels (dataset.timing): the interval and verdict of paired samples, the interleaved
schedule, and the re-derivation that dataset.check does, on synthetic samples (no timings
asserted: the measured job is in test_dataset_generate.py)."""
from __future__ import annotations

import math
import random

import pytest

from dataset import timing


def _samples(ratio: float, spread: float, n: int = 20, seed: int = 0):
    """Paired (parent, candidate) times whose per-round ratio is ``ratio`` times a factor within ±spread."""
    rng = random.Random(seed)
    parent = [1.0 + rng.uniform(-0.3, 0.3) for _ in range(n)]          # the machine's drift hits both alike
    cand = [p / (ratio * (1 + rng.uniform(-spread, spread))) for p in parent]
    return parent, cand


def _record(parent, cand, floor=0.03, confidence=0.95):
    return timing.record_of(parent, cand, target="llvm", machine={"cpu": "X", "gpu": None, "cores": 2},
                            confidence=confidence, noise_floor=floor, runs=10)


def test_verdicts_inside_and_outside_the_noise_floor():
    p, c = _samples(1.01, 0.002)                         # a tight interval around 1.01: within a 3% floor
    d = timing.derive(p, c, 0.95, 0.03)
    assert 1.0 < d["ci"][0] <= d["ci"][1] < 1.03 and d["verdict"] == "tie"
    assert timing.derive(p, c, 0.95, 0.0)["verdict"] == "faster"          # no floor: significant
    p, c = _samples(1.5, 0.05)
    assert timing.derive(p, c, 0.95, 0.03)["verdict"] == "faster"
    p, c = _samples(0.6, 0.05)
    d = timing.derive(p, c, 0.95, 0.03)
    assert d["verdict"] == "slower" and d["ci"][1] < 1 / 1.03
    p, c = _samples(1.0, 0.4)                            # wide interval holding 1: a tie whatever the floor
    d = timing.derive(p, c, 0.95, 0.0)
    assert d["ci"][0] < 1 < d["ci"][1] and d["verdict"] == "tie"
    # an interval just outside 1 but overlapping the floor is a tie: [lo/(1+f), hi*(1+f)] holds 1
    p, c = _samples(1.04, 0.01)
    d = timing.derive(p, c, 0.95, 0.05)
    assert d["ci"][0] > 1 and d["verdict"] == "tie"


def test_interval_is_the_sign_test_interval_of_the_median():
    assert timing.min_rounds(0.95) == 6 and timing.min_rounds(0.99) == 8
    assert timing._rank(20, 0.95) == 6 and timing._rank(6, 0.95) == 1 and timing._rank(5, 0.95) == 0
    ratios = [0.9 + 0.01 * i for i in range(20)]          # sorted ratios 0.90 .. 1.09
    d = timing.derive([r for r in ratios], [1.0] * 20, 0.95, 0.0)
    assert d["ci"] == [pytest.approx(ratios[5]), pytest.approx(ratios[14])]
    assert d["speedup"] == pytest.approx(math.sqrt(ratios[9] * ratios[10]), rel=1e-5)
    with pytest.raises(ValueError, match="at least 6"):
        timing.derive([1.0] * 5, [1.0] * 5, 0.95, 0.0)


def test_derivation_is_deterministic_symmetric_and_order_free():
    p, c = _samples(1.3, 0.1, seed=4)
    a = timing.derive(p, c, 0.95, 0.03)
    assert a == timing.derive(list(p), list(c), 0.95, 0.03)
    order = list(range(len(p)))
    random.Random(1).shuffle(order)
    assert a == timing.derive([p[i] for i in order], [c[i] for i in order], 0.95, 0.03)
    b = timing.derive(c, p, 0.95, 0.03)                   # B against A: the inverse
    assert b["speedup"] == pytest.approx(1 / a["speedup"], rel=1e-5) and b["verdict"] == "slower"
    assert b["ci"] == [pytest.approx(1 / a["ci"][1], rel=1e-5), pytest.approx(1 / a["ci"][0], rel=1e-5)]


def test_schedule_puts_the_parent_around_every_candidate_and_pairs_neighbours():
    s = timing.schedule(3, 3)
    assert s[0] == [0, 1, 0, 2, 0, 3, 0] and s[1] == [0, 2, 0, 3, 0, 1, 0] and s[2] == [0, 3, 0, 1, 0, 2, 0]
    times = [[float(10 * r + k) for k in range(7)] for r in range(3)]
    pairs = timing.pair(times, s, 3)
    assert pairs[0] == ([1.0, 15.0, 23.0], [1.0, 15.0, 23.0])     # mean of the parent times on each side
    assert pairs[2] == ([5.0, 13.0, 21.0], [5.0, 13.0, 21.0])


def test_a_record_reproduces_from_its_samples_and_tampering_is_found():
    p, c = _samples(1.5, 0.05)
    rec = _record(p, c)
    assert rec["verdict"] == timing.verdict_of(rec) == "faster" and timing.record_problems(rec) == []
    assert rec["rounds"] == 20 and rec["method"] == "interleaved" and len(rec["samples"]["parent"]) == 20
    assert timing.record_problems({**rec, "verdict": "slower"}) == [
        "timing verdict is slower, its samples give faster"]
    assert any("speedup" in m for m in timing.record_problems({**rec, "speedup": 1.0}))
    bad = {**rec, "samples": {"parent": rec["samples"]["parent"], "candidate": rec["samples"]["parent"]}}
    assert timing.verdict_of(bad) == "tie" and timing.record_problems(bad)


def test_dataset_problems_refuse_mixed_machines_and_other_options():
    p, c = _samples(1.5, 0.05)
    rec = _record(p, c)
    row = {"id": "r", "step": {"strategy": "s"}, "verification": {"target": "llvm"}, "timing": rec}
    opts = {"rounds": 20, "noise_floor": 0.03, "confidence": 0.95}
    assert timing.dataset_problems([row, row], opts) == ([], 2)
    other = {**row, "timing": {**rec, "machine": {"cpu": "Y", "gpu": None, "cores": 64}}}
    problems, _ = timing.dataset_problems([row, other], opts)
    assert problems == [("rows.jsonl", "timings of 2 machines or targets in one dataset: llvm on X, 2 cores (1 rows); "
                                       "llvm on Y, 64 cores (1 rows)")]
    problems, _ = timing.dataset_problems([row], {**opts, "noise_floor": 0.05})
    assert problems == [("rows.jsonl:1 (r, s)", "timing noise_floor is 0.03, the job's --noise-floor is 0.05")]
    assert timing.dataset_problems([row], False)[0] == [("rows.jsonl:1 (r, s)",
                                                          "a timing record in a job run without --time")]


def test_machine_label_names_cpu_and_cores():
    m = timing.machine_label("llvm")
    assert isinstance(m["cpu"], str) and m["cpu"] and m["gpu"] is None and m["cores"] >= 1
    assert timing.machine_key({"target": "cuda", "machine": {"cpu": "C", "gpu": "H100", "cores": 16}}) == \
        "cuda on C, GPU H100, 16 cores"
