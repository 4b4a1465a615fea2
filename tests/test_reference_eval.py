"""The reference evaluator (lowering/reference.py) and the bitwise claims it decides.

* It computes what the build computes: bit for bit on the examples and a corpus sample (the whole
  corpus: ``slow``), except the last ulp of ``log``, ``erf`` and ``**`` (``APPROXIMATE``), checked at
  the strict tolerance; NaN, infinities and signed zeros as the build has them.
* Its shortcuts change nothing: the vectorised evaluation and the accumulate of reductions give the
  same bits as the program run one iteration at a time, in its order.
* A bitwise claim holds only when the evaluator agrees: rewrites that hold for real numbers only and
  that TVM's simplifier folds in both builds (``(x+y)-y`` to ``x``, ``x*0.0`` to 0, ``x-x`` to 0) are
  refused by ``python -m lowering.rule_examples`` with a located error (exit 2) and make no row of
  ``dataset.generate``; an exact rewrite (``x*1`` to ``x``) still passes.
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import EXAMPLES, ROOT

from engine.leir.files import load_program, program_from_json
from lowering import reference
from lowering.inputs import random_inputs
from lowering.reference import approximate_functions, evaluate, special_inputs
from lowering.bitwise import compare_bits
from lowering.verify import compare, reduction_length

CORPUS = ROOT / "examples" / "corpus" / "programs.jsonl"


def prog(leir: str, inputs: dict, outputs: dict, name: str = "t"):
    decl = lambda d: [{"name": n, "dtype": t, "shape": list(s)} for n, (t, s) in d.items()]  # noqa: E731
    return program_from_json({"name": name, "inputs": decl(inputs), "outputs": decl(outputs), "leir": leir})


def corpus(names=None) -> list:
    out = []
    for line in CORPUS.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            if names is None or rec["name"] in names:
                out.append(program_from_json(rec))
    return out


def agree_with_build(p, seed: int = 0) -> list[str]:
    """What differs between the evaluator and TVM's llvm build of ``p`` (empty when they agree): bit
    for bit, or at the strict tolerance where ``p`` computes an ``APPROXIMATE`` function."""
    from lowering.run import run_program
    inputs = random_inputs(p, seed, 0)
    want, got = run_program(p, inputs), evaluate(p, inputs)
    approx = approximate_functions(p)
    bad = []
    for d in p.outputs:
        if approx:
            c = compare(got[d.name], want[d.name], d.dtype, reduction_length(p), "strict")
        else:
            c = compare_bits(got[d.name], want[d.name], d.dtype)
        if not c.equal:
            bad.append(f"{p.name} {d.name}: {c.mismatches} element(s) differ ({c.mode}, max abs err {c.max_abs_err})")
    return bad


# ------------------------------------------------------------------ agreement with the build

@pytest.mark.parametrize("name", ["matmul", "softmax", "layernorm", "conv2d", "attention"])
def test_the_examples_agree_with_the_build_bit_for_bit(tvm, name):
    p = load_program(EXAMPLES / f"{name}.leir")
    assert approximate_functions(p) == set()
    assert agree_with_build(p) == []


SAMPLE = ["softmax", "GELU", "Softplus", "CrossEntropyLoss", "Argmax_over_a_dimension", "cumsum",
          "masked_cumsum", "Max_Pooling_1D", "GroupNorm", "Gemm_Sigmoid_Sum_LogSumExp"]


def test_a_corpus_sample_agrees_with_the_build(tvm):
    """Reductions, scans, gathers, padding, pooling, argmax, f64 scalars; erf and log at strict."""
    from dataset.generate.shrink import shrink_program
    progs = corpus(set(SAMPLE))
    assert sorted(p.name for p in progs) == sorted(SAMPLE)
    assert {"erf", "log"} <= set().union(*(approximate_functions(p) for p in progs))
    bad = [b for p in progs for b in agree_with_build(shrink_program(p, 16384))]
    assert bad == []


def _instances(p, limit: int):
    """``p`` shrunk within ``limit`` points, else its smallest instance, else its per-statement kernels
    shrunk; (programs, what could not be made small)."""
    from dataset.generate.shrink import points, shrink_program, smallest_instance
    from engine.leir.slots import split
    q = shrink_program(p, 16384) or smallest_instance(p)[0]
    if q is not None and points(q) <= limit:
        return [q], []
    out, left = [], []
    for s in split(p):
        k = shrink_program(s.kernel, 16384) or smallest_instance(s.kernel)[0]
        (out.append(k) if k is not None and points(k) <= limit else left.append(f"{p.name}[{s.start}:{s.stop}]"))
    return out, left


@pytest.mark.slow
def test_the_whole_corpus_agrees_with_the_build(tvm):
    """Every corpus program (shrunk; one that does not shrink enough, kernel by kernel). Only the
    3-D convolution with a 3x5x7 kernel cannot be made small (its kept kernel sizes fix 7*10^10 points)."""
    from lowering.run import clear_build_cache
    bad, left = [], []
    for p in corpus():
        progs, rest = _instances(p, 1 << 25)
        left += rest
        for q in progs:
            bad += agree_with_build(q)
        clear_build_cache()
    assert bad == []
    assert left == ["conv_standard_3D__square_input__asymmetric_kernel[0:1]"]


# ------------------------------------------------------------------ semantics

def test_a_sum_accumulates_in_float32_in_the_loop_order_the_program_states():
    # 2^24 + 1 rounds back to 2^24 in float32: the order of the terms decides the sum
    p = prog("L^{2}_{a=0}L^{5}_{c=0}[C^{f32,g}_{a}=C^{f32,g}_{a}+A^{f32,g}_{a,c};];",
             {"A": ("f32", (2, 5))}, {"C": ("f32", (2,))})
    a = np.array([[2.0 ** 24, 1, 1, 1, 1], [1, 1, 1, 1, 2.0 ** 24]], dtype=np.float32)
    got = evaluate(p, {"A": a})["C"]
    assert got.tolist() == [2.0 ** 24, 2.0 ** 24 + 4]
    rows = []
    for r in a:
        acc = np.float32(0)
        for x in r:
            acc = np.float32(acc + x)
        rows.append(acc)
    assert got.tobytes() == np.array(rows, dtype=np.float32).tobytes()


def test_each_operation_rounds_in_its_type_and_half_precision_rounds_once_per_equation():
    # f32: (x + y) - y is not x; f16: x*3/3 computed in float32 and rounded once is x
    p = prog("L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}+D^{f32,g}_{a}-D^{f32,g}_{a};];",
             {"A": ("f32", (4,)), "D": ("f32", (4,))}, {"C": ("f32", (4,))})
    x = np.array([0.1, 1e-8, 3.3, -7.1], np.float32)
    y = np.array([1e8, 1.0, 1e-3, 2.0 ** 30], np.float32)
    want = (x + y) - y
    assert evaluate(p, {"A": x, "D": y})["C"].tobytes() == want.tobytes() and not np.array_equal(want, x)
    h = prog("L^{64}_{a=0}[C^{f16,g}=C^{f16,g}+A^{f16,g}_{a};];L^{4}_{a=0}[E^{f16,g}_{a}=A^{f16,g}_{a}*3/3;];",
             {"A": ("f16", (64,))}, {"E": ("f16", (4,))})
    ones = np.full(64, 1.0009765625, np.float16)       # 1 + 2^-10: a float16 sum would lose the tail
    assert evaluate(h, {"A": ones})["E"].tolist() == ones[:4].tolist()
    s = prog("L^{4096}_{a=0}[C^{f16,g}=C^{f16,g}+A^{f16,g}_{a};];", {"A": ("f16", (4096,))}, {"C": ("f16", ())})
    assert float(evaluate(s, {"A": np.ones(4096, np.float16)})["C"]) == 4096.0      # float16 alone stops at 2048


def test_nan_infinities_and_signed_zeros_are_the_builds(tvm):
    from lowering.run import run_program
    a = np.array([np.nan, 1, np.nan, -0.0, 0.0, np.inf, -np.inf, 2], np.float32)
    d = np.array([1, np.nan, np.nan, 0.0, -0.0, 1, np.nan, np.inf], np.float32)
    for rhs, out in [("max(A^{f32,g}_{a},D^{f32,g}_{a})", "f32"), ("min(A^{f32,g}_{a},D^{f32,g}_{a})", "f32"),
                     ("-A^{f32,g}_{a}", "f32"), ("if_then_else(A^{f32,g}_{a}!=D^{f32,g}_{a},1,0)", "f32"),
                     ("if_then_else(A^{f32,g}_{a},1,0)", "f32"), ("A^{f32,g}_{a}", "bool"),
                     ("A^{f32,g}_{a}/D^{f32,g}_{a}", "f32"), ("exp(A^{f32,g}_{a})", "f32"),
                     ("sqrt(A^{f32,g}_{a})", "f32"), ("A^{f32,g}_{a}//D^{f32,g}_{a}", "f32")]:
        p = prog(f"L^{{8}}_{{a=0}}[C^{{{out},g}}_{{a}}={rhs};];", {"A": ("f32", (8,)), "D": ("f32", (8,))},
                 {"C": (out, (8,))})
        got, want = evaluate(p, {"A": a, "D": d})["C"], run_program(p, {"A": a, "D": d})["C"]
        assert got.tobytes() == want.tobytes(), (rhs, got, want)
    # what the build folds, the evaluator computes: x*0.0 of -1 is -0.0, x-x of inf is NaN
    for rhs, check in [("A^{f32,g}_{a}*0.0", lambda c: np.signbit(c[1]) and np.isnan(c[0]) and np.isnan(c[5])),
                       ("A^{f32,g}_{a}-A^{f32,g}_{a}", lambda c: np.isnan(c[5]) and np.isnan(c[6]) and c[1] == 0)]:
        p = prog(f"L^{{8}}_{{a=0}}[C^{{f32,g}}_{{a}}={rhs};];", {"A": ("f32", (8,))}, {"C": ("f32", (8,))})
        a_neg = np.where(np.isnan(a), a, -np.abs(a)).astype(np.float32)
        a_neg[5], a_neg[6] = np.inf, -np.inf
        got, built = evaluate(p, {"A": a_neg})["C"], run_program(p, {"A": a_neg})["C"]
        assert check(got) and not np.isnan(built).any() and not np.signbit(built).any(), (rhs, got, built)


def test_exp_is_the_builds_own_algorithm_bit_for_bit(tvm):
    from lowering.run import run_program
    n = 1 << 14
    p = prog(f"V^{{{n}}}_{{a=0}}[C^{{f32,g}}_{{a}}=exp(A^{{f32,g}}_{{a}});];", {"A": ("f32", (n,))},
             {"C": ("f32", (n,))})
    x = np.random.default_rng(3).uniform(-110, 95, n).astype(np.float32)
    x[:6] = [np.nan, np.inf, -np.inf, -0.0, 88.72283, -104]
    assert evaluate(p, {"A": x})["C"].tobytes() == run_program(p, {"A": x})["C"].tobytes()


def test_initialisation_padding_gathers_and_a_composite_reduction_index_agree_with_the_build(tvm):
    cases = [
        # several spatial iterations share an element: initialised at its first update
        prog("L^{8}_{a=0}[C^{f32,g}_{a//2}=C^{f32,g}_{a//2}+A^{f32,g}_{a};];", {"A": ("f32", (8,))},
             {"C": ("f32", (4,))}),
        # padding reads outside A in the branch not taken; a max reduction initialised with -inf
        prog("L^{4}_{a=0}L^{10}_{c=0}[D^{f32,g}_{a,c}=if_then_else(1<=c<9,A^{f32,g}_{a,c-1},-inf);];"
             "L^{4}_{a=0}L^{4}_{c=0}L^{3}_{d=0}[C^{f32,g}_{a,c}=max(C^{f32,g}_{a,c},D^{f32,g}_{a,c*2+d});];",
             {"A": ("f32", (4, 8))}, {"C": ("f32", (4, 4))}),
        # a gather through an index tensor, an in-place update after the reduction, a scan
        prog("L^{6}_{a=0}L^{5}_{c=0}[C^{f32,g}_{a}=C^{f32,g}_{a}+A^{f32,g}_{a,c}*E^{f32,g}_{I^{i64,g}_{a},c};];"
             "L^{6}_{a=0}[C^{f32,g}_{a}=C^{f32,g}_{a}*2;];",
             {"A": ("f32", (6, 5)), "E": ("f32", (3, 5)), "I": ("i64", (6,))}, {"C": ("f32", (6,))}),
        prog("L^{3}_{a=0}L^{7}_{c=0}[C^{f32,g}_{a,c}=if_then_else(c<1,0,C^{f32,g}_{a,c-1})+A^{f32,g}_{a,c};];",
             {"A": ("f32", (3, 7))}, {"C": ("f32", (3, 7))}),
        HALF,
        # an f16 output accumulator, rounded into the output once, after the last statement
        prog("L^{4}_{a=0}L^{300}_{c=0}[C^{f16,g}_{a}=C^{f16,g}_{a}+A^{f16,g}_{a,c};];L^{4}_{a=0}[C^{f16,g}_{a}="
             "C^{f16,g}_{a}*3;];", {"A": ("f16", (4, 300))}, {"C": ("f16", (4,))}),
    ]
    assert [b for p in cases for b in agree_with_build(p)] == []


# half precision: a float32 accumulator read rounded by the next statement, one rounding per equation
HALF = prog("L^{4}_{a=0}L^{33}_{c=0}[S^{f16,g}_{a}=S^{f16,g}_{a}+A^{f16,g}_{a,c}*A^{f16,g}_{a,c};];"
            "L^{4}_{a=0}L^{33}_{c=0}[C^{f16,g}_{a,c}=A^{f16,g}_{a,c}*100/S^{f16,g}_{a}+exp(A^{f16,g}_{a,c});];",
            {"A": ("f16", (4, 33))}, {"C": ("f16", (4, 33))}, name="half")


def _sequential(monkeypatch):
    """Every loop run one iteration at a time, in the program's order (no vectorisation, no accumulate)."""
    monkeypatch.setattr(reference, "_independent", lambda chosen, items, extents: False)
    monkeypatch.setattr(reference._Evaluator, "_scan", lambda self, nest, path, ordered: None)


