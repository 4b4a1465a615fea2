"""Acceptance: one-step neighbours from the rule engine compute what their source program computes.

For a deterministic, seeded, strategy-stratified sample of neighbours, ``lowering.verify``
must report Equal on 3 trials: bitwise-exact strategies with no tolerance at all
(``tolerance="exact"``), reassociating ones within the documented strict bound.

Programs: the corpus programs, each shrunk to at most ``POINT_LIMIT`` iteration points by
``shrink_program`` (small ones are kept as they are), plus the shrunk ``examples/``. The two
>= 500-neighbour samples of the issues are ``slow``; the default run checks a stratified
sample of about 60.

A failure is a bug in a rule, a guard or the lowering. Known rule bugs are listed in
``KNOWN_RULE_BUGS`` (each pinned by an ``xfail(strict=True)`` test below, so a fix shows up
as an unexpected pass); any other failure fails the sample test with its strategy, rule,
program and error.
"""
from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, replace

import pytest

from engine.leir.files import load_programs, program_from_json
from engine.rewrite.sampling import stratified_sample as _stratified
from lowering import tolerance_for
from conftest import EXAMPLES, corpus_records
from dataset.generate.shrink import POINT_LIMIT, points, shrink_program, size_map

SEED = 20240611
TRIALS = 3


# --------------------------------------------------------------------------- shrinking


def _prog(leir, inputs, outputs, name="t"):
    """A program from LEIR text and {name: (dtype, shape)} declarations."""
    decl = lambda d: [{"name": n, "dtype": t, "shape": list(s)} for n, (t, s) in d.items()]  # noqa: E731
    return program_from_json({"name": name, "inputs": decl(inputs), "outputs": decl(outputs), "leir": leir})



@functools.lru_cache(maxsize=None)
def sample_programs() -> tuple:
    """Shrunk corpus programs then shrunk examples, in file order (names made unique)."""
    out, names = [], set()
    sources = [program_from_json(r) for r in corpus_records()]
    for f in sorted(EXAMPLES.glob("*.leir")):
        sources += [replace(p, name=f"example_{p.name}") for p in load_programs(f)]
    for p in sources:
        q = shrink_program(p)
        if q is not None and q.name not in names:
            names.add(q.name)
            out.append(q)
    return tuple(out)


# Equation shapes the corpus lacks, so that every math strategy gets neighbours: each is the
# RHS of F_{tx,a} over inputs A, C, D, G of shape [4, 8] (the strategy it feeds in the comment).
_X, _Y, _Z, _W = ("A^{f32,g}_{tx,a}", "C^{f32,g}_{tx,a}", "D^{f32,g}_{tx,a}", "G^{f32,g}_{tx,a}")
PROBE_RHS = (
    f"{_X}/2+{_Y}/2",                                          # factorization, together
    f"(exp(2*{_X})-1)/(exp(2*{_X})+1)",                        # expand_cancellation
    f"(exp({_X})-exp(-{_X}))/(exp({_X})+exp(-{_X}))",          # cancellation
    f"{_W}*(({_X}-{_Y})/sqrt({_Z}+1e-05))+{_Y}",               # together (norm-layer shape)
    f"exp({_X})*exp(-{_Y})",                                   # powsimp
    f"{_X}**2*{_X}**3",                                        # expand_powsimp
    f"2*{_X}+3*{_X}",                                          # collect
    f"(({_X}+{_Y})*({_X}-{_Y}))",                              # expand_collect, expand_factorization
    f"log(exp({_X})+1)+log(exp({_Y})+1)",                      # logsimp (positive arguments)
    f"log((exp({_X})+1)*(exp({_Y})+1))",                       # expand_log
)


