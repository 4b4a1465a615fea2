"""Acceptance (issues 3 and 4): every one-step neighbour of every corpus program, under all
strategies, is valid (passes the semantic checks), re-parses from its canonical text to the
same program, and lowers to TVMScript that TVM parses (llvm); a sample also lowers for CUDA
and builds to CUDA C source.

The full sweep (about 55,000 neighbours; ``tvm.script.from_source`` dominates at ~50 ms each)
is ``slow``. The default run checks a deterministic stratified subset: a few neighbours of
every rule of every strategy that fires on the corpus, taken evenly from the corpus order.
A failure names the strategy, rule, program and neighbour text.
"""
from __future__ import annotations

import functools
from collections import defaultdict

import pytest

from conftest import corpus_records

PER_RULE = 4          # default run: neighbours per (strategy, rule)
CUDA_PER_STRATEGY = 1  # default run: CUDA lowering and build per strategy
# Eight strategies never fire on a corpus program: seven math identities whose patterns no
# corpus expression contains, and S43, which rewrites the fused prefix nest online_softmax
# produces. HANDWRITTEN gives each of them a site, so every strategy's neighbours are checked.
NOT_ON_CORPUS = {"collect", "expand_cancellation", "expand_log", "factorization", "logsimp", "powsimp",
                 "together", "normal_matmul_to_prefix_matmul_based_on_online_softmax"}
_MATH_RHS = ("A^{f32,g}_{tx,a}/C^{f32,g}_{tx,a}+K^{f32,g}_{tx,a}/C^{f32,g}_{tx,a}",
             "A^{f32,g}_{tx,a}*C^{f32,g}_{tx,a}+K^{f32,g}_{tx,a}*C^{f32,g}_{tx,a}",
             "exp(A^{f32,g}_{tx,a})*exp(K^{f32,g}_{tx,a})",
             "log(exp(A^{f32,g}_{tx,a}))+log(exp(K^{f32,g}_{tx,a}))",
             "log(exp(A^{f32,g}_{tx,a})*exp(K^{f32,g}_{tx,a}))",
             "(exp(2*A^{f32,g}_{tx,a})-1)/(exp(2*A^{f32,g}_{tx,a})+1)")
# attention (softmax over c, then O = W*K contracted over it), as in tests/test_rules_attention.py
_ATT = ("B^{2}_{tx=0}L^{6}_{a=0}L^{5}_{c=0}[Q^{f32,g}_{tx,a}=max(Q^{f32,g}_{tx,a},S^{f32,g}_{tx,a,c});];"
        "B^{2}_{tx=0}L^{6}_{a=0}L^{5}_{c=0}[R^{f32,g}_{tx,a}=R^{f32,g}_{tx,a}+exp(S^{f32,g}_{tx,a,c}-Q^{f32,g}_{tx,a});];"
        "B^{2}_{tx=0}L^{6}_{a=0}L^{5}_{c=0}[W^{f32,g}_{tx,a,c}=exp(S^{f32,g}_{tx,a,c}-Q^{f32,g}_{tx,a})/R^{f32,g}_{tx,a};];"
        "B^{2}_{tx=0}L^{6}_{a=0}L^{3}_{c=0}L^{5}_{d=0}[O^{f32,g}_{tx,a,c}=O^{f32,g}_{tx,a,c}+W^{f32,g}_{tx,a,d}*K^{f32,g}_{tx,d,c};];")


@functools.lru_cache(maxsize=None)
def handwritten() -> tuple:
    """Programs on which the NOT_ON_CORPUS strategies fire: the math identities side by side,
    and the attention program after online_softmax (S43's input)."""
    from rulekit import prog_f32
    names = "DEFGHI"
    body = "".join(f"B^{{4}}_{{tx=0}}L^{{8}}_{{a=0}}[{names[k]}^{{f32,g}}_{{tx,a}}={r};];"
                   for k, r in enumerate(_MATH_RHS))
    math = prog_f32(body, [(n, [4, 8]) for n in "ACK"], [(names[k], [4, 8]) for k in range(len(_MATH_RHS))],
                    name="math_identities")
    att = prog_f32(_ATT, [("S", [2, 6, 5]), ("K", [2, 5, 3])], [("O", [2, 6, 3])], name="attention")
    online = _engine().enumerate(att, ["online_softmax"]).neighbours
    assert len(online) == 1
    return math, att, online[0].program


@functools.lru_cache(maxsize=None)
def _engine():
    from engine.enumerate import Engine
    return Engine()


@functools.lru_cache(maxsize=None)
def corpus_programs() -> tuple:
    from engine.files import program_from_json
    return tuple(program_from_json(r) for r in corpus_records())


