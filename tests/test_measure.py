"""The measurement service (lowering.measure): the Measurer's cache, de-duplication, chunking and
failure handling over a scripted verifier; the evaluation database's append-only file; one real
paired comparison in a worker (the sequential rule stops a clear difference early)."""
from __future__ import annotations

import json
import random


from engine import parse_program
from lowering.measure import EvaluationDatabase, Measurer, Protocol, TimingCache, record_problems
from lowering.measure.service import CHUNK

MACHINE = {"cpu": "test cpu", "gpu": None, "cores": 2, "threads": 2}


def prog(body: str, name: str = "p"):
    return parse_program(f"input A f32[8, 16]\noutput C f32[8, 16]\n{body}\n", name=name)


PARENT = prog("L^{8}_{a=0}L^{16}_{b=0}[C^{f32,g}_{a,b}=A^{f32,g}_{a,b}+1.0;];")
FAST = prog("P^{8}_{a=0}L^{16}_{b=0}[C^{f32,g}_{a,b}=A^{f32,g}_{a,b}+1.0;];")
SLOW = prog("L^{16}_{b=0}L^{8}_{a=0}[C^{f32,g}_{a,b}=A^{f32,g}_{a,b}+1.0;];")
RENAMED = prog("P^{8}_{x=0}L^{16}_{y=0}[C^{f32,g}_{x,y}=A^{f32,g}_{x,y}+1.0;];")


class ScriptedVerifier:
    """measure_paired answers from a table of true speeds (ratio parent/candidate by LEIR), with seeded
    noise, following the sequential rule as the worker does; ``fail``: LEIR texts that do not build."""

    target, arch = "llvm", "sm_90"

    def __init__(self, speeds: dict, fail=()):
        self.speeds, self.fail, self.calls = speeds, set(fail), []
        self.rng = random.Random(0)

    def measure_paired(self, programs, protocol, build=None):
        from lowering.measure.stats import decide, sig
        self.calls.append([p.to_leir() for p in programs])
        for i, p in enumerate(programs):
            if p.to_leir() in self.fail:
                return {"ok": False, "reason": "build failed", "failed": i, "message": "no", "samples": []}
        out, rounds = [], 0
        for p in programs[1:]:
            s = {"parent": [], "candidate": []}
            for n in range(1, protocol.rounds + 1):
                base = 1.0 + self.rng.uniform(0, 0.01)
                s["parent"].append(sig(base))
                s["candidate"].append(sig(base / self.speeds[p.to_leir()] * (1 + self.rng.uniform(-0.005, 0.005))))
                if decide(s["parent"], s["candidate"], protocol)["decided"] and \
                        n in protocol.looks()[0]:
                    break
            rounds = max(rounds, n)
            out.append(s)
        return {"ok": True, "number": 10, "samples": out, "rounds": rounds, "seconds": 0.01}


def test_compare_gives_verdicts_dedupes_renamings_and_caches():
    v = ScriptedVerifier({FAST.to_leir(): 1.5, SLOW.to_leir(): 0.6, RENAMED.to_leir(): 1.5})
    m = Measurer(v, machine=MACHINE)
    recs = m.compare(PARENT, [FAST, SLOW, RENAMED])
    assert [r["verdict"] for r in recs] == ["faster", "slower", "faster"]
    assert recs[2] is recs[0]                                 # one program modulo renaming: timed once
    assert len(v.calls) == 1 and len(v.calls[0]) == 3
    assert all(r["rounds"] == 8 and record_problems(r) == [] and r["machine"] == MACHINE for r in recs)
    again = m.compare(PARENT, [SLOW, FAST])
    assert again == [recs[1], recs[0]] and len(v.calls) == 1       # the cache: nothing timed again
    assert m.stats()["measured"] == 2 and m.stats()["cached"] == 2