@functools.lru_cache(maxsize=None)
def probe_programs() -> tuple:
    """The PROBE_RHS programs, then the online-softmax step of the shrunk attention example
    (the form normal_matmul_to_prefix_matmul_based_on_online_softmax rewrites)."""
    out = []
    for k, rhs in enumerate(PROBE_RHS):
        ins = {n: ("f32", (4, 8)) for n in "ACDG" if f"{n}^" in rhs}
        out.append(_prog(f"B^{{4}}_{{tx=0}}L^{{8}}_{{a=0}}[F^{{f32,g}}_{{tx,a}}={rhs};];", ins,
                         {"F": ("f32", (4, 8))}, name=f"probe_{k}"))
    att = [p for p in sample_programs() if p.name == "example_attention"]
    if att:
        step = engine().enumerate(att[0], strategies=["online_softmax"]).neighbours
        if step:
            out.append(replace(step[0].program, name="example_attention_online_softmax"))
    return tuple(out)


# --------------------------------------------------------------------------- sampling


@dataclass(frozen=True)
class Item:
    """One neighbour of one program, attributed to one of the ways it was obtained."""

    program: object
    neighbour: object
    strategy: str
    rule: str
    params: tuple
    exactness: str

    def describe(self) -> str:
        return (f"strategy {self.strategy}, rule {self.rule}, program {self.program.name}, "
                f"params {dict(self.params)}")


@functools.lru_cache(maxsize=1)
def engine():
    from engine.rewrite.enumerator import Enumerator
    return Enumerator()


@functools.lru_cache(maxsize=None)
def all_items() -> tuple:
    """Every (neighbour, provenance) of every sample program, in a deterministic order."""
    eng = engine()
    items = []
    for p in sample_programs() + probe_programs():
        en = eng.enumerate(p)  # all strategies in one call
        for n in sorted(en.neighbours, key=lambda n: n.leir):
            for pr in n.provenances:
                items.append(Item(p, n, pr.strategy, pr.rule, pr.params, pr.exactness))
    return tuple(items)


def groups() -> dict[str, tuple[str, ...]]:
    """The issues' two strategy sets: graph+operator (without DCE), memory+math(+attention)+DCE."""
    strategies = engine().book.strategies
    return {"graph_operator": tuple(s.name for s in strategies
                                    if s.category in ("graph", "operator") and s.name != "dead_code_elimination"),
            "memory_math_dce": tuple(s.name for s in strategies
                                     if s.category in ("memory", "math") or s.name == "dead_code_elimination")}


def stratified_sample(items, strategies, n: int, seed: int = SEED) -> list[Item]:
    """``n`` items spread over ``strategies`` and, within a strategy, over programs
    (``engine.rewrite.sampling``)."""
    return _stratified(items, n, seed, strategies=strategies, group_of=lambda it: it.program.name)


# --------------------------------------------------------------------------- checking

# Rule bugs found by the samples (the rule files belong to their authors). Keyed by
# (strategy, rule, text of the failure); the value is (a sample program showing it, why).
# A failure matches an entry only when the strategy, the rule and the failure text match.
# Each entry is pinned by an xfail(strict=True) test, so a fix is reported as XPASS.
KNOWN_RULE_BUGS: dict[tuple[str, str, str], tuple[str, str]] = {
}


def known_bug(failure: dict):
    """The KNOWN_RULE_BUGS key a failure record matches, or None."""
    for key in KNOWN_RULE_BUGS:
        strategy, rule, text = key
        if failure["strategy"] == strategy and failure["rule"] == rule and text in failure["error"]:
            return key
    return None


