"""The two named builds (lowering.builds): exact proves a step, fast is what gets timed. The table and
its targets (fast keeps FMA, exact leaves it out), the fast build of a real program agreeing with
the exact one within the strict tolerance (and not bit for bit, where the CPU fuses), a fast build
that disagrees failing the verdict and the timing instead of crashing, timing records and cache
keys naming the build, and ``--build`` on the command lines."""
from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from engine import parse_program
from engine.leir.diagnostics import LeirError
from engine.leir.files import load_program
from lowering.builds import BUILD_NAMES, BUILDS, DEFAULT_TIMED, SEARCH_TIMED, build_named, llvm_mattr
from lowering.measure import Measurer, Protocol
from lowering.measure.cache import timing_key

from conftest import EXAMPLES, ROOT

MACHINE = {"cpu": "test cpu", "gpu": None, "cores": 2, "threads": 2}
SMALL = parse_program("input A f32[8, 16]\ninput W f32[8, 16]\noutput C f32[8, 16]\n"
                      "L^{8}_{a=0}L^{16}_{b=0}[C^{f32,g}_{a,b}=A^{f32,g}_{a,b}*W^{f32,g}_{a,b}+1.0;];\n", name="small")


def host_has_fma(tvm) -> bool:
    from lowering.run import llvm_cpu
    cpu = llvm_cpu()
    return cpu != "generic" and "fma" in tvm.target.codegen.llvm_get_cpu_features(
        tvm.target.Target({"kind": "llvm", "mcpu": cpu}))


def test_the_table_names_two_builds_and_refuses_others():
    assert BUILD_NAMES == ("exact", "fast") and DEFAULT_TIMED == "exact" and SEARCH_TIMED == "fast"
    assert "-fma" in BUILDS["exact"].mattr and not BUILDS["fast"].mattr
    with pytest.raises(LeirError, match="unknown build 'fastest' \\(expected exact or fast\\)"):
        build_named("fastest")
    # the full vector width wherever AVX-512 is left
    assert llvm_mattr("fast", {"avx512f", "fma"}) == ["-prefer-256-bit"]
    assert llvm_mattr("fast", {"avx2", "fma"}) == []
    assert llvm_mattr("exact", {"avx2"}) == ["-fma", "-fma4"]


def test_fast_target_keeps_fma_exact_leaves_it_out(tvm):
    from lowering.run import tvm_target
    exact, fast = tvm_target("llvm", "exact"), tvm_target("llvm", "fast")
    assert "-fma" in str(exact) and "-fma" not in str(fast)
    if not host_has_fma(tvm):
        pytest.skip("this CPU has no fused multiply-add")
    features = tvm.target.codegen.llvm_get_cpu_features
    assert "fma" in features(fast) and "fma" not in features(exact)
    assert str(tvm_target("cuda", "fast")) == str(tvm_target("cuda", "exact"))     # cuda: one build


def test_fast_build_of_matmul_agrees_with_exact_within_tolerance(tvm):
    from lowering.inputs import random_inputs
    from lowering.verify import compare_builds, verify
    prog = load_program(str(EXAMPLES / "matmul.leir"))
    check = compare_builds(prog, [random_inputs(prog, 0, 0)], "llvm", "sm_90")
    assert check.equal and check.message is None
    if host_has_fma(tvm):       # the builds differ for real: fused rounding, within the strict bound
        assert check.max_abs_err > 0
    r = verify(prog, prog, trials=1, timed_build="fast")
    assert r.ok and r.equal and r.fast["equal"]


@pytest.fixture
def wrong_fast_build(monkeypatch):
    """A fast build whose outputs are off by one (what a miscompiled fast build would give)."""
    from lowering import fastcheck, run
    real = run.run_built

    def run_built(built, program, inputs, device=None):
        out = real(built, program, inputs, device)
        return {k: v + 1 for k, v in out.items()} if built.build == "fast" else out
    monkeypatch.setattr(run, "run_built", run_built)
    monkeypatch.setattr(fastcheck, "_CHECKED", {})


def test_a_fast_build_that_disagrees_fails_the_verdict_and_the_timing(wrong_fast_build):
    from lowering import Verifier
    v = Verifier("llvm", trials=1, isolate=False, timed_build="fast")
    verdict = v.verify(SMALL, SMALL)
    assert not verdict.equal and verdict.reason == "fast build differs"
    assert "differs from its exact build beyond the strict tolerance" in verdict.message
    assert verdict.fast["equal"] is False
    m = v.measure(SMALL)
    assert not m.ok and m.reason == "fast build differs" and m.build == "fast"
    # the exact build is verified and timed as before
    exact = Verifier("llvm", trials=1, isolate=False)
    assert exact.verify(SMALL, SMALL).equal and exact.measure(SMALL).ok