@functools.lru_cache(maxsize=None)
def corpus_groups() -> dict:
    """{(strategy, rule): [(program, neighbour), ...]} in corpus order, then ``handwritten()`` (neighbours in engine
    order); a neighbour obtained several ways is listed under each of its provenances."""
    groups = defaultdict(list)
    for p in corpus_programs() + handwritten():
        for nb in _engine().enumerate(p).neighbours:
            for key in dict.fromkeys((pv.strategy, pv.rule) for pv in nb.raw_provenances):
                groups[key].append((p, nb))
    return dict(groups)


def spread(items: list, n: int) -> list:
    """n items taken evenly over ``items`` (first and last included when n >= 2)."""
    if len(items) <= n:
        return list(items)
    return [items[round(k * (len(items) - 1) / (n - 1))] for k in range(n)] if n > 1 else items[:1]


def check(p, nb, target: str = "llvm") -> str | None:
    """None if the neighbour is valid, re-parses to itself and lowers; else what failed."""
    from engine.diagnostics import LeirError
    from engine.enumerate import InvalidNeighbour
    from engine.parser import parse_body
    from lowering.errors import LoweringError
    from lowering.tir import from_tvmscript, lower_to_tvmscript
    try:
        q = nb.program
    except InvalidNeighbour as e:
        return f"invalid: {e}"
    try:
        again = p.with_body(parse_body(nb.leir))
    except LeirError as e:
        return f"canonical text does not re-parse: {e.message}"
    if again.body != q.body or again.leir != nb.leir:
        return "canonical text re-parses to a different program"
    try:
        from_tvmscript(lower_to_tvmscript(q, target))
    except LoweringError as e:
        return f"{target} lowering: {e}"
    return None


def _failures(pairs, target="llvm") -> list:
    bad = []
    for (strategy, rule), p, nb in pairs:
        err = check(p, nb, target)
        if err is not None:
            bad.append((strategy, rule, p.name, err, nb.leir[:300]))
    return bad


@pytest.fixture(scope="module")
def groups():
    if not corpus_records():
        pytest.skip("corpus not available")
    return corpus_groups()


def test_spread_is_deterministic_and_covers_both_ends():
    assert spread(list(range(10)), 3) == [0, 4, 9] and spread(list(range(9)), 3) == [0, 4, 8]
    assert spread(list(range(10)), 1) == [0] and spread([1, 2], 5) == [1, 2]


def test_every_strategy_fires_on_the_corpus_or_a_handwritten_program(groups):
    from engine.rulebook import load_rulebook
    strategies = {s.name for s in load_rulebook().strategies}
    fired = {s for s, _ in groups}
    assert fired == strategies, sorted(strategies - fired)
    hand = {id(p) for p in handwritten()}
    on_corpus = {s for (s, _), items in groups.items() if any(id(p) not in hand for p, _ in items)}
    assert strategies - on_corpus == NOT_ON_CORPUS


def test_stratified_sample_is_valid_reparses_and_lowers(groups, tvm):
    sample = [(key, p, nb) for key in sorted(groups) for p, nb in spread(groups[key], PER_RULE)]
    assert len(sample) >= 200 and len({k[0] for k, _, _ in sample}) == len({s for s, _ in groups})
    assert _failures(sample) == []


def test_stratified_sample_lowers_and_builds_for_cuda(groups, tvm):
    """Bound (B) loops become blockIdx/threadIdx bindings: the TIR must pass TVM's CUDA build
    (thread-binding and memory-scope checks), which needs neither a GPU nor nvcc."""
    from lowering.tir import cuda_source
    by_strategy = defaultdict(list)
    for (strategy, rule) in sorted(groups):
        by_strategy[strategy] += [((strategy, rule), p, nb) for p, nb in groups[(strategy, rule)]]
    sample = [x for s in sorted(by_strategy) for x in spread(by_strategy[s], CUDA_PER_STRATEGY)]
    assert _failures(sample, "cuda") == []
    for _, _, nb in sample:
        assert "__global__" in cuda_source(nb.program)


@pytest.mark.slow
def test_every_corpus_neighbour_is_valid_reparses_and_lowers(groups, tvm):
    """The full sweep: validate=True reports no invalid neighbour on any corpus program, and
    every neighbour re-parses to itself and lowers for llvm (about 55,000 neighbours)."""
    invalid, bad = [], []
    for p in corpus_programs() + handwritten():
        res = _engine().enumerate(p, validate=True)
        invalid += [(i.provenance.strategy, i.provenance.rule, p.name, i.error) for i in res.invalid]
        for nb in res.neighbours:
            err = check(p, nb)
            if err is not None:
                pv = nb.raw_provenances[0]
                bad.append((pv.strategy, pv.rule, p.name, err, nb.leir[:300]))
    assert invalid == []
    assert bad == []
