"""The search decides on paired verdicts: with a scripted verifier whose programs have set speeds
(and noise), greedy moves only to a significantly faster child, a search whose candidates are all
within the noise floor reports no significant speedup, a real one reports the confirmed speedup
with its interval, and the kernel search composes and confirms every --compose-every samples."""
from __future__ import annotations

import random

import pytest

from engine import parse_program
from lowering.measure.stats import decide, sig

TINY = ("input A f32[8, 16]\noutput C f32[8, 16]\n"
        "L^{8}_{a=0}L^{16}_{b=0}[C^{f32,g}_{a,b}=A^{f32,g}_{a,b}+1.0;];\n")


class SpeedVerifier:
    """Every candidate verifies; a program's time is ``speed(program)`` ms with seeded noise of
    +/- ``noise`` per measurement; paired rounds follow the sequential rule as the worker does."""

    target, arch = "llvm", "sm_90"
    number, repeat, warmup = 1, 3, 1

    def __init__(self, speed, noise=0.01, seed=0):
        self.speed, self.noise, self.rng = speed, noise, random.Random(seed)
        self.paired = 0

    def _t(self, p):
        return self.speed(p) * (1 + self.rng.uniform(-self.noise, self.noise))

    def verify(self, original, candidate, tolerance=None):
        from lowering import Verdict
        return Verdict(True, "equal")

    def measure(self, program, build=None):
        from lowering import Measurement
        t = self.speed(program)
        return Measurement(True, "measured", median_ms=t, spread_ms=0.0, times_ms=[t] * 3)

    def measure_paired(self, programs, protocol, build=None):
        self.paired += 1
        looks = set(protocol.looks()[0])
        out, rounds = [], 0
        for p in programs[1:]:
            s = {"parent": [], "candidate": []}
            for n in range(1, protocol.rounds + 1):
                s["parent"].append(sig(self._t(programs[0])))
                s["candidate"].append(sig(self._t(p)))
                if n in looks and decide(s["parent"], s["candidate"], protocol)["decided"]:
                    break
            rounds = max(rounds, n)
            out.append(s)
        return {"ok": True, "number": 1, "samples": out, "rounds": rounds, "seconds": 0.0}


def options(**kw):
    from search import SearchOptions
    base = dict(algorithm="greedy", budget=6, confirm=3, trials=1, composites="off")
    base.update(kw)
    return SearchOptions(**base)


def test_candidates_within_the_noise_floor_give_no_significant_speedup(engine):
    """Every candidate runs as fast as the original (1% noise): whatever one median says, the
    search moves nowhere and reports the original, with the closest candidate and its interval."""
    from search.run import run_search
    prog = parse_program(TINY, name="tiny")
    v = SpeedVerifier(lambda p: 1.0)
    rec = run_search(prog, options(policy="random", seed=1), engine=engine, verifier=v,
                     progress=lambda m: None).record
    best = rec["best"]
    assert best["significant"] is False and best["node"] == 0 and best["steps"] == [] and best["speedup"] == 1.0
    assert best["best_candidate"]["verdict"] == "tie" and best["best_candidate"]["ci"][0] < 1.02
    assert all(n["verdict"] == "tie" for n in rec["nodes"][1:])
    assert all(sp == 1.0 for _, sp in rec["summary"]["curve"])            # nothing counts as best so far
    from search.run import closing
    assert closing(best).startswith("no significant speedup (within 1 +/- 0.02 of the original)")


def test_greedy_moves_only_to_a_significantly_faster_child_and_confirms_it(engine):
    """Programs with a parallel loop run 2x faster; others 0.5% apart at most: greedy moves to a
    parallel child only, and the confirmation against the original reports it with its interval."""
    from search.run import run_search
    prog = parse_program(TINY, name="tiny")

    def speed(p):
        text = p.to_leir()
        return (0.5 if "P^" in text else 1.0) * (1 + 0.005 * (hash(text) % 2))
    v = SpeedVerifier(speed, noise=0.005)
    rec = run_search(prog, options(policy="random-all", budget=10, seed=0, strategies="loop_parallelization,loop_split"),
                     engine=engine, verifier=v, progress=lambda m: None).record
    nodes = rec["nodes"]
    faster = [n for n in nodes[1:] if n["verdict"] == "faster"]
    assert faster and all("P^" in n["leir"] for n in faster)
    assert all(n["verdict"] != "faster" for n in nodes[1:] if "P^" not in n["leir"] and nodes[n["parent"]]["id"] == 0)
    best = rec["best"]
    assert best["significant"] and "P^" in best["leir"] and 1.9 < best["speedup"] < 2.1
    assert best["ci"][0] > 1.02 and best["confirmed"]["verdict"] == "faster"
    # greedy expands only the nodes it moved to: every expanded node but the root is significantly
    # faster than its parent
    expanded = [n for n in nodes[1:] if n["children"]]
    assert expanded and all(n["verdict"] == "faster" for n in expanded)


def test_the_kernel_search_composes_and_confirms_every_k_samples(engine):
    from search.run import run_search
    from tests_kernels_table import SMALL_SOFTMAX, TableVerifier   # noqa: F401 (the shared table verifier)
    prog = parse_program(SMALL_SOFTMAX, name="softmax_small")
    rec = run_search(prog, options(algorithm="kernels", budget=26, compose_every=8, confirm=0, kernel_nodes=300),
                     engine=engine, verifier=TableVerifier(prog), progress=lambda m: None).record
    comps = rec["summary"]["kernels"]["compositions"]
    assert len(comps) >= 2 and comps[0]["at_sample"] == 7          # the 8th sample: a multiple of compose_every
    assert all((c["at_sample"] + 1) % 8 == 0 or c is comps[-1] for c in comps)
    assert [s["kind"] for s in rec["samples"]].count("composed") >= 1
    assert rec["summary"]["samples"] <= 26
    assert rec["summary"]["kernels"]["compose_every"] == 8


@pytest.fixture(autouse=True, scope="module")
def _table_module():
    """test_kernels' table verifier and program, importable here."""
    import importlib.util
    import sys
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("tests_kernels_table", Path(__file__).parent / "test_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules["tests_kernels_table"] = mod
    yield
    sys.modules.pop("tests_kernels_table", None)