def test_a_candidate_that_does_not_build_is_dropped_and_the_rest_timed():
    v = ScriptedVerifier({FAST.to_leir(): 1.5, SLOW.to_leir(): 0.6}, fail={SLOW.to_leir()})
    recs = Measurer(v, machine=MACHINE).compare(PARENT, [SLOW, FAST])
    assert recs[0] is None and recs[1]["verdict"] == "faster" and len(v.calls) == 2
    v = ScriptedVerifier({FAST.to_leir(): 1.5}, fail={PARENT.to_leir()})
    assert Measurer(v, machine=MACHINE).compare(PARENT, [FAST]) == [None]


def test_candidates_are_timed_in_chunks():
    cands = [prog(f"L^{{8}}_{{a=0}}L^{{16}}_{{b=0}}[C^{{f32,g}}_{{a,b}}=A^{{f32,g}}_{{a,b}}+{i}.0-{i}.0+1.0;];")
             for i in range(CHUNK + 3)]
    v = ScriptedVerifier({c.to_leir(): 1.0 + 0.1 * i for i, c in enumerate(cands)})
    recs = Measurer(v, machine=MACHINE).compare(PARENT, cands)
    assert all(r is not None for r in recs) and [len(c) - 1 for c in v.calls] == [CHUNK, 3]


def test_the_cache_persists_in_the_evaluation_database_and_is_keyed_by_machine_and_protocol(tmp_path):
    db_path = tmp_path / "db.jsonl"
    v = ScriptedVerifier({FAST.to_leir(): 1.5})
    rec = Measurer(v, machine=MACHINE, database=EvaluationDatabase(db_path)).compare_one(PARENT, FAST)
    lines = [json.loads(x) for x in db_path.read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["kind"] == "timing" and lines[0]["record"] == rec
    v2 = ScriptedVerifier({FAST.to_leir(): 1.5})
    again = Measurer(v2, machine=MACHINE, database=EvaluationDatabase(db_path)).compare_one(PARENT, FAST)
    assert again == rec and v2.calls == []                   # a repeated job re-times nothing
    other = Measurer(v2, machine={**MACHINE, "cpu": "another"}, database=EvaluationDatabase(db_path))
    other.compare_one(PARENT, FAST)
    Measurer(v2, Protocol(rounds=12), machine=MACHINE, database=EvaluationDatabase(db_path)).compare_one(PARENT, FAST)
    assert len(v2.calls) == 2                                # another machine, another protocol: timed


def test_an_llvm_cpu_chosen_by_the_environment_is_part_of_the_timing_key(monkeypatch):
    from lowering.run import MCPU_ENV
    m = Measurer(ScriptedVerifier({}), machine=MACHINE)
    monkeypatch.delenv(MCPU_ENV, raising=False)
    host = m.key("p", "c")
    monkeypatch.setenv(MCPU_ENV, "x86-64-v2")
    assert m.key("p", "c") != host and m.build_options()["mcpu"] == "x86-64-v2"


def test_the_database_skips_a_torn_last_line_and_cuts_it_before_appending(tmp_path):
    p = tmp_path / "db.jsonl"
    p.write_text('{"kind": "timing", "key": "a", "record": {"x": 1}}\n{"kind": "tim')
    db = EvaluationDatabase(p)
    assert db.torn == 1 and len(db.records) == 1
    db.append({"kind": "original", "n": 2})
    assert [json.loads(x)["kind"] for x in p.read_text().splitlines()] == ["timing", "original"]
    assert len(TimingCache(EvaluationDatabase(p))) == 1


def test_a_real_paired_comparison_stops_early_when_the_difference_is_clear():
    """In a worker: a program that does 64 times the work of its parent is decided slower at the
    first look (8 rounds), and its samples re-derive."""
    from lowering import Verifier
    heavy = prog("L^{8}_{a=0}L^{16}_{b=0}L^{64}_{k=0}[C^{f32,g}_{a,b}=C^{f32,g}_{a,b}+A^{f32,g}_{a,b};];")
    with Verifier(timeout=120) as v:
        rec = Measurer(v, Protocol(min_ms=0.2)).compare_one(PARENT, heavy)
    assert rec["verdict"] == "slower" and rec["rounds"] == 8 and record_problems(rec) == []
    assert rec["runs_per_sample"] >= 1 and rec["candidate_ms"] > rec["parent_ms"]