def check(item: Item) -> dict | None:
    """None when the neighbour verifies Equal on TRIALS trials, else a failure record."""
    from engine.rewrite.enumerator import InvalidNeighbour
    from lowering.verify import verify
    fail = {"strategy": item.strategy, "rule": item.rule, "program": item.program.name,
            "params": dict(item.params), "exactness": item.exactness}
    try:
        cand = item.neighbour.program
    except InvalidNeighbour as e:
        return {**fail, "error": f"invalid neighbour: {e}"}
    tolerance = tolerance_for(item.exactness)
    r = verify(item.program, cand, trials=TRIALS, seed=0, tolerance=tolerance)
    if r.ok and r.equal:
        return None
    if r.error is not None:
        err = f"{r.error['stage']} of the {r.error['program']}: {r.error['message']}"
    else:
        err = f"not equal ({tolerance}): max_abs_err {r.max_abs_err:.3g}, max_rel_err {r.max_rel_err:.3g}"
    return {**fail, "error": err, "candidate": cand.to_leir(), "original": item.program.to_leir()}


def run_sample(sample: list[Item]) -> tuple[list[dict], list[dict]]:
    """(unexpected failures, known rule bugs hit), verifying in program order to reuse builds."""
    from lowering.run import clear_build_cache
    unexpected, known = [], []
    last = None
    for it in sorted(sample, key=lambda it: it.program.name):
        if it.program.name != last:
            clear_build_cache()
            last = it.program.name
        f = check(it)
        if f is None:
            continue
        (known if known_bug(f) else unexpected).append(f)
    return unexpected, known


def _report(unexpected, known) -> str:
    lines = [f"{len(unexpected)} unexpected failure(s):"]
    for f in unexpected:
        lines.append(f"  {f['strategy']} / {f['rule']} on {f['program']} {f['params']}: {f['error']}")
        if "candidate" in f:
            lines.append(f"    original:  {f['original']}")
            lines.append(f"    candidate: {f['candidate']}")
    for f in known:
        lines.append(f"  known rule bug: {f['strategy']} / {f['rule']} on {f['program']}: {f['error']}")
    return "\n".join(lines)


def _assert_sample(sample, strategies, minimum):
    unexpected, known = run_sample(sample)
    covered = sorted({it.strategy for it in sample})
    yielding = sorted({it.strategy for it in all_items() if it.strategy in strategies})
    print(f"\n{len(sample)} neighbours over {len(covered)} strategies "
          f"({sum(it.exactness == 'bitwise' for it in sample)} bitwise-exact); "
          f"no neighbours in the sample programs: {sorted(set(strategies) - set(yielding)) or 'none'}; "
          f"known rule bugs hit: {len(known)}")
    assert len(sample) >= minimum
    assert covered == yielding
    assert not unexpected, _report(unexpected, known)


# --------------------------------------------------------------------------- tests: shrinking


def test_size_map_keeps_small_sizes_and_offsets():
    phi = size_map(64)
    assert [phi(v) for v in (1, 3, 16)] == [1, 3, 16]
    assert [phi(v) for v in (128, 130, 126, 256, 258, 1024)] == [2, 4, 0, 4, 6, 16]
    assert phi(3999) == phi(4000) - 1
    assert size_map(16)(126) == 6 and size_map(16)(130) == 10


def test_shrink_matmul_is_consistent_and_small():
    p = _prog("B^{128}_{tx=0}L^{192}_{a=0}L^{256}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];",
              {"A": ("f32", (128, 256)), "C": ("f32", (256, 192))}, {"D": ("f32", (128, 192))})
    q = shrink_program(p)
    # g = 2 and 4 leave more than POINT_LIMIT points; g = 8 gives 16*24*32 = 12288
    assert q.to_leir() == ("B^{16}_{tx=0}L^{24}_{a=0}L^{32}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+"
                           "A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];")
    assert [d.shape for d in q.known] == [(16, 32), (32, 24), (16, 24)]
    assert shrink_program(p, limit=24).to_leir().startswith("B^{2}_{tx=0}L^{3}_{a=0}L^{4}_{c=0}[")
    assert q.info.equations[0].eq.init == "0"
    assert shrink_program(q) is q                                    # already small: unchanged


