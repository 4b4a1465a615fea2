"""Numerical verification of a LEIR program (and a candidate rewrite of it) on TVM.

Strict tolerance (the default; lowering.md 6.3)
  Integer and bool outputs must be identical. For a float output of dtype with machine
  epsilon ``eps`` and a reduction length ``n`` (the largest product of reduction-loop
  extents of any equation in either program, at least 1), every element must satisfy

      |actual - expected| <= atol + rtol * |expected|
      rtol = K * eps * sqrt(n)                            (float32, float64)
      rtol = K * (eps + eps_f32 * sqrt(n))                (float16, bfloat16)
      atol = rtol * max(1, max|expected|)                 with K = 16

  where the max runs over the finite expected values of that output: both terms always
  apply (no "any of" disjunction). NaN, +inf and -inf must occur at exactly the same
  positions. sqrt(n) is the usual growth of rounding error in a reordered sum of n terms;
  the atol scale makes cancellation near zero in a large-magnitude output tolerable. Half
  precision is computed in float32 and rounded once per equation, reductions accumulate in
  float32 (``lowering.narrow``, docs/numerics.md): the sum's error grows with the float32
  epsilon, the half epsilon enters once per rounding, not with the reduction length.

Exact (``mode="exact"``, for rewrites documented as bitwise-exact)
  Every element identical: the same value (``-0.0`` equals ``0.0``) or NaN at the same
  position; integer and bool outputs identical as in strict mode. The two builds alone cannot
  decide a bitwise claim (TVM's simplifier folds ``(x+y)-y`` to ``x``, ``x*0.0`` and ``x-x`` to 0 in
  both), so a candidate that differs from its program is also evaluated by the reference
  evaluator (``lowering.reference``, no compiler) with the program, on the trials' inputs and on
  one more set holding special values (``lowering.reference.special_inputs``), and the claim holds
  only if every output is identical bit for bit (``-0.0`` is not ``0.0``, any NaN equals any NaN);
  ``VerifyResult.reference`` records it (``lowering.bitwise.reference_verdict``).

Reference tolerance (``mode="reference"``, for comparison only)
  The Step-TP reference's rule (lowering.md 6.2 item 6): positions holding the same NaN or
  the same infinity are ignored; equal when rtol <= 5e-3 or atol <= 1e-7 or MSE <= 1e-5,
  or the dtype is float16 and atol < 1.5, or float32 and atol < 1e-3 (the reference
  detected the dtype by a substring of the IR text; here it is the output's dtype).

Each trial draws fresh inputs (``lowering.inputs.random_inputs(program, seed, trial)``),
identical for both programs; every trial must pass.

Builds (``lowering.builds``)
  Verification runs the exact build. When the fast build is what gets timed, ``compare_builds``
  checks it against the exact build's outputs on the same inputs in strict mode.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, field
from typing import Optional

import numpy as np

from engine.leir.ast import DTYPES
from engine.leir.diagnostics import LeirError
from engine.plumbing.records import json_safe

from .errors import LoweringError

K_STRICT = 16
EPS_F32 = float(np.finfo(np.float32).eps)
STRICT_FORMULA = ("|actual-expected| <= atol + rtol*|expected|, rtol = 16*eps*sqrt(n) (f32, f64) or "
                  "16*(eps + eps_f32*sqrt(n)) (f16, bf16: float32 accumulation), "
                  "atol = rtol*max(1, max|expected|); ints and bools exact; NaN/inf positions equal")
REFERENCE_FORMULA = ("reference: rtol<=5e-3 or atol<=1e-7 or mse<=1e-5 or (float16 and atol<1.5) "
                     "or (float32 and atol<1e-3); same NaN/inf positions ignored")
EXACT_FORMULA = "actual == expected element-wise (NaN at the same positions); no tolerance"
MODES = ("strict", "reference", "exact")
_FORMULAS = {"strict": STRICT_FORMULA, "reference": REFERENCE_FORMULA, "exact": EXACT_FORMULA}


@dataclass
class Comparison:
    """The outcome of comparing one output tensor."""

    equal: bool
    max_abs_err: float
    max_rel_err: float
    mismatches: int          # elements outside the bound (strict) or NaN/inf disagreements
    nonfinite_match: bool    # NaN and +-inf at the same positions
    dtype: str
    mode: str
    reduction_length: int
    atol: Optional[float] = None
    rtol: Optional[float] = None
    mse: Optional[float] = None

    def to_dict(self) -> dict:
        return json_safe(asdict(self))


def _np_name(dtype: str) -> str:
    return DTYPES.get(dtype, dtype)


def _eps(name: str) -> float:
    if name == "bfloat16":
        return 2.0 ** -7
    return float(np.finfo(np.dtype(name)).eps)


def strict_rtol(dtype: str, reduction_length: int = 1) -> float:
    """The relative bound of strict mode for an output of ``dtype`` (a numpy/TVM name)."""
    n = max(1, int(reduction_length))
    if dtype in ("float16", "bfloat16"):
        return K_STRICT * (_eps(dtype) + EPS_F32 * math.sqrt(n))
    return K_STRICT * _eps(dtype) * math.sqrt(n)


def compare(actual, expected, dtype: str, reduction_length: int = 1, mode: str = "strict") -> Comparison:
    """Compare two arrays of one output (``dtype``: a LEIR code such as "f32" or a numpy name)."""
    if mode not in MODES:
        raise ValueError(f"unknown tolerance mode '{mode}' (expected {', '.join(MODES)})")
    name = _np_name(dtype)
    n = max(1, int(reduction_length))
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.shape != e.shape:
        return Comparison(False, math.inf, math.inf, int(max(a.size, e.size)), False, name, mode, n)
    if name not in ("float16", "bfloat16", "float32", "float64"):
        diff = a != e
        bad = int(np.count_nonzero(diff))
        err = float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64)))) if a.size else 0.0
        rel = float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64)) /
                           np.maximum(np.abs(e.astype(np.float64)), 1.0))) if a.size else 0.0
        if mode == "reference":
            return _reference(a.astype(np.float64), e.astype(np.float64), name, n)
        return Comparison(bad == 0, err, rel, bad, True, name, mode, n, atol=0.0, rtol=0.0)
    a64 = a.astype(np.float64)
    e64 = e.astype(np.float64)
    if mode == "reference":
        return _reference(a64, e64, name, n)
    nonfinite_bad = int(np.count_nonzero(_classes(a64) != _classes(e64)))
    fin = np.isfinite(a64) & np.isfinite(e64)
    rtol = 0.0 if mode == "exact" else strict_rtol(name, n)
    scale = float(np.max(np.abs(e64[fin]))) if fin.any() else 0.0
    atol = rtol * max(1.0, scale)
    d = np.abs(a64[fin] - e64[fin])
    ref = np.abs(e64[fin])
    outside = int(np.count_nonzero(d > atol + rtol * ref))
    max_abs = float(d.max()) if d.size else 0.0
    max_rel = float((d / np.maximum(ref, np.finfo(np.float64).tiny)).max()) if d.size else 0.0
    nonfinite_match = nonfinite_bad == 0
    mism = outside + nonfinite_bad
    return Comparison(mism == 0, max_abs, max_rel, mism, nonfinite_match, name, mode, n,
                      atol=atol, rtol=rtol)


def _classes(x):
    """0 finite, 1 NaN, 2 +inf, 3 -inf, element-wise."""
    return np.isnan(x) * 1 + np.isposinf(x) * 2 + np.isneginf(x) * 3


def _reference(a64, e64, name: str, n: int) -> Comparison:
    same = (np.isnan(a64) & np.isnan(e64)) | ((a64 == e64) & np.isinf(e64))
    keep = ~same
    d = np.abs(a64[keep] - e64[keep])
    with np.errstate(invalid="ignore"):
        atol = float(np.max(d)) if d.size else 0.0
        rtol = float(np.max(d / (np.abs(e64[keep]) + 1e-8))) if d.size else 0.0
        mse = float(np.mean(d ** 2)) if d.size else 0.0
    nan = lambda x: x != x  # noqa: E731
    ok = (not nan(rtol) and rtol <= 5e-3) or (not nan(atol) and atol <= 1e-7) or (not nan(mse) and mse <= 1e-5)
    if name == "float16" and atol < 1.5:
        ok = True
    if name == "float32" and atol < 1e-3:
        ok = True
    nonfinite_match = bool(np.array_equal(np.isnan(a64), np.isnan(e64)) and
                           np.array_equal(np.isinf(a64) & (a64 > 0), np.isinf(e64) & (e64 > 0)))
    return Comparison(bool(ok), atol, rtol, 0 if ok else int(d.size), nonfinite_match, name, "reference", n,
                      atol=atol, rtol=rtol, mse=mse)


# --------------------------------------------------------------------------- programs


def reduction_length(program) -> int:
    """Largest product of reduction-axis extents over the program's equations (at least 1)."""
    best = 1
    for ei in program.info.equations:
        ext = {l.var: l.extent for l in ei.loops}
        best = max(best, math.prod(ext[v] for v in ei.reduction_axes))
    return best


