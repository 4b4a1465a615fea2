"""One-step enumeration over the corpus: validity, coverage, determinism, CLI, verification."""
import hashlib
import json
import shutil
import subprocess
import sys

import pytest

from engine.leir.ast import equations
from engine.rewrite.enumerator import Enumerator, loop_names, tensor_names
from engine.leir.files import program_from_json
from rulekit import copy_schema
from tests.conftest import COVERAGE, ROOT, corpus_records
from rulekit import operator_rules_dir

# Reference applications we deliberately do not reproduce: each changes the kind of an
# extent-1 loop (a no-op, strategies.md S15 "extent-1 vectorisations change nothing"), or
# unrolls a 131072-iteration loop (beyond the reference's own 1024 bound).
UNSOUND_OR_NOOP = {
    ("Sum_reduction_over_a_dimension", "loop_vectorization"),
    ("Matrix_vector_multiplication", "loop_parallelization"),
    ("Matrix_vector_multiplication", "loop_unrolling"),
    ("Matrix_vector_multiplication", "loop_vectorization"),
}
# Guarded by exactness, not missing: the reference reassociates sums whose values reach the leaky
# ReLU's exact comparison D<0 (InexactOK, engine.rewrite.analyses.values.exact_uses); rounding there can flip a branch.
EXACT_USE = {("Gemm_LogSumExp_LeakyReLU_LeakyReLU_GELU_GELU", "reduction_factorization")}
LOWERING_GAP = "through a composite index"



@pytest.fixture(scope="module")
def eng(tmp_path_factory):
    d = operator_rules_dir(tmp_path_factory)
    return Enumerator(d)


@pytest.fixture(scope="module")
def corpus():
    return [program_from_json(r) for r in corpus_records()]


@pytest.fixture(scope="module")
def results(eng, corpus):
    return {p.name: eng.enumerate(p) for p in corpus}


def test_fresh_name_sequences():
    names = list(zip(range(21), loop_names()))
    assert [n for _, n in names][:3] == ["a", "c", "d"] and names[19][1] == "aa" and names[20][1] == "ac"
    t = [n for _, n in zip(range(22), tensor_names())]
    assert t[:3] == ["A", "C", "D"] and t[20:22] == ["Aa", "Ac"]