def test_vectorised_evaluation_and_accumulates_give_the_bits_of_sequential_evaluation(monkeypatch):
    from dataset.generate.shrink import shrink_program
    names = {"softmax", "Matmul3D", "Argmax_over_a_dimension", "masked_cumsum", "Max_Pooling_1D", "Max_Pooling_2D",
             "CrossEntropyLoss", "GELU"}
    progs = [shrink_program(p, 4096) for p in corpus(names)] + [HALF]
    assert None not in progs and len(progs) == 9
    fast = {p.name: evaluate(p, special_inputs(p, 0, 0)) for p in progs}
    monkeypatch.setattr(reference, "CHUNK", 64)          # chunked reductions, budget-bound vector loops
    chunked = {p.name: evaluate(p, special_inputs(p, 0, 0)) for p in progs}
    _sequential(monkeypatch)
    for p in progs:
        slow = evaluate(p, special_inputs(p, 0, 0))
        for d in p.outputs:
            for got in (fast[p.name][d.name], chunked[p.name][d.name]):
                assert compare_bits(got, slow[d.name], d.dtype).equal, (p.name, d.name)


def test_a_max_reduction_keeps_the_zero_the_build_keeps(tvm, monkeypatch):
    """``max(X, t)`` is ``X > t ? X : t``: of equal values the last wins, -0.0 and 0.0 included; the
    accumulate of a reduction keeps the same one as the loop and the build."""
    from lowering.run import run_program
    z = [[-0.0, 0.0, -1.0], [0.0, -0.0, -1.0], [-1.0, -0.0, -2.0], [-0.0, -5.0, 0.0]]
    for f in ("max", "min"):
        rows = np.array(z if f == "max" else [[-x for x in r] for r in z], np.float32)
        p = prog(f"L^{{4}}_{{a=0}}L^{{3}}_{{c=0}}[C^{{f32,g}}_{{a}}={f}(C^{{f32,g}}_{{a}},A^{{f32,g}}_{{a,c}});];",
                 {"A": ("f32", (4, 3))}, {"C": ("f32", (4,))})
        got, built = evaluate(p, {"A": rows})["C"], run_program(p, {"A": rows})["C"]
        assert got.tobytes() == built.tobytes(), (f, got, built)
        assert np.signbit(got).tolist() == ([False, True, True, False] if f == "max" else [True, False, False, True])