def check_same_interface(program, candidate) -> None:
    """Raise ``LeirError`` unless both programs declare the same known tensors."""
    def sig(p):
        return ([(d.name, d.dtype, tuple(d.shape)) for d in p.inputs],
                [(d.name, d.dtype, tuple(d.shape)) for d in p.outputs])
    a, b = sig(program), sig(candidate)
    if a != b:
        def fmt(s):
            return ("inputs " + ", ".join(f"{n}:{t}{list(sh)}" for n, t, sh in s[0]) +
                    "; outputs " + ", ".join(f"{n}:{t}{list(sh)}" for n, t, sh in s[1]))
        raise LeirError("the candidate must declare the same known tensors as the program: program has "
                        f"{fmt(a)}, candidate has {fmt(b)}")


@dataclass
class VerifyResult:
    """Everything a verification found; ``to_dict`` is JSON-serialisable."""

    program: str
    candidate: Optional[str]
    target: str
    trials_requested: int
    seed: int
    tolerance: dict
    diff: Optional[bool] = None
    build: Optional[bool] = None
    exec: Optional[bool] = None
    equal: Optional[bool] = None
    max_abs_err: Optional[float] = None
    max_rel_err: Optional[float] = None
    trials: list = field(default_factory=list)
    error: Optional[dict] = None
    time_ms_min: Optional[float] = None
    time_ms_median: Optional[float] = None
    times_ms: Optional[list] = None
    candidate_time_ms_min: Optional[float] = None
    candidate_time_ms_median: Optional[float] = None
    candidate_times_ms: Optional[list] = None
    speedup_median: Optional[float] = None
    builds: Optional[dict] = None        # compose: how each program was built (lowering.compose.METHODS)
    reference: Optional[dict] = None     # exact: the reference evaluator's verdict (lowering.bitwise)
    fast: Optional[dict] = None          # timed build fast: its outputs against the exact build's (compare_builds)

    @property
    def ok(self) -> bool:
        """Every requested check passed."""
        if self.build is False or self.exec is False:
            return False
        if self.candidate is not None and self.equal is not True:
            return False
        if self.fast is not None and not self.fast["equal"]:
            return False
        return self.error is None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        return json_safe(d)


