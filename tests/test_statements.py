"""Statement-level timing (lowering.measure.summodel, .statements, .profile): the sum model's
speedup and interval, the sequential rule deciding on the program's interval, records that
re-derive (and tampered ones that do not), which candidates the Measurer times by their kernels
and which whole, the profile remembered in the evaluation database; one real comparison in a
worker."""
from __future__ import annotations

import random

import pytest

from engine import parse_program
from lowering.measure import EvaluationDatabase, Measurer, Protocol, record_problems, verdict_of
from lowering.measure.stats import decide, sig
from lowering.measure.summodel import holds, profile_figures, record_of, scaler

MACHINE = {"cpu": "test cpu", "gpu": None, "cores": 2, "threads": 2}

SOFTMAX = """input  A f32[4, 64]
output C f32[4, 64]
B^{4}_{tx=0}L^{64}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];
B^{4}_{tx=0}L^{64}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];
B^{4}_{tx=0}L^{64}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];
"""
PARENT = parse_program(SOFTMAX, name="softmax")
# the last statement's loops swapped: one slot changed, same interface
LOCAL = parse_program(SOFTMAX.replace(
    "B^{4}_{tx=0}L^{64}_{a=0}[C^{f32,g}_{tx,a}", "L^{64}_{a=0}B^{4}_{tx=0}[C^{f32,g}_{tx,a}"), name="softmax")
# the max and the sum in one statement: another slot structure
FUSED = parse_program("""input  A f32[4, 64]
output C f32[4, 64]
B^{4}_{tx=0}[L^{64}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];L^{64}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];];
B^{4}_{tx=0}L^{64}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];
""", name="softmax")
ONE = parse_program("input A f32[8, 16]\noutput C f32[8, 16]\nL^{8}_{a=0}L^{16}_{b=0}[C^{f32,g}_{a,b}=A^{f32,g}_{a,b}+1.0;];\n")
ONE_FAST = parse_program("input A f32[8, 16]\noutput C f32[8, 16]\nP^{8}_{a=0}L^{16}_{b=0}[C^{f32,g}_{a,b}=A^{f32,g}_{a,b}+1.0;];\n")


def profile(kernel_ms, whole_ms, rounds=5, noise=0.002, seed=0):
    rng = random.Random(seed)
    return {"times": [[sig(x * (1 + rng.uniform(-noise, noise))) for x in [whole_ms, *kernel_ms]]
                      for _ in range(rounds)], "runs": [10] * (1 + len(kernel_ms))}


def paired(ratio, n, seed=0):
    rng = random.Random(seed)
    p = [sig(1.0 + rng.uniform(0, 0.01)) for _ in range(n)]
    return p, [sig(x / ratio * (1 + rng.uniform(-0.003, 0.003))) for x in p]


# ---------------------------------------------------------------------- the model


def test_the_sum_model_dilutes_a_kernel_speedup_by_its_share():
    scale = scaler([0.9, 0.1], 1)                       # the changed kernel is 10% of the program
    d = scale({"parent_ms": 0.1, "candidate_ms": 0.1 / 1.5, "speedup": 1.5, "ci": [1.4, 1.6]}, 0.02)
    assert d["speedup"] == pytest.approx(1 / (0.9 + 0.1 / 1.5), rel=1e-5)      # 1.0345x
    assert d["ci"][0] == pytest.approx(1 / (0.9 + 0.1 / 1.4), rel=1e-5) and d["verdict"] == "faster"
    assert d["parent_ms"] == 1.0 and d["kernel"]["speedup"] == 1.5
    assert scaler([0.5, 0.5], 0)({"parent_ms": 1, "candidate_ms": 1, "speedup": 1.0, "ci": [1.0, 1.0]},
                                 0.02)["speedup"] == 1.0