def test_special_inputs_hold_every_special_value_and_only_change_floats():
    p = prog("L^{16}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}+E^{i32,g}_{a};];", {"A": ("f32", (16,)), "E": ("i32", (16,))},
             {"C": ("f32", (16,))})
    s, r = special_inputs(p, 5, 3), random_inputs(p, 5, 3)
    a = s["A"]
    assert np.isposinf(a).any() and np.isneginf(a).any() and not np.isnan(a).any()
    assert (np.signbit(a) & (a == 0)).any() and ((a == 0) & ~np.signbit(a)).any()
    assert (a == np.finfo(np.float32).max).any() and (a == np.finfo(np.float32).smallest_subnormal).any()
    assert np.array_equal(s["E"], r["E"]) and s["A"].tobytes() == special_inputs(p, 5, 3)["A"].tobytes()


# ------------------------------------------------------------------ bitwise claims decided by the evaluator

BLOCK = """
;; @strategy {name}
;; @category math
;; @difficulty easy
;; @K 1 @P 1 @S 0
;; @inverse none
;; @exactness bitwise
;; @benefit arithmetic
;; @description {description}
;; @cot the equation {{equation}} in {{stmt}} can be simplified; it becomes {{equation_after}}.
;; @example
;;   input  A f32[4, 8]
;;   input  D f32[4, 8]
;;   output C f32[4, 8]
;;   L^{{4}}_{{a=0}}L^{{8}}_{{c=0}}[C^{{f32,g}}_{{a,c}}={before};];
;; @after {name}/{variant}
;;   L^{{4}}_{{a=0}}L^{{8}}_{{c=0}}[C^{{f32,g}}_{{a,c}}={after};];
(identity "{name}/{variant}" {left} {right})
"""