def test_shrink_keeps_padding_and_stride_relations():
    # a padded copy (130 = 128 + 2 guarded by 1<=c<129) and a stride-2 pool over it
    p = _prog("B^{4}_{tx=0}L^{130}_{c=0}[H^{f32,g}_{tx,c}=if_then_else(1<=c<129,A^{f32,g}_{tx,c-1},0);];"
              "B^{4}_{tx=0}L^{65}_{c=0}L^{2}_{f=0}[C^{f32,g}_{tx,c}=C^{f32,g}_{tx,c}+H^{f32,g}_{tx,c*2+f};];",
              {"A": ("f32", (4, 128))}, {"C": ("f32", (4, 65))})
    q = shrink_program(p, limit=200)
    assert q is not None and points(q) <= 200
    n = q.inputs[0].shape[1]
    assert q.body[0].loops[1].extent == n + 2 and q.body[1].loops[1].extent * 2 == n + 2
    assert f"1<=c<{n + 1}" in q.to_leir()


def test_shrink_gives_up_rather_than_inventing_an_invalid_program():
    # the offset 16 is a kept size, so A (40 = 24 + 16) cannot shrink along with the loop
    p = _prog("L^{24}_{c=0}[C^{f32,g}_{c}=A^{f32,g}_{c+16};];", {"A": ("f32", (40,))}, {"C": ("f32", (24,))})
    assert shrink_program(p, limit=10) is None
    assert shrink_program(p, limit=24) is p


def test_sample_programs_cover_the_corpus():
    progs = sample_programs()
    if not corpus_records():
        pytest.skip("corpus not available")
    assert len(progs) >= 80 and all(points(p) <= POINT_LIMIT for p in progs)
    assert any(p.name.startswith("example_") for p in progs)
    assert len({p.name for p in progs}) == len(progs)


def test_stratified_sample_is_deterministic_and_spread():
    items = all_items()
    strategies = sorted({it.strategy for it in items})
    a = stratified_sample(items, strategies, 60)
    b = stratified_sample(items, strategies, 60)
    assert [(it.program.name, it.neighbour.leir, it.rule) for it in a] == \
           [(it.program.name, it.neighbour.leir, it.rule) for it in b]
    assert len(a) == 60
    per = defaultdict(int)
    for it in a:
        per[it.strategy] += 1
    assert max(per.values()) - min(per.values()) <= 1 and len(per) == min(60, len(strategies))
    assert stratified_sample(items, strategies, 60, seed=1) != a


# --------------------------------------------------------------------------- tests: verification


@pytest.mark.long
def test_default_stratified_sample_verifies_equal(tvm):
    items = all_items()
    strategies = [s.name for s in engine().book.strategies]
    sample = stratified_sample(items, strategies, 60)
    _assert_sample(sample, strategies, 60)


@pytest.mark.slow
def test_graph_and_operator_sample_of_500_verifies_equal(tvm):
    strategies = groups()["graph_operator"]
    _assert_sample(stratified_sample(all_items(), strategies, 500, seed=SEED + 1), strategies, 500)


@pytest.mark.slow
def test_memory_math_attention_dce_sample_of_500_verifies_equal(tvm):
    strategies = groups()["memory_math_dce"]
    _assert_sample(stratified_sample(all_items(), strategies, 500, seed=SEED + 2), strategies, 500)


@pytest.mark.parametrize("key", sorted(KNOWN_RULE_BUGS), ids=lambda k: k[1])
@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="known rule bug (KNOWN_RULE_BUGS); the rule files belong to their authors")
def test_known_rule_bug_is_still_present(tvm, key):
    strategy, rule, text = key
    program, why = KNOWN_RULE_BUGS[key]
    items = [it for it in all_items() if (it.strategy, it.rule, it.program.name) == (strategy, rule, program)]
    if not items:
        pytest.fail(f"{rule} no longer yields neighbours of {program}: re-pin this known bug on another program")
    failures = [f for f in map(check, items) if f is not None]
    assert not failures, f"{why}\n" + _report(failures, [])