def verify(program, candidate=None, trials: int = 3, seed: int = 0, target: str = "llvm",
           time: bool = False, tolerance: str = "strict", arch: str = "sm_90", device=None,
           compose: bool = False, timed_build: str = "exact") -> VerifyResult:
    """Build, run and compare ``candidate`` against ``program`` over ``trials`` seeded trials.

    Without a candidate, only ``program`` is built, run (and timed): diff/equal stay None.
    ``compose``: both run as their slot kernels (``lowering.compose``: bitwise the whole build's
    outputs, a kernel built once for every program that has it); ``builds`` says how each was built.
    Verification is always of the exact build (``lowering.builds``); ``timed_build="fast"``: an
    equal candidate's (or, alone, the program's) fast build is then checked against its exact
    build on the trials' inputs at the strict tolerance (``fast``; a mismatch fails the result),
    and ``time`` times the fast builds.
    """
    from .builds import EXACT, build_named
    from .compose import build_composed, run_composed
    from .inputs import random_inputs
    from .run import build, run_built, summarize_times, time_built

    build_named(timed_build, "timed build")
    if tolerance not in MODES:
        raise LeirError(f"unknown tolerance '{tolerance}' (expected {', '.join(MODES)})")
    if trials < 1:
        raise LeirError("--trials must be at least 1")
    if compose and time:
        raise ValueError("a composed build is verified, not timed (lowering.measure times slot kernels)")
    make, run = (build_composed, run_composed) if compose else (build, run_built)
    if candidate is not None:
        check_same_interface(program, candidate)
    n = reduction_length(program)
    if candidate is not None:
        n = max(n, reduction_length(candidate))
    res = VerifyResult(program.name, None if candidate is None else candidate.name, target, trials, seed,
                       {"mode": tolerance, "formula": _FORMULAS[tolerance],
                        "k": K_STRICT if tolerance == "strict" else None, "reduction_length": n})
    if candidate is not None:
        res.diff = candidate.to_leir() != program.to_leir()

    def fail(stage, who, err):
        res.error = {"stage": stage, "program": who, "message": getattr(err, "message", str(err))}

    try:
        base = make(program, target, arch)
    except LoweringError as e:
        if candidate is None:
            res.build = False
        fail("build", "original", e)
        return res
    try:
        cand = make(candidate, target, arch) if candidate is not None else base
    except LoweringError as e:
        res.build = False
        fail("build", "candidate", e)
        return res
    res.build = True
    if compose:
        res.builds = {"original": base.method, "candidate": cand.method}

    worst_abs, worst_rel, all_equal = 0.0, 0.0, True
    for t in range(trials):
        inputs = random_inputs(program, seed, t)
        try:
            expected = run(base, program, inputs, device)
        except LoweringError as e:
            if candidate is None:
                res.exec = False
            fail("exec", "original", e)
            return res
        if candidate is None:
            res.trials.append({"trial": t, "seed": [seed, t]})
            continue
        try:
            actual = run(cand, candidate, inputs, device)
        except LoweringError as e:
            res.exec = False
            fail("exec", "candidate", e)
            return res
        outs = {}
        trial_equal = True
        for d in program.outputs:
            c = compare(actual[d.name], expected[d.name], d.dtype, n, tolerance)
            outs[d.name] = c.to_dict()
            trial_equal &= c.equal
            worst_abs = max(worst_abs, c.max_abs_err)
            worst_rel = max(worst_rel, c.max_rel_err)
        all_equal &= trial_equal
        res.trials.append({"trial": t, "seed": [seed, t], "equal": trial_equal, "outputs": outs})
    res.exec = True
    if candidate is not None:
        res.equal = bool(all_equal)
        res.max_abs_err, res.max_rel_err = worst_abs, worst_rel
    if candidate is not None and tolerance == "exact" and res.diff and res.equal:
        from .bitwise import reference_verdict
        res.reference, failed = reference_verdict(program, candidate, trials, seed)
        if failed is not None:
            res.equal = None
            fail("reference", *failed)
            return res
        res.equal = bool(res.reference["equal"])
    if timed_build != EXACT and target != "cuda" and res.equal is not False:
        who, checked = ("candidate", candidate) if candidate is not None else ("original", program)
        try:
            res.fast = compare_builds(checked, [random_inputs(program, seed, t) for t in range(trials)], target,
                                      arch, device).to_dict()
        except LoweringError as e:
            fail(e.stage if e.stage in ("build", "exec") else "build", f"{who} (fast build)", e)
            return res
        if not res.fast["equal"]:
            return res
    if time:
        inputs = random_inputs(program, seed, 0)
        try:
            if timed_build != EXACT and target != "cuda":     # checked above: the candidate's agrees
                base = build(program, target, arch, timed_build)
                cand = build(candidate, target, arch, timed_build) if candidate is not None else base
            s = summarize_times(time_built(base, program, inputs, device))
            res.time_ms_min, res.time_ms_median, res.times_ms = s["time_ms_min"], s["time_ms_median"], s["times_ms"]
            if candidate is not None:
                s = summarize_times(time_built(cand, candidate, inputs, device))
                res.candidate_time_ms_min = s["time_ms_min"]
                res.candidate_time_ms_median = s["time_ms_median"]
                res.candidate_times_ms = s["times_ms"]
                if res.candidate_time_ms_median > 0:
                    res.speedup_median = res.time_ms_median / res.candidate_time_ms_median
        except LoweringError as e:
            fail("time", "candidate" if candidate is not None else "original", e)
    return res