def test_a_clear_kernel_speedup_of_a_negligible_statement_is_a_tie_at_the_first_look():
    """The rule decides on the program's interval: a kernel 1.5x faster that is 0.5% of its program
    leaves the program within the noise band, decided tie after 8 rounds; a kernel that is half of
    its program makes it faster."""
    p, c = paired(1.5, 20)
    protocol = Protocol()
    tiny = decide(p, c, protocol, scaler([0.995, 0.005], 1))
    assert tiny["verdict"] == "tie" and tiny["stop"] == 8 and tiny["kernel"]["ci"][0] > 1.3
    half = decide(p, c, protocol, scaler([0.5, 0.5], 1))
    assert half["verdict"] == "faster" and half["stop"] == 8 and half["speedup"] == pytest.approx(1.2, rel=0.01)


def test_a_statements_record_rederives_and_tampering_is_found():
    prof = profile([0.3, 0.2, 0.5], 1.0)
    p, c = paired(0.5, 8)
    rec = record_of(p, c, target="llvm", machine=MACHINE, protocol=Protocol(), runs=10, profile=prof, slot=2,
                    slots=[[0, 1], [1, 2], [2, 3]], tolerance=0.05)
    assert rec["method"] == "statements" and rec["verdict"] == "slower" and record_problems(rec) == []
    assert verdict_of(rec) == "slower" and rec["statements"]["kernel"]["speedup"] == pytest.approx(0.5, rel=0.01)
    assert rec["parent_ms"] == rec["statements"]["sum_ms"] and 0.99 < rec["statements"]["sum_ratio"] < 1.01
    assert any("speedup" in m for m in record_problems({**rec, "speedup": 1.0}))
    st = rec["statements"]
    assert any("kernel_ms" in m for m in record_problems({**rec, "statements": {**st, "kernel_ms": [0.3, 0.2, 0.4]}}))
    other = {**rec, "statements": {**st, "slot": 0}}          # another slot's share gives other figures
    assert record_problems(other)
    off = {**rec, "statements": {**st, "profile": profile([0.3, 0.2, 0.5], 1.3)}}
    assert any("sum model does not hold" in m for m in record_problems(off))


def test_the_profile_holds_within_the_tolerance():
    assert holds(profile_figures(profile([0.3, 0.2, 0.5], 1.02)["times"]), 0.05)
    assert not holds(profile_figures(profile([0.3, 0.2, 0.5], 1.2)["times"]), 0.05)
    assert not holds(profile_figures(profile([0.3, 0.2, 0.5], 0.8)["times"]), 0.05)


# ---------------------------------------------------------------------- the Measurer's choice


class KernelTable:
    """A verifier whose programs and kernels run at speeds from a table (ms by renaming key):
    measure_alone from the table, measure_paired following the sequential rule like the worker."""

    target, arch = "llvm", "sm_90"

    def __init__(self, ms: dict, whole_extra: float = 0.0):
        self.ms, self.whole_extra = ms, whole_extra
        self.alone, self.paired, self.rng = [], [], random.Random(0)

    def _ms(self, p):
        from engine.leir.canonical import renaming_key
        return self.ms[renaming_key(p)]

    def measure_alone(self, programs, rounds, min_ms, best_of, build=None):
        self.alone.append(len(programs))
        row = [sum(self._ms(k) for k in programs[1:]) * (1 + self.whole_extra)] + [self._ms(k) for k in programs[1:]]
        return {"ok": True, "runs": [10] * len(programs), "seconds": 0.0,
                "times": [[sig(x * (1 + self.rng.uniform(0, 0.002))) for x in row] for _ in range(rounds)]}

    def measure_paired(self, programs, protocol, sum_model=None, build=None):
        from lowering.measure.summodel import scaler as make
        self.paired.append(sum_model)
        scale = make(**sum_model) if sum_model else None
        out, rounds = [], 0
        for q in programs[1:]:
            s = {"parent": [], "candidate": []}
            for n in range(1, protocol.rounds + 1):
                base = self._ms(programs[0]) * (1 + self.rng.uniform(0, 0.01))
                s["parent"].append(sig(base))
                s["candidate"].append(sig(base * self._ms(q) / self._ms(programs[0])))
                if n in protocol.looks()[0] and decide(s["parent"], s["candidate"], protocol, scale)["decided"]:
                    break
            rounds = max(rounds, n)
            out.append(s)
        return {"ok": True, "number": 10, "samples": out, "rounds": rounds, "seconds": 0.0}


