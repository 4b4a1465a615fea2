"""Batched builds (lowering/batch_build.py, Verifier.verify_many): programs compiled together run bit
for bit as single builds, and a program TVM refuses is isolated without losing its batch."""
import numpy as np
import pytest

from conftest import EXAMPLES


@pytest.fixture
def no_disk_cache(tvm):
    """Builds in memory only, none kept from earlier tests; the environment's cache afterwards."""
    from lowering import build_cache
    from lowering.run import clear_build_cache
    build_cache.configure(False)
    clear_build_cache()
    yield
    build_cache.reset()
    clear_build_cache()


def _state(engine, name: str, n: int) -> list:
    from engine import load_program
    p = load_program(EXAMPLES / f"{name}.leir")
    return [p] + [s.program for s in sorted(engine.enumerate(p), key=lambda s: s.key)[:n]]


def _run(built, program) -> dict:
    from lowering.inputs import random_inputs
    from lowering.run import run_built
    return run_built(built, program, random_inputs(program, 0, 0))


def _singles(programs) -> list[dict]:
    from lowering.run import build, clear_build_cache
    clear_build_cache()
    out = [_run(build(p), p) for p in programs]
    clear_build_cache()
    return out


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


@pytest.fixture
def refused(monkeypatch, tvm):
    """``refuse(program)``: TVM's compile then fails on any module holding that program (vectorised
    or serial); ``calls`` counts the compiles."""
    import tvm_ffi

    import lowering.run as run
    from lowering.tir import from_tvmscript, lower_module
    real = run.compile_tir
    victims, calls = [], []

    def compile_tir(f, target, arch="sm_90", build="exact"):
        calls.append(f)
        funcs = list(f.functions.values()) if isinstance(f, tvm.IRModule) else [f]
        for g in funcs:
            g = g.with_attr("global_symbol", "main")
            if any(tvm_ffi.structural_equal(g, v) for v in victims):
                raise RuntimeError("InternalError: refused by the test")
        return real(f, target, arch, build)

    def refuse(program):
        for vec in (True, False):
            victims.append(from_tvmscript(lower_module(program, "llvm", vectorize=vec).text))
    monkeypatch.setattr(run, "compile_tir", compile_tir)
    return refuse, calls


def test_batched_builds_run_bit_for_bit_as_single_builds(no_disk_cache, engine):
    from lowering.batch_build import build_many
    progs = _state(engine, "softmax", 5) + _state(engine, "matmul", 3)
    want = _singles(progs)
    got = build_many(progs, "llvm", batch_size=4)
    assert [b.symbol for b in got] == ["main_0", "main_1", "main_2", "main_3"] * 2 + ["main_0", "main_1"]
    assert got[0].executable is got[3].executable and got[0].executable is not got[4].executable
    for b, p, w in zip(got, progs, want):
        _same(w, _run(b, p))


def test_a_refused_program_is_isolated_and_the_rest_kept_batched(no_disk_cache, engine, refused):
    from lowering.batch_build import build_many
    from lowering.errors import LoweringError
    from lowering.run import build
    refuse, calls = refused
    progs = _state(engine, "softmax", 7)
    want = _singles(progs)
    refuse(progs[3])
    calls.clear()
    got = build_many(progs, "llvm", batch_size=8)
    assert isinstance(got[3], LoweringError) and "refused by the test" in got[3].message
    assert got[3].stage == "build"
    for i, (b, p, w) in enumerate(zip(got, progs, want)):
        if i != 3:
            _same(w, _run(b, p))
    # halved around the refused program: 8 (refused), 0-3 (refused), 4-7, 2-3 (refused), 0-1, 2 alone, 3
    # alone (refused) and its serial form (refused, when it has a vectorised one)
    assert len(calls) <= 8
    assert len({id(b.executable) for b in got if not isinstance(b, LoweringError)}) == 3
    n = len(calls)
    with pytest.raises(LoweringError, match="refused by the test"):
        build(progs[3])                          # remembered: not compiled again
    assert len(calls) == n


def test_verify_many_gives_the_verdicts_of_verify_and_isolates_a_refusal(no_disk_cache, engine, refused):
    from engine import load_program
    from lowering import Verifier, tolerance_for
    refuse, _ = refused
    prog = load_program(EXAMPLES / "softmax.leir")
    steps = sorted(engine.enumerate(prog), key=lambda s: s.key)[:6]
    tols = [tolerance_for(s.exactness) for s in steps]
    with Verifier("llvm", trials=2, isolate=False, build_cache=False) as v:
        want = [v.verify(prog, s.program, t) for s, t in zip(steps, tols)]
    refuse(steps[2].program)
    from lowering.run import clear_build_cache
    clear_build_cache()
    with Verifier("llvm", trials=2, isolate=False, build_cache=False, batch_size=4) as v:
        got = v.verify_many(prog, [s.program for s in steps], tols)
    assert got[2].reason == "build failed" and "refused by the test" in got[2].message
    for i, (a, b) in enumerate(zip(want, got)):
        if i != 2:
            assert (b.reason, b.max_abs_err, b.trials) == (a.reason, a.max_abs_err, a.trials)
    assert v.batches == {"requests": 2, "built": 7, "failed": 1}     # 4 + the original, 2 + the original


def test_verify_many_in_workers_fills_the_cache_folder_it_is_given(tmp_path, engine, no_disk_cache):
    from engine import load_program
    from lowering import Verifier, tolerance_for
    from lowering.verify import verify
    prog = load_program(EXAMPLES / "softmax.leir")
    steps = sorted(engine.enumerate(prog), key=lambda s: s.key)[:5]
    tols = [tolerance_for(s.exactness) for s in steps]
    with Verifier("llvm", trials=2, timeout=300, build_cache=tmp_path, batch_size=4) as v:
        got = v.verify_many(prog, [s.program for s in steps], tols)
    for s, t, g in zip(steps, tols, got):
        r = verify(prog, s.program, trials=2, tolerance=t)
        assert (g.equal, g.max_abs_err) == (r.equal, r.max_abs_err)
    assert v.batches["requests"] == 1 and "given up" not in v.batches     # the fifth, alone, is not batched
    entries, libraries = list(tmp_path.glob("*.json")), list(tmp_path.glob("*.so"))
    assert len(entries) == 6 and len(libraries) == 2          # a batch: 4 and the original; the fifth alone
    assert Verifier("llvm", build_cache=False).build_cache[0] == "off"     # what its workers are told