def test_every_neighbour_is_valid(results, corpus):
    """Every neighbour re-analyses with the initialisation its rule built (reduced: a
    deterministic slice of each program's neighbours; the slow test checks all)."""
    checked = 0
    for p in corpus:
        nbs = results[p.name].neighbours
        for nb in nbs[:: max(1, len(nbs) // 40)]:
            _ = nb.program  # raises InvalidNeighbour on a rule bug
            checked += 1
    assert checked > 2000


@pytest.mark.slow
def test_every_neighbour_is_valid_full(results, corpus):
    for p in corpus:
        for nb in results[p.name].neighbours:
            _ = nb.program


def test_reference_coverage(eng, results):
    ops = {s.name for s in eng.book.strategies}
    missing = set()
    for line in COVERAGE.read_text().splitlines():
        rec = json.loads(line)
        got = {pr.strategy for n in results[rec["name"]].neighbours for pr in n.provenances}
        missing |= {(rec["name"], s) for s in set(rec["strategies"]) & ops - got}
    assert missing == UNSOUND_OR_NOOP | EXACT_USE


def test_exact_use_exceptions_reduce_only_tensors_that_reach_a_comparison(corpus):
    """Every reduction of the program that the reference factorises writes a tensor whose values
    reach an exact use, so no reassociating rewrite of it is allowed."""
    from engine.rewrite.analyses.values import exact_uses
    byname = {p.name: p for p in corpus}
    for name, _ in EXACT_USE:
        p = byname[name]
        reduced = {e.eq.lhs.name for e in p.info.equations if e.reduction_axes and e.eq.init in ("0", "1")}
        assert reduced and reduced <= exact_uses(p), (name, reduced, exact_uses(p))


def test_documented_exceptions_are_noops(corpus):
    """The exceptions really are extent-1 kind changes (every other serial loop is a
    reduction axis, or beyond the vectorisation bound 64) or over-long unrolls."""
    from engine.leir.ast import loop_vars
    byname = {p.name: p for p in corpus}
    for name, strat in UNSOUND_OR_NOOP:
        for n in byname[name].body:
            lhs_vars = set().union(*(loop_vars(i) for _, eq in equations((n,)) for i in eq.lhs.index))
            for l in n.loops:
                if l.kind != "L" or l.extent == 1:
                    continue
                if strat == "loop_unrolling":
                    assert l.extent >= 1024
                elif strat == "loop_vectorization":
                    assert l.var not in lhs_vars or l.extent > 64
                else:
                    assert l.var not in lhs_vars


def test_inverse_fires_on_partner_outputs(eng, corpus):
    for p in corpus[:12]:
        for nb in eng.enumerate(p, ["loop_split"]).neighbours[:3]:
            back = {m.leir for m in eng.enumerate(nb.program, ["loop_fusion"]).neighbours}
            assert p.to_leir() in back, (p.name, nb.leir)


def test_neighbours_merge_and_keep_provenances(eng):
    from engine.leir.parser import parse_body
    from engine.leir.program import make_program
    from engine.leir.ast import TensorDecl
    # splitting c by 2 then nothing else, vs the two identical statements: each position
    # gives its own neighbour; identical results of different sites merge
    p = make_program("t", [TensorDecl("A", "f32", (4, 4))], [TensorDecl("D", "f32", (4, 4))],
                     parse_body("B^{4}_{tx=0}L^{4}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a};];"
                                "B^{4}_{tx=0}L^{4}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a};];"))
    res = eng.enumerate(p, ["loop_unrolling"])
    assert [n.provenances[0].site for n in res.neighbours] == [(0,), (1,)]
    # reorder of a 2-loop pointwise nest and nothing else: one neighbour per site
    texts = [n.leir for n in res.neighbours]
    assert len(set(texts)) == 2


def test_two_runs_byte_identical():
    rec = corpus_records()[2]
    path = ROOT / ".pytest_cache" / "enum_prog.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(rec))
    outs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-m", "engine.enumerate", str(path), "--json"],
                           capture_output=True, text=True, cwd=ROOT, timeout=300)
        outs.append(r.stdout)
    assert outs[0] == outs[1] and outs[0].count("\n") > 10
    first = json.loads(outs[0].splitlines()[0])
    assert {"strategy", "category", "rule", "site", "params", "leir"} <= set(first)


def test_cli_limit_filter_and_errors(tmp_path):
    rec = corpus_records()[0]
    f = tmp_path / "p.json"
    f.write_text(json.dumps(rec))
    r = subprocess.run([sys.executable, "-m", "engine.enumerate", str(f), "--strategy", "loop_split",
                        "--json", "--limit", "3"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == 3 and {x["strategy"] for x in lines} == {"loop_split"}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(rec, leir="B^{4}_{tx=0}[D^{f32,g}_{tx}=;];")))
    r = subprocess.run([sys.executable, "-m", "engine.enumerate", str(bad)], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 2 and "error:" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "engine.enumerate", str(f), "--strategy", "nope"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 2 and "unknown strategy" in r.stderr


def _points(p):
    tot = 0
    for loops, _ in equations(p.body):
        n = 1
        for l in loops:
            n *= l.extent
        tot += n
    return tot


def _sample(results, corpus, per_strategy, max_points):
    out = []
    for p in corpus:
        if _points(p) > max_points:
            continue
        by = {}
        for n in results[p.name].neighbours:
            by.setdefault(n.provenances[0].strategy, []).append(n)
        for s in sorted(by):
            ranked = sorted(by[s], key=lambda n: hashlib.sha256(n.leir.encode()).hexdigest())
            out += [(p, n) for n in ranked[:per_strategy]]
    return out


def _verify_sample(sample):
    from lowering.verify import verify
    bad, gap, equal = [], [], 0
    for p, n in sample:
        r = verify(p, n.program, trials=3)
        if r.equal:
            equal += 1
        elif r.error and LOWERING_GAP in str(r.error.get("message", "")):
            gap.append(n.leir)
        else:
            bad.append((p.name, n.provenances[0].rule, n.leir, r.error, r.max_abs_err))
    return equal, gap, bad


def _stratified(results, corpus, per_strategy, max_points):
    """``per_strategy`` neighbours of every strategy over the corpus (programs up to ``max_points``),
    in sha256 order of their text, at most one a program while other programs remain."""
    by = {}
    for p, n in _sample(results, corpus, 10**6, max_points):
        by.setdefault(n.provenances[0].strategy, []).append((p, n))
    out = []
    for s in sorted(by):
        ranked = sorted(by[s], key=lambda pn: hashlib.sha256(pn[1].leir.encode()).hexdigest())
        seen, picked = set(), []
        for p, n in ranked + ranked:                     # first one a program, then any
            if len(picked) == per_strategy:
                break
            if (p.name not in seen or len(seen) == len({q.name for q, _ in ranked})) and (p, n) not in picked:
                seen.add(p.name)
                picked.append((p, n))
        out += picked
    return out


def test_stratified_sample_verifies_equal(tvm, results, corpus):
    """Every operator strategy that fires on the corpus: 3 of its neighbours (on 3 programs where it
    fires on 3) verify Equal on 3 trials. The larger sample is the long test below, >= 500 the slow one.

    Known lowering gap: a reduction whose output is indexed by a split axis (``f*2+tx``)
    does not build yet (lowering cannot express its T.init); reported, counted apart.
    """
    sample = _stratified(results, corpus, 3, 300_000)
    fired = {n.provenances[0].strategy for p in corpus if _points(p) <= 300_000 for n in results[p.name].neighbours}
    assert {n.provenances[0].strategy for _, n in sample} == fired and len(fired) >= 8
    equal, gap, bad = _verify_sample(sample)
    assert not bad, bad
    assert equal + len(gap) == len(sample) and equal >= 2 * len(fired)


@pytest.mark.long
def test_sample_verifies_equal(tvm, results, corpus):
    """One neighbour of every strategy on every corpus program up to 300k points verifies Equal on 3
    trials (reduced; the slow test has >= 500)."""
    equal, gap, bad = _verify_sample(_sample(results, corpus, 1, 300_000))
    assert not bad, bad
    assert equal >= 50


@pytest.mark.slow
def test_sample_of_500_verifies_equal(tvm, results, corpus):
    equal, gap, bad = _verify_sample(_sample(results, corpus, 4, 2_000_000))
    assert not bad, bad
    assert equal >= 500


def test_repeated_multi_strategy_queries(corpus):
    """Regression: a multi-strategy subset queried a second time used to panic in egglog
    (its combined ruleset had been declared inside a query's push and lost at the pop)."""
    eng = Enumerator()
    names = [s.name for s in eng.book.strategies]
    subsets = [["loop_split", "loop_reorder"], names[:6], names[-5:], ["online_softmax", "loop_unrolling"], None]
    first = {}
    for rnd in range(2):
        for s in subsets:
            for p in corpus[:4]:
                texts = [n.leir for n in eng.enumerate(p, s).neighbours]
                key = (tuple(s or ()), p.name)
                if rnd == 0:
                    first[key] = texts
                else:
                    assert texts == first[key], key
    assert sum(len(v) for v in first.values()) > 100
    assert eng._depth == 0


def test_placeholders_resolved_in_provenance():
    """Fresh-name placeholders never leak into parameters: they carry the name in the body."""
    from engine.leir.files import load_program
    eng = Enumerator()
    p = load_program(str(ROOT / "examples" / "softmax.leir"))
    nbs = eng.enumerate(p, ["normal_loop_max_to_prefix_max"], validate=True).neighbours
    assert nbs
    for nb in nbs:
        for pv in nb.provenances:
            assert not any(isinstance(v, str) and v.startswith("#") for _, v in pv.params.items()), pv.params
        prefix = dict(nb.provenances[0].params)["prefix"]
        assert prefix in nb.fresh_names.values() and f"{prefix}^{{" in nb.leir
        assert "#" not in json.dumps(nb.to_json())
    r = subprocess.run([sys.executable, "-m", "engine.enumerate", str(ROOT / "examples" / "softmax.leir"),
                        "--strategy", "normal_loop_max_to_prefix_max"], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0 and "prefix=" in r.stdout and "#" not in r.stdout


def test_undeclared_fact_relation_is_a_clear_error(tmp_path, corpus):
    """A Python fact naming a relation no rule file declares is reported, not an egglog panic."""
    from engine.leir.diagnostics import LeirError
    values = copy_schema(tmp_path) / "values.egg"
    text = values.read_text()
    assert "(relation FirstUse (Item String))" in text
    values.write_text(text.replace("(relation FirstUse (Item String))", ""))
    shutil.copy(ROOT / "rules" / "operator.egg", tmp_path / "operator.egg")
    eng = Enumerator(tmp_path)
    with pytest.raises(LeirError, match="'FirstUse', which no rule file declares"):
        eng.enumerate(corpus[0])
    assert eng._depth == 0


def test_name_map_shortcut_matches_full_evaluation(corpus):
    """engine.compute returns a term that does not mention a Sub*/Scope*/Swap*/Split* helper's
    name argument unchanged without evaluating the helper's rules on it; with the shortcut
    disabled every neighbour (text and provenance) must be the same."""
    from engine.rewrite.compute import NAME_MAPS, ComputeRules, HelperEvaluator
    from engine.rewrite.terms import Interner, encode

    fast = Enumerator()
    slow = Enumerator(rulebook=fast.book)
    slow.compute = ComputeRules((t for _, t in slow.book.programs()), shortcuts=False)
    # one program of each family (the first of each; the unfiltered slice picked six matmuls, two twice)
    picked = [next(p for p in corpus if s in p.name) for s in ("Conv", "Softmax", "Matmul", "Gemm")]
    hits = 0
    for p in picked:
        a = [(n.leir, [q.to_json() for q in n.provenances]) for n in fast.enumerate(p).neighbours]
        b = [(n.leir, [q.to_json() for q in n.provenances]) for n in slow.enumerate(p).neighbours]
        assert a == b, p.name
        hits += len(a)
    assert hits > 500
    assert fast.compute_fallbacks == slow.compute_fallbacks == 0
    assert set(NAME_MAPS) <= set(fast.compute.generated)
    # the name sets the shortcut relies on
    interner = Interner()
    enc = encode(corpus[0].body, interner)
    ev = HelperEvaluator(fast.compute, interner)
    vs, ts = ev.names(enc.root)
    from engine.leir.ast import walk, Var, Ref
    want_v, want_t = set(), set()
    for _, eq in equations(corpus[0].body):
        for e in (eq.lhs, eq.rhs):
            for x in walk(e):
                if isinstance(x, Var):
                    want_v.add(x.name)
                elif isinstance(x, Ref):
                    want_t.add(x.name)
    assert (set(vs), set(ts)) == (want_v, want_t) and want_v and want_t