def test_timing_cache_keys_differ_between_builds(monkeypatch):
    from lowering.measure.cache import BUILD_VERSION
    from lowering.run import MCPU_ENV
    monkeypatch.delenv(MCPU_ENV, raising=False)
    verifier = SimpleNamespace(target="llvm", arch="sm_90", timed_build="exact")
    exact = Measurer(verifier, machine=MACHINE)
    fast = Measurer(verifier, machine=MACHINE, build="fast")
    assert exact.build == "exact" and fast.build == "fast"
    assert exact.key("p", "c") != fast.key("p", "c")
    assert fast.build_options() == {"version": BUILD_VERSION, "arch": None, "build": "fast"}
    # an exact timing keeps the key it had before builds were named (every earlier timing was exact)
    before = {"version": BUILD_VERSION, "arch": None}
    assert exact.key("p", "c") == timing_key("p", "c", "llvm", MACHINE, before, exact.protocol.to_json())
    # the verifier's timed build is the default; another one is asked for by name
    assert exact.build_argument() == {} and fast.build_argument() == {"build": "fast"}
    assert Measurer(SimpleNamespace(target="llvm", arch="sm_90", timed_build="fast"), machine=MACHINE).build == "fast"
    with pytest.raises(LeirError, match="unknown timed build"):
        Measurer(verifier, build="turbo")


def test_a_fast_timing_record_names_its_build(tvm):
    from engine import renaming_key
    from lowering import Verifier
    from lowering.measure import machine_key, record_problems
    from lowering.measure.stats import min_rounds
    other = SMALL.with_body(SMALL.body)
    protocol = Protocol(rounds=min_rounds(0.95), look_every=0, min_ms=0.05, best_of=1)
    with Verifier("llvm", trials=1, timed_build="fast", timeout=120) as v:
        m = Measurer(v, protocol, machine=MACHINE)
        rec = m.compare_one(SMALL, other)
    assert rec is not None and rec["build"] == "fast" and record_problems(rec) == []
    assert machine_key(rec).endswith(", fast build")
    assert m.cache.get(m.key(renaming_key(SMALL), renaming_key(other))) is rec


def test_a_dataset_flags_a_timing_of_another_build():
    from dataset.timing import dataset_problems
    from lowering.measure.stats import record_of
    rec = record_of([2.0, 2.1, 1.9, 2.0, 2.05, 2.02], [1.0, 1.05, 0.95, 1.0, 1.02, 1.01], target="llvm",
                    machine=MACHINE, protocol=Protocol(rounds=6, look_every=0), runs=1, build="fast")
    row = {"id": "r", "step": {"strategy": "s"}, "timing": rec, "verification": {"target": "llvm"}}
    job = {"rounds": 6, "noise_floor": Protocol.noise_floor, "confidence": Protocol.confidence, "look_every": 0}
    problems, ok = dataset_problems([row], job)
    assert ok == 0 and any("timing build is fast, the job's --build is exact" in p for _, p in problems)
    assert dataset_problems([row], {**job, "build": "fast"}) == ([], 1)


def test_search_options_and_command_lines_refuse_a_bad_build(tmp_path):
    from search.options import SearchOptions
    assert SearchOptions().build == "fast" and SearchOptions(build="exact").validate().build == "exact"
    with pytest.raises(LeirError, match="--build: unknown build 'quick'"):
        SearchOptions(build="quick").validate()
    assert SearchOptions.from_json({"algorithm": "greedy"}).build == "exact"     # an older trajectory
    prog = str(EXAMPLES / "matmul.leir")
    for argv, says in ((["search", prog, "-o", str(tmp_path / "t.json"), "--build", "quick"],
                        "argument --build: invalid choice: 'quick'"),
                       (["dataset.generate", prog, "-o", str(tmp_path / "d"), "--build", "fast"],
                        "--build sets how --time measures: use it with --time")):
        p = subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_the_fast_build_computes_the_program():
    """``run_program`` in the fast build gives what the program says (within rounding)."""
    from lowering.inputs import random_inputs
    from lowering.run import run_program
    ins = random_inputs(SMALL, 0, 0)
    out = run_program(SMALL, ins, build_name="fast")["C"]
    assert np.allclose(out, ins["A"] * ins["W"] + 1.0, rtol=1e-5, atol=1e-6)


def test_a_search_resumes_only_in_the_build_it_timed(tmp_path):
    """A trajectory timed in the exact build (as every one written before builds were named) is not
    continued in the fast one: --resume names the option that differs."""
    out = tmp_path / "t.json"
    run = [sys.executable, "-m", "search", str(EXAMPLES / "softmax.leir"), "-o", str(out), "--budget", "1",
           "--algorithm", "greedy", "--policy", "random"]
    p = subprocess.run([*run, "--build", "exact"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([*run, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "--resume: the trajectory was written with other options (" in p.stderr
    assert "build: 'exact' there, 'fast' here" in p.stderr