@dataclass
class FastCheck:
    """How the fast build's outputs compared with the exact build's over some inputs."""

    equal: bool
    max_abs_err: float
    max_rel_err: float
    trials: int
    message: Optional[str] = None

    def to_dict(self) -> dict:
        return json_safe(asdict(self))


def compare_builds(program, inputs: list, target: str, arch: str, device=None) -> FastCheck:
    """Run ``program``'s exact and fast builds on each of ``inputs`` (name -> array) and compare
    every output at the strict tolerance. Raises ``LoweringError`` when a build fails or a run fails."""
    from .builds import EXACT, FAST
    from .run import build, run_built
    exact = build(program, target, arch, EXACT)
    fast = build(program, target, arch, FAST)
    n = reduction_length(program)
    worst_abs = worst_rel = 0.0
    for t, ins in enumerate(inputs):
        want = run_built(exact, program, ins, device)
        got = run_built(fast, program, ins, device)
        for d in program.outputs:
            c = compare(got[d.name], want[d.name], d.dtype, n, "strict")
            worst_abs, worst_rel = max(worst_abs, c.max_abs_err), max(worst_rel, c.max_rel_err)
            if not c.equal:
                return FastCheck(False, worst_abs, worst_rel, t + 1,
                                 f"the fast build of '{program.name}' differs from its exact build beyond the strict "
                                 f"tolerance: inputs {t}, output {d.name}: {c.mismatches} element(s) outside the bound, "
                                 f"max abs err {c.max_abs_err:.3g}")
    return FastCheck(True, worst_abs, worst_rel, len(inputs))


