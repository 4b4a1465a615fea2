"""Numerical verification: tolerance rules, Equal / Not equal verdicts, CLI exit codes and JSON."""
import json

import numpy as np
import pytest

from engine.leir.diagnostics import LeirError
from engine.leir.files import program_from_json
from lowering.verify import K_STRICT, compare, reduction_length, verify


def P(leir, inputs, outputs, name="t"):
    decl = lambda d: [{"name": n, "dtype": t, "shape": list(s)} for n, (t, s) in d.items()]  # noqa: E731
    return program_from_json({"name": name, "inputs": decl(inputs), "outputs": decl(outputs), "leir": leir})


IO = ({"A": ("f32", (4, 64))}, {"C": ("f32", (4, 64))})
SOFTMAX = ("B^{4}_{tx=0}L^{64}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
           "B^{4}_{tx=0}L^{64}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];"
           "B^{4}_{tx=0}L^{64}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];")
# loop variable a -> k and intermediates D -> Q, E -> R
RENAMED = SOFTMAX.replace("_{a=0}", "_{k=0}").replace(",a}", ",k}").replace("D^", "Q^").replace("E^", "R^")
CONST = SOFTMAX.replace("exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E", "exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx}*1.0001)/E")
INDEX = SOFTMAX.replace("[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}", "[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,63-a}")


@pytest.fixture(scope="module")
def programs():
    return {k: P(v, *IO, name="softmax") for k, v in
            {"orig": SOFTMAX, "renamed": RENAMED, "const": CONST, "index": INDEX}.items()}


# --------------------------------------------------------------------------- compare


def test_compare_integers_and_bools_are_exact():
    a = np.arange(10, dtype=np.int64)
    assert compare(a, a.copy(), "i64").equal
    b = a.copy()
    b[3] += 1
    c = compare(b, a, "i64")
    assert not c.equal and c.mismatches == 1 and c.max_abs_err == 1.0
    assert not compare(np.array([True, False]), np.array([True, True]), "bool").equal


def test_compare_float_bound_scales_with_eps_and_reduction_length():
    eps = float(np.finfo(np.float32).eps)
    c = compare(np.ones(4, np.float32), np.ones(4, np.float32), "f32", reduction_length=64)
    assert c.equal and c.rtol == pytest.approx(K_STRICT * eps * 8) and c.atol == pytest.approx(c.rtol)
    e = np.full(4, 100.0, np.float32)
    close = e * (1 + 4 * eps)
    far = e * (1 + 1e-4)
    assert compare(close, e, "f32").equal
    assert not compare(far, e, "f32").equal
    assert compare(far, e, "f32", reduction_length=10 ** 6).equal  # 16*eps*1000 ~ 1.9e-3
    # float16 has a much larger epsilon
    assert compare(far.astype(np.float16), e.astype(np.float16), "f16").equal


def test_compare_requires_both_terms_not_either():
    # near-zero expected value: relative error is huge but the atol term covers it
    e = np.array([1.0, 1e-12], np.float32)
    a = np.array([1.0, 2e-12], np.float32)
    c = compare(a, e, "f32")
    assert c.equal and c.max_rel_err > 0.5
    # large absolute error on a large value: atol alone would pass (scale 1e6), rtol term bounds it
    e = np.array([1e6, 1.0], np.float32)
    a = np.array([1e6 * (1 + 1e-3), 1.0], np.float32)
    assert not compare(a, e, "f32").equal


def test_compare_nan_and_inf_positions_must_match():
    e = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    assert compare(e.copy(), e, "f32").equal
    for bad in ([1.0, 1.0, np.inf, -np.inf], [1.0, np.nan, -np.inf, -np.inf], [np.nan, np.nan, np.inf, -np.inf]):
        c = compare(np.array(bad, np.float32), e, "f32")
        assert not c.equal and not c.nonfinite_match and c.mismatches >= 1