A, D = "A^{f32,g}_{a,c}", "D^{f32,g}_{a,c}"
# name: (description, variant, example before, after, identity LEFT, RIGHT)
FOLDS = {
    "cancel": ("cancels a term added and subtracted again", "add_sub", f"{A}+{D}-{D}", A, '"x+y-y"', '"x"'),
    "times_zero": ("replaces a product with zero by zero", "times_zero", f"{A}*0.0+{D}", f"0.0+{D}",
                   '(Bin "*" _x (Num "0.0"))', '(Num "0.0")'),
    "minus_self": ("replaces a value minus itself by zero", "minus_self", f"{A}-{A}+{D}", f"0+{D}", '"x-x"', '"0"'),
    "reciprocal": ("divides by a constant as a product with its reciprocal", "third", f"{A}/3+{D}",
                   f"{A}*(1/3)+{D}", '"x/3"', '"x*(1/3)"'),
}
EXACT = {"times_one": ("drops a product with one", "times_one", f"{A}*1+{D}", f"{A}+{D}", '"x*1"', '"x"')}


def block(name, spec) -> str:
    description, variant, before, after, left, right = spec
    return BLOCK.format(name=name, description=description, variant=variant, before=before, after=after,
                        left=left, right=right)


@pytest.fixture(scope="module")
def folds(tmp_path_factory):
    """A user's rule folder: four rewrites that hold for real numbers only, claimed bitwise, and one that
    is exact; a program the first one rewrites."""
    d = tmp_path_factory.mktemp("folds")
    (d / "folds.egg").write_text(";; folds.egg -- rewrites claimed bitwise\n" +
                                 "".join(block(n, s) for n, s in {**FOLDS, **EXACT}.items()))
    (d / "cancel.leir").write_text("program cancel\ninput  A f32[16, 32]\ninput  D f32[16, 32]\noutput C f32[16, 32]\n\n"
                                   "L^{16}_{a=0}L^{32}_{c=0}[C^{f32,g}_{a,c}=A^{f32,g}_{a,c}+D^{f32,g}_{a,c}"
                                   "-D^{f32,g}_{a,c};];\n")
    return d