# --------------------------------------------------------------------------- CLI


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def format_ladder(r: VerifyResult) -> str:
    lines = []
    head = f"{r.program}" + (f" vs {r.candidate}" if r.candidate is not None else "")
    lines.append(f"{head}  [{r.target}, {r.trials_requested} trial(s), seed {r.seed}, tolerance {r.tolerance['mode']}, "
                 f"n={r.tolerance['reduction_length']}]")
    def mark(v, yes="ok", no="FAILED"):
        return "-" if v is None else (yes if v else no)
    if r.candidate is not None:
        lines.append(f"Diff   {mark(r.diff, 'different', 'identical text')}")
    lines.append(f"Build  {mark(r.build)}")
    lines.append(f"Exec   {mark(r.exec)}")
    if r.candidate is not None:
        lines.append(f"Equal  {mark(r.equal, 'equal', 'NOT EQUAL')}  max_abs_err {_fmt(r.max_abs_err)}  "
                     f"max_rel_err {_fmt(r.max_rel_err)}")
        for t in r.trials:
            for name, c in t.get("outputs", {}).items():
                lines.append(f"  trial {t['trial']} {name}: {'equal' if c['equal'] else 'not equal'} "
                             f"abs {_fmt(c['max_abs_err'] if isinstance(c['max_abs_err'], float) else None)} "
                             f"rel {_fmt(c['max_rel_err'] if isinstance(c['max_rel_err'], float) else None)} "
                             f"mismatches {c['mismatches']}")
    if r.reference is not None:
        lines.append(f"Oracle {mark(r.reference['equal'], 'identical', 'NOT IDENTICAL')}  (reference evaluator, "
                     f"{len(r.reference['trials'])} trial(s), the last of special values)")
        for t in r.reference["trials"]:
            for name, c in t["outputs"].items():
                if not c["equal"]:
                    lines.append(f"  trial {t['trial']} ({t['inputs']}) {name}: {c['mismatches']} element(s) differ, "
                                 f"{c['first']}")
    if r.time_ms_min is not None:
        lines.append(f"Time   original min {r.time_ms_min:.4f} ms, median {r.time_ms_median:.4f} ms")
        if r.candidate_time_ms_min is not None:
            lines.append(f"       candidate min {r.candidate_time_ms_min:.4f} ms, median "
                         f"{r.candidate_time_ms_median:.4f} ms, speedup {r.speedup_median:.3f}x")
    if r.fast is not None:
        lines.append(f"Fast   {mark(r.fast['equal'], 'agrees with exact', 'DIFFERS FROM EXACT')}  max_abs_err "
                     f"{_fmt(r.fast['max_abs_err'])}  max_rel_err {_fmt(r.fast['max_rel_err'])}"
                     + (f"  ({r.fast['message']})" if r.fast["message"] else ""))
    if r.error is not None:
        lines.append(f"error: {r.error['stage']} of the {r.error['program']} failed: {r.error['message']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    from engine.leir.cli import run_cli
    from engine.leir.files import load_program, load_programs

    from .builds import BUILD_NAMES, DEFAULT_TIMED

    def _main(argv):
        ap = argparse.ArgumentParser(prog="python -m lowering.verify",
                                     description="Build, run and numerically compare LEIR programs on TVM.")
        ap.add_argument("prog", help=".leir, .json or .jsonl file")
        ap.add_argument("candidate", nargs="?", help="a rewrite of PROG (same known tensors)")
        ap.add_argument("--name", help="program name inside a multi-program PROG (the candidate file is "
                                       "searched for the same name, else its first program is used)")
        ap.add_argument("--json", action="store_true", help="print one JSON object")
        ap.add_argument("--time", action="store_true", help="also time the program(s)")
        ap.add_argument("--target", choices=("llvm", "cuda"), default="llvm")
        ap.add_argument("--arch", default="sm_90")
        ap.add_argument("--trials", type=int, default=3)
        ap.add_argument("--seed", type=int, default=0)
        ap.add_argument("--tolerance", choices=MODES, default="strict")
        ap.add_argument("--build", choices=BUILD_NAMES, default=DEFAULT_TIMED,
                        help="the build --time times (lowering.builds): exact (default; what verification runs) or "
                             "fast (FMA, AVX-512), first checked against exact at the strict tolerance")
        a = ap.parse_args(argv)
        prog = load_program(a.prog, a.name)
        cand = None
        if a.candidate:
            progs = load_programs(a.candidate)
            cand = next((p for p in progs if p.name == prog.name), progs[0])
            try:
                check_same_interface(prog, cand)
            except LeirError as err:
                raise err.located(a.candidate) from None
        r = verify(prog, cand, trials=a.trials, seed=a.seed, target=a.target, time=a.time,
                   tolerance=a.tolerance, arch=a.arch, timed_build=a.build)
        if a.json:
            print(json.dumps(r.to_dict(), sort_keys=True))
        else:
            print(format_ladder(r))
        return 0 if r.ok else 1

    return run_cli(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