def test_reference_mode_reproduces_the_loose_rule():
    e = np.full(8, 10.0, np.float32)
    a = e * np.float32(1 + 2e-4)
    assert not compare(a, e, "f32").equal
    r = compare(a, e, "f32", mode="reference")
    assert r.equal and r.mode == "reference" and r.mse is not None
    # f32 "atol < 1e-3" clause alone makes this pass although rtol is 1e-2
    assert compare(np.array([1e-2, 0], np.float32) + np.array([1e-4, 0], np.float32),
                   np.array([1e-2, 0], np.float32), "f32", mode="reference").equal
    # f16 clause: atol < 1.5 is enough
    assert compare(np.array([3.0], np.float16), np.array([2.0], np.float16), "f16", mode="reference").equal
    assert not compare(np.array([3.0], np.float16), np.array([2.0], np.float16), "f16").equal


def test_exact_mode_allows_no_rounding_difference():
    eps = float(np.finfo(np.float32).eps)
    e = np.array([1.0, -0.0, np.nan, np.inf, 3.5], np.float32)
    a = np.array([1.0, 0.0, np.nan, np.inf, 3.5], np.float32)
    c = compare(a, e, "f32", mode="exact")
    assert c.equal and c.mode == "exact" and c.atol == 0.0 and c.rtol == 0.0
    one_ulp = e.copy()
    one_ulp[0] = np.float32(1 + eps)
    assert compare(one_ulp, e, "f32").equal                       # strict tolerates it
    c = compare(one_ulp, e, "f32", mode="exact")
    assert not c.equal and c.mismatches == 1 and c.max_abs_err == pytest.approx(eps)
    assert not compare(np.array([np.nan], np.float32), np.array([1.0], np.float32), "f32", mode="exact").equal
    assert not compare(np.array([2, 3]), np.array([2, 4]), "i32", mode="exact").equal


# --------------------------------------------------------------------------- verify


def test_reduction_length(programs):
    assert reduction_length(programs["orig"]) == 64


def test_verify_equal_for_renamed_copy(tvm, programs):
    r = verify(programs["orig"], programs["renamed"])
    assert r.diff is True and r.build and r.exec and r.equal is True and r.ok
    assert len(r.trials) == 3 and all(t["equal"] for t in r.trials)
    assert r.max_abs_err == 0.0 and r.tolerance["mode"] == "strict" and r.tolerance["reduction_length"] == 64
    json.dumps(r.to_dict(), allow_nan=False)


@pytest.mark.parametrize("which", ["const", "index"])
def test_verify_not_equal_with_error_figures(tvm, programs, which):
    r = verify(programs["orig"], programs[which])
    assert r.build and r.exec and r.equal is False and not r.ok
    assert r.max_abs_err > 0 and r.max_rel_err > 0
    out = r.trials[0]["outputs"]["C"]
    assert out["mismatches"] > 0 and out["atol"] > 0 and out["rtol"] > 0


def test_verify_const_change_passes_reference_tolerance(tvm, programs):
    # the reference's loose rule accepts a 1e-4 relative perturbation that the strict rule rejects
    assert verify(programs["orig"], programs["const"], tolerance="reference").equal is True


def test_verify_exact_tolerance(tvm, programs):
    r = verify(programs["orig"], programs["renamed"], trials=2, tolerance="exact")
    assert r.ok and r.equal and r.max_abs_err == 0.0 and r.tolerance["mode"] == "exact"
    assert "no tolerance" in r.tolerance["formula"] and r.tolerance["k"] is None
    r = verify(programs["orig"], programs["const"], trials=1, tolerance="exact")
    assert r.equal is False and r.max_abs_err > 0


def test_verify_trials_use_fresh_inputs(tvm, programs):
    r = verify(programs["orig"], programs["const"], trials=2, seed=7)
    errs = [t["outputs"]["C"]["max_abs_err"] for t in r.trials]
    assert [t["seed"] for t in r.trials] == [[7, 0], [7, 1]] and errs[0] != errs[1]