def table(whole_extra=0.0):
    from engine.leir.canonical import renaming_key
    from engine.leir.slots import split
    ms = {}
    for prog, kernel_ms in ((PARENT, [0.2, 0.3, 0.5]), (LOCAL, [0.2, 0.3, 1.0]), (FUSED, [0.4, 0.5])):
        for s, t in zip(split(prog), kernel_ms):
            ms[s.key] = t
        ms[renaming_key(prog)] = sum(kernel_ms)
    ms[renaming_key(ONE)], ms[renaming_key(ONE_FAST)] = 1.0, 0.5
    return KernelTable(ms, whole_extra)


def test_one_statement_changes_are_timed_by_their_kernels_others_whole(tmp_path):
    v = table()
    db = EvaluationDatabase(tmp_path / "db.jsonl")
    m = Measurer(v, machine=MACHINE, database=db, statements=True)
    local, fused = m.compare(PARENT, [LOCAL, FUSED])
    assert local["method"] == "statements" and local["statements"]["slot"] == 2 and record_problems(local) == []
    assert local["verdict"] == "slower" and local["speedup"] == pytest.approx(1.0 / 1.5, rel=0.02)
    assert fused["method"] == "sequential" and fused["verdict"] == "faster" and record_problems(fused) == []
    assert v.alone == [4] and [s["slot"] if s else None for s in v.paired] == [2, None]
    assert m.stats()["methods"] == {"another structure": 1, "statements": 1}
    (single,) = m.compare(ONE, [ONE_FAST])
    assert single["method"] == "sequential" and m.by_statements.counts["one statement"] == 1
    # the profile is remembered in the database: a later job re-measures no parent
    v2 = table()
    again = Measurer(v2, machine=MACHINE, database=EvaluationDatabase(tmp_path / "db.jsonl"), statements=True)
    assert again.compare(PARENT, [LOCAL]) == [local] and v2.alone == [] and v2.paired == []
    # a job with whole builds does not take the statement-level timings for its own
    v3 = table()
    whole = Measurer(v3, machine=MACHINE, database=EvaluationDatabase(tmp_path / "db.jsonl"))
    assert whole.compare_one(PARENT, LOCAL)["method"] == "sequential" and len(v3.paired) == 1


def test_a_parent_whose_kernels_do_not_sum_to_it_is_timed_whole():
    v = table(whole_extra=0.3)             # the whole parent 30% slower than its kernels' sum
    m = Measurer(v, machine=MACHINE, statements=True)
    (rec,) = m.compare(PARENT, [LOCAL])
    assert rec["method"] == "sequential" and m.by_statements.counts == {"sum model off": 1}


def test_a_real_one_statement_change_is_timed_by_its_kernel_in_a_worker():
    """In a worker: the parent's profile, then the changed kernel paired; the record re-derives."""
    from lowering import Verifier
    # rows of 1024: each kernel takes tens of microseconds, so a call's fixed cost (about a
    # microsecond) does not put the kernels' sum off the whole program's (at 4x64 it did, by 8%)
    big = SOFTMAX.replace("[4, 64]", "[16, 1024]").replace("B^{4}", "B^{16}").replace("L^{64}", "L^{1024}")
    parent = parse_program(big, name="softmax")
    heavy = parse_program(big.replace("/E^{f32,g}_{tx}", "/E^{f32,g}_{tx}/1.0/1.0/1.0/1.0"), name="softmax")
    with Verifier(timeout=120, compose=True) as v:
        m = Measurer(v, Protocol(min_ms=0.2), statements=True)
        m.by_statements.tolerance = 0.15   # this test is about the path, not the machine's sum model
        (rec,) = m.compare(parent, [heavy])
    assert m.by_statements.counts.get("sum model off", 0) == 0, m.by_statements.counts
    assert rec["method"] == "statements" and record_problems(rec) == [] and rec["statements"]["slot"] == 2
    st = rec["statements"]
    assert len(st["kernel_ms"]) == 3 and all(t > 0 for t in st["kernel_ms"]) and st["whole_ms"] > 0
    assert rec["parent_ms"] == st["sum_ms"] and rec["rounds"] >= 8
