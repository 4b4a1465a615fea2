"""Speed labels (lowering.measure.stats, dataset.timing): the interval and verdict of paired samples,
the sequential rule, the interleaved schedule, and the re-derivation that dataset.check does, on
synthetic samples (no timings asserted: the measured job is in test_dataset_generate.py)."""
from __future__ import annotations

import math
import random

import pytest

from dataset import timing as dtiming
from lowering.measure import machine as machine_mod
from lowering.measure import rounds as rounds_mod
from lowering.measure import stats as timing
from lowering.measure.stats import Protocol

MACHINE = {"cpu": "X", "gpu": None, "cores": 2}


def _samples(ratio: float, spread: float, n: int = 20, seed: int = 0):
    """Paired (parent, candidate) times whose per-round ratio is ``ratio`` times a factor within ±spread."""
    rng = random.Random(seed)
    parent = [1.0 + rng.uniform(-0.3, 0.3) for _ in range(n)]          # the machine's drift hits both alike
    cand = [p / (ratio * (1 + rng.uniform(-spread, spread))) for p in parent]
    return parent, cand


def _record(parent, cand, floor=0.03, confidence=0.95):
    """A record of the fixed-rounds protocol (datasets written before the sequential rule)."""
    return timing.fixed_record_of(parent, cand, target="llvm", machine=MACHINE, confidence=confidence,
                                  noise_floor=floor, runs=10)


def _sequential(parent, cand, protocol):
    """What the worker does: rounds until the rule decides; the record of those rounds."""
    for n in range(1, len(parent) + 1):
        d = timing.decide([timing.sig(x) for x in parent[:n]], [timing.sig(x) for x in cand[:n]], protocol)
        if d["decided"] and d["stop"] == n:
            return timing.record_of(parent[:n], cand[:n], target="llvm", machine=MACHINE, protocol=protocol, runs=10)
    raise AssertionError("never decided")


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
    s = rounds_mod.schedule(3, 3)
    assert s[0] == [0, 1, 0, 2, 0, 3, 0] and s[1] == [0, 2, 0, 3, 0, 1, 0] and s[2] == [0, 3, 0, 1, 0, 2, 0]
    times = [[float(10 * r + k) for k in range(7)] for r in range(3)]
    pairs = rounds_mod.pair(times, s, 3)
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
    assert dtiming.dataset_problems([row, row], opts) == ([], 2)
    other = {**row, "timing": {**rec, "machine": {"cpu": "Y", "gpu": None, "cores": 64}}}
    problems, _ = dtiming.dataset_problems([row, other], opts)
    assert problems == [("rows.jsonl", "timings of 2 machines or targets in one dataset: llvm on X, 2 cores (1 rows); "
                                       "llvm on Y, 64 cores (1 rows)")]
    problems, _ = dtiming.dataset_problems([row], {**opts, "noise_floor": 0.05})
    assert problems == [("rows.jsonl:1 (r, s)", "timing noise_floor is 0.03, the job's --noise-floor is 0.05")]
    assert dtiming.dataset_problems([row], False)[0] == [("rows.jsonl:1 (r, s)",
                                                          "a timing record in a job run without --time")]