def test_verify_without_candidate_and_timing(tvm, programs):
    r = verify(programs["orig"], time=True, trials=1)
    assert r.diff is None and r.equal is None and r.build and r.exec and r.ok
    assert 0 < r.time_ms_min <= r.time_ms_median and len(r.times_ms) == 5
    r2 = verify(programs["orig"], programs["renamed"], time=True, trials=1)
    assert r2.candidate_time_ms_min > 0 and r2.speedup_median > 0


def test_verify_rejects_a_candidate_with_other_known_tensors(programs):
    other = P(SOFTMAX.replace("A^", "Z^"), {"Z": ("f32", (4, 64))}, IO[1])
    with pytest.raises(LeirError, match="same known tensors"):
        verify(programs["orig"], other)


def test_verify_reports_a_candidate_build_failure(tvm, programs):
    # a local buffer shared by two statements cannot be placed on cuda: the build step fails
    cand = P(SOFTMAX.replace("D^{f32,g}", "D^{f32,l}"), *IO, name="softmax")
    r = verify(programs["orig"], cand, target="cuda")
    assert r.build is False and r.exec is None and r.equal is None and not r.ok
    assert r.error["stage"] == "build" and "local buffer 'D'" in r.error["message"]


# --------------------------------------------------------------------------- CLI


@pytest.fixture()
def files(tmp_path, programs):
    out = {}
    for k, p in programs.items():
        f = tmp_path / f"{k}.leir"
        f.write_text(p.to_leir_file())
        out[k] = str(f)
    bad = tmp_path / "bad.leir"
    bad.write_text(programs["orig"].to_leir_file().replace("max(", "maxx("))
    out["bad"] = str(bad)
    return out


def test_cli_equal_exit_0_ladder(tvm, files, capsys):
    from lowering.verify import main
    assert main([files["orig"], files["renamed"], "--trials", "2"]) == 0
    out = capsys.readouterr().out
    for word in ("Diff", "Build", "Exec", "Equal"):
        assert word in out
    assert "Equal  equal" in out


def test_cli_not_equal_exit_1_and_json_keys(tvm, files, capsys):
    from lowering.verify import main
    assert main([files["orig"], files["index"], "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    for key in ("diff", "build", "exec", "equal", "max_abs_err", "max_rel_err", "trials", "tolerance", "ok"):
        assert key in d
    assert d["equal"] is False and d["tolerance"]["mode"] == "strict" and len(d["trials"]) == 3
    assert main([files["orig"], "--json", "--time", "--trials", "1"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["equal"] is None and d["time_ms_min"] > 0 and d["time_ms_median"] >= d["time_ms_min"]


def test_cli_user_error_exit_2_without_traceback(files, capsys):
    from lowering.verify import main
    assert main([files["orig"], files["bad"]]) == 2
    err = capsys.readouterr().err
    assert "bad.leir:" in err and ": error: " in err and "Traceback" not in err
    assert main([files["orig"] + ".missing"]) == 2
    assert main([files["orig"], "--trials", "0"]) == 2


def test_half_precision_bound_grows_with_float32_epsilon_not_its_own():
    """f16 reductions accumulate in float32 (docs/numerics.md): a long sum is not a licence for
    a large error; the half epsilon enters once."""
    from lowering.verify import EPS_F32, strict_rtol
    eps16 = float(np.finfo(np.float16).eps)
    assert strict_rtol("float16", 1) == pytest.approx(K_STRICT * (eps16 + EPS_F32))
    assert strict_rtol("float16", 10 ** 6) == pytest.approx(K_STRICT * (eps16 + EPS_F32 * 1000))
    assert strict_rtol("float32", 10 ** 6) == pytest.approx(K_STRICT * EPS_F32 * 1000)   # unchanged
    e = np.full(4, 100.0, np.float16)
    off = (e.astype(np.float64) * 1.05).astype(np.float16)          # 5 % off
    assert not compare(off, e, "f16", reduction_length=10 ** 6).equal   # 16*eps16*1000 would allow it
    near = (e.astype(np.float64) * (1 + 4 * eps16)).astype(np.float16)
    assert compare(near, e, "f16", reduction_length=10 ** 6).equal