def cli(*args):
    return subprocess.run([sys.executable, "-m", *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


@pytest.fixture(scope="module")
def examples_run(folds):
    """``python -m lowering.rule_examples --rules DIR --only DIR``: (exit code, error lines by block)."""
    r = cli("lowering.rule_examples", "--rules", folds, "--only", folds)
    lines = {}
    for line in r.stderr.splitlines():
        if ": error: example of '" in line:
            lines[line.split("example of '")[1].split("'")[0]] = line
    return r.returncode, lines, r.stderr


@pytest.mark.parametrize("name", ["cancel", "times_zero", "minus_self"])
def test_a_fold_the_builds_share_is_refused_by_the_rule_examples(tvm, folds, examples_run, name):
    """TVM folds the BEFORE program into the AFTER one in both builds, which then agree; the reference
    evaluator does not (rounding for cancel, -0.0 for times_zero, infinities for minus_self)."""
    rc, lines, err = examples_run
    assert rc == 2, err
    line = lines[name]
    text = (folds / "folds.egg").read_text().splitlines()
    start = text.index(f";; @strategy {name}")
    at = next(i for i, l in enumerate(text, 1) if i > start and l.startswith(f";; @after {name}/"))
    assert line.startswith(f"{folds / 'folds.egg'}:{at}:1: error: example of '{name}': the neighbour does not verify "
                           "on llvm at tolerance 'exact': not equal: the builds agree, but the reference evaluator")
    assert "not identical bit for bit" in line


def test_an_inexact_reciprocal_is_refused_and_an_exact_rewrite_passes(tvm, examples_run):
    rc, lines, err = examples_run
    assert "example of 'reciprocal'" in lines["reciprocal"] and "times_one" not in lines
    assert "5 example(s) of 5 block(s): 1 passed, 4 failed" in err


def test_dataset_generate_writes_no_verified_row_of_a_refused_rewrite(tvm, folds, tmp_path):
    out = tmp_path / "out"
    r = cli("dataset.generate", folds / "cancel.leir", "-o", out, "--rules", folds, "--strategies", "cancel",
            "--no-plots")
    assert r.returncode == 0, r.stderr
    assert (out / "rows.jsonl").read_text() == ""
    failures = [json.loads(x) for x in (out / "failures.jsonl").read_text().splitlines()]
    assert [(f["step"]["strategy"], f["stage"], f["verdict"]["equal"]) for f in failures] == [("cancel", "verify", False)]
    assert "the builds agree, but the reference evaluator" in failures[0]["message"]


def test_the_verifier_records_the_evaluators_verdict_only_for_exact_claims(tvm):
    from lowering import Verifier
    before = prog(f"L^{{4}}_{{a=0}}L^{{8}}_{{c=0}}[C^{{f32,g}}_{{a,c}}={A}+{D}-{D};];",
                  {"A": ("f32", (4, 8)), "D": ("f32", (4, 8))}, {"C": ("f32", (4, 8))})
    after = prog(f"L^{{4}}_{{a=0}}L^{{8}}_{{c=0}}[C^{{f32,g}}_{{a,c}}={A};];",
                 {"A": ("f32", (4, 8)), "D": ("f32", (4, 8))}, {"C": ("f32", (4, 8))})
    with Verifier(trials=2, isolate=False) as v:
        exact = v.verify(before, after, "exact")
        strict = v.verify(before, after, "strict")
        same = v.verify(before, before, "exact")
    assert not exact.equal and exact.reason == "not equal"
    assert [t["equal"] for t in exact.trials] == [True, True]               # the builds agree
    assert [t["inputs"] for t in exact.reference["trials"]] == ["random", "random", "special values"]
    assert exact.reference["equal"] is False and roundtrips(exact)
    assert strict.equal and strict.reference is None
    assert same.equal and same.reference is None                           # identical text: nothing to decide


def roundtrips(v) -> bool:
    from lowering.isolated import Verdict
    return Verdict.from_json(json.loads(json.dumps(v.to_json()))).reference == v.reference


def test_the_verify_command_shows_the_oracle_line(tvm, tmp_path):
    decl = "input  A f32[4, 8]\ninput  D f32[4, 8]\noutput C f32[4, 8]\n\n"
    (tmp_path / "b.leir").write_text(f"program p\n{decl}L^{{4}}_{{a=0}}L^{{8}}_{{c=0}}[C^{{f32,g}}_{{a,c}}={A}+{D}-{D};];\n")
    (tmp_path / "a.leir").write_text(f"program p\n{decl}L^{{4}}_{{a=0}}L^{{8}}_{{c=0}}[C^{{f32,g}}_{{a,c}}={A};];\n")
    r = cli("lowering.verify", tmp_path / "b.leir", tmp_path / "a.leir", "--tolerance", "exact")
    assert r.returncode == 1, r.stderr
    assert "Oracle NOT IDENTICAL" in r.stdout and "element(s) differ, first at" in r.stdout