def test_machine_label_names_cpu_cores_and_threads(monkeypatch):
    monkeypatch.setenv("TVM_NUM_THREADS", "1")
    m = machine_mod.machine_label("llvm")
    assert isinstance(m["cpu"], str) and m["cpu"] and m["gpu"] is None and m["cores"] >= 1 and m["threads"] == 1
    monkeypatch.delenv("TVM_NUM_THREADS")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(machine_mod.platform, "machine", lambda: "x86_64")
    assert machine_mod.machine_label("llvm")["threads"] == max(1, m["cores"] // 2)   # TVM's default on x86
    monkeypatch.setattr(machine_mod.platform, "machine", lambda: "aarch64")
    assert machine_mod.machine_label("llvm")["threads"] == m["cores"]                # elsewhere one per core
    assert machine_mod.machine_key({"target": "cuda", "machine": {"cpu": "C", "gpu": "H100", "cores": 16}}) == \
        "cuda on C, GPU H100, 16 cores"
    assert machine_mod.machine_key({"target": "llvm", "machine": {"cpu": "C", "cores": 2, "threads": 1}}) == \
        "llvm on C, 2 cores, 1 threads"


# ------------------------------------------------------------------ the sequential rule


def test_looks_are_bonferroni_corrected_and_start_where_an_interval_can_exclude_1():
    assert timing.looks(20, 0.95, 4) == ([8, 12, 16, 20], pytest.approx(0.9875))
    assert timing.looks(20, 0.95, 0) == ([20], 0.95)
    assert timing.looks(6, 0.95, 4) == ([6], 0.95)
    pts, c = timing.looks(40, 0.95, 8)
    assert pts[-1] == 40 and len(pts) * (1 - c) <= 0.05 + 1e-12 and pts[0] >= timing.min_rounds(c)
    with pytest.raises(ValueError, match="at least 6"):
        timing.looks(5, 0.95, 4)


def test_a_clear_difference_stops_at_the_first_look_and_rederives():
    proto = Protocol()
    p, c = _samples(1.5, 0.05)
    rec = _sequential(p, c, proto)
    assert rec["rounds"] == 8 and rec["verdict"] == "faster" and rec["method"] == "sequential"
    assert rec["max_rounds"] == 20 and rec["look_every"] == 4 and rec["look_confidence"] == pytest.approx(0.9875)
    assert timing.record_problems(rec) == [] and timing.verdict_of(rec) == "faster"
    p, c = _samples(0.5, 0.05)
    assert _sequential(p, c, proto)["verdict"] == "slower"
    # equivalent within the floor: a tight interval inside [1/1.03, 1.03] stops early as a tie
    p, c = _samples(1.0, 0.002)
    rec = _sequential(p, c, Protocol(noise_floor=0.03))
    assert rec["verdict"] == "tie" and rec["rounds"] == 8
    # a noisy comparison near 1 runs to the last look
    p, c = _samples(1.02, 0.3)
    rec = _sequential(p, c, proto)
    assert rec["rounds"] == 20 and rec["verdict"] == "tie"


def test_a_record_that_goes_past_its_stop_or_stops_early_is_found():
    proto = Protocol()
    p, c = _samples(1.5, 0.05)
    rec = _sequential(p, c, proto)
    longer = {**rec, "rounds": 12, "samples": {"parent": [timing.sig(x) for x in p[:12]],
                                                "candidate": [timing.sig(x) for x in c[:12]]}}
    assert any("stops at 8" in m for m in timing.record_problems(longer))
    p, c = _samples(1.02, 0.3)
    short = _sequential(p, c, proto)
    cut = {**short, "rounds": 9, "samples": {k: v[:9] for k, v in short["samples"].items()}}
    assert timing.record_problems(cut)
    with pytest.raises(ValueError):
        timing.record_of(p[:9], c[:9], target="llvm", machine=MACHINE, protocol=proto, runs=1)


def test_the_sequential_rule_keeps_its_error_rate_on_a_a_comparisons():
    """Equal programs (ratio 1, heavy-tailed noise): the rule may look four times, yet at most 5% of
    the comparisons are called faster or slower."""
    proto = Protocol(noise_floor=0.0)
    wrong = 0
    trials = 400
    for seed in range(trials):
        rng = random.Random(seed)
        p = [1.0 + rng.expovariate(20) for _ in range(20)]
        c = [1.0 + rng.expovariate(20) for _ in range(20)]
        wrong += _sequential(p, c, proto)["verdict"] != "tie"
    assert wrong / trials <= 0.05


def test_old_fixed_rounds_records_still_rederive():
    p, c = _samples(1.5, 0.05)
    rec = _record(p, c)
    assert rec["method"] == "interleaved" and timing.record_problems(rec) == []
    row = {"id": "r", "step": {"strategy": "s"}, "verification": {"target": "llvm"}, "timing": rec}
    assert dtiming.dataset_problems([row], {"rounds": 20, "noise_floor": 0.03, "confidence": 0.95}) == ([], 1)
