"""Graph-level strategies (rules/graph.egg): exact before/after per rule, guard rejections,
inverse pairs, corpus validity and coverage, determinism, numerical equivalence."""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace

import pytest

from conftest import COVERAGE, corpus_records
from engine.leir.ast import Nest
from engine.leir.diagnostics import LeirError
from engine.rewrite.enumerator import Enumerator
from engine.leir.files import program_from_json
from engine.leir.parser import parse_body
from engine.leir.program import make_program
from rulekit import assert_all_equal, prog, stratified

GRAPH = ("operator_fusion", "operator_fission", "compute_inline", "expression_splitting",
         "common_subexpression_elimination", "expression_reorder")


@pytest.fixture(scope="module")
def engine():
    return Enumerator()


def leirs(engine, p, strategy):
    return [nb.leir for nb in engine.enumerate(p, strategies=[strategy], validate=True).neighbours]


F = "f32"
# --------------------------------------------------------------------------- before / expected
MAP2 = ("B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*C^{f32,g}_{tx,a};];"
        "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx,a}=1-D^{f32,g}_{tx,a};];")
IO2 = ({"A": (F, [4, 8]), "C": (F, [4, 8])}, {"E": (F, [4, 8])})
FUSED = "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*C^{f32,g}_{tx,a};E^{f32,g}_{tx,a}=1-D^{f32,g}_{tx,a};];"
INLINED = "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx,a}=1-A^{f32,g}_{tx,a}*C^{f32,g}_{tx,a};];"

SOFTMAX = ("B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
           "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];"
           "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];")
IOS = ({"A": (F, [4, 8])}, {"C": (F, [4, 8])})


def test_operator_fusion_before_expected(engine):
    assert leirs(engine, prog(MAP2, *IO2), "operator_fusion") == [FUSED]


def test_operator_fission_before_expected(engine):
    assert leirs(engine, prog(FUSED, *IO2), "operator_fission") == [MAP2]


def test_compute_inline_before_expected(engine):
    assert leirs(engine, prog(MAP2, *IO2), "compute_inline") == [INLINED]


def test_compute_inline_substitutes_indices_simultaneously(engine):
    # the consumer reads the producer transposed: tx:=a and a:=tx at once, never A_{tx,tx}
    body = ("B^{4}_{tx=0}L^{4}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}+1;];"
            "B^{4}_{tx=0}L^{4}_{a=0}[E^{f32,g}_{tx,a}=D^{f32,g}_{a,tx}*2;];")
    p = prog(body, {"A": (F, [4, 4])}, {"E": (F, [4, 4])})
    assert leirs(engine, p, "compute_inline") == \
        ["B^{4}_{tx=0}L^{4}_{a=0}[E^{f32,g}_{tx,a}=(A^{f32,g}_{a,tx}+1)*2;];"]


def test_expression_splitting_before_expected(engine):
    out = leirs(engine, prog(SOFTMAX, *IOS), "expression_splitting")
    assert ("B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
            "B^{4}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];"
            "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+F^{f32,g}_{tx,a};];"
            "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];") in out
    assert len(out) == 4  # exp(..) and A-D, in each of the two statements; never the accumulator


def test_expression_splitting_keeps_only_used_loops_in_nest_order(engine):
    body = "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*exp(C^{f32,g}_{a});];"
    p = prog(body, {"A": (F, [4, 8]), "C": (F, [8])}, {"E": (F, [4, 8])})
    assert leirs(engine, p, "expression_splitting") == [
        "L^{8}_{a=0}[D^{f32,g}_{a}=exp(C^{f32,g}_{a});];B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*D^{f32,g}_{a};];"]


def test_cse_before_expected(engine):
    assert leirs(engine, prog(SOFTMAX, *IOS), "common_subexpression_elimination") == [
        "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
        "B^{4}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}-D^{f32,g}_{tx};];"
        "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(F^{f32,g}_{tx,a});];"
        "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=exp(F^{f32,g}_{tx,a})/E^{f32,g}_{tx};];",
        "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
        "B^{4}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];"
        "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+F^{f32,g}_{tx,a};];"
        "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=F^{f32,g}_{tx,a}/E^{f32,g}_{tx};];"]


# A guarded read: A_{c-1} is read only where c-1 >= 0. The walks of the dataset reach such states
# (a multiplicative split by a neighbour); moving the branch out would read A_{-1}.
GUARDED = "L^{8}_{c=0}[D^{f32,g}_{c}=A^{f32,g}_{c}*if_then_else(c-1<0,1,A^{f32,g}_{c-1}+1);];"
GUARD_ONLY = "L^{8}_{c=0}[E^{f32,g}_{c}=if_then_else(c-1<0,1,A^{f32,g}_{c-1}+1);];"


def test_nothing_moves_out_of_a_guarded_branch(engine):
    split = prog(GUARDED, {"A": (F, [8])}, {"D": (F, [8])})
    assert leirs(engine, split, "expression_splitting") == [
        GUARD_ONLY.replace("E^", "C^") + "L^{8}_{c=0}[D^{f32,g}_{c}=A^{f32,g}_{c}*C^{f32,g}_{c};];"]
    twice = prog(GUARDED + "L^{8}_{c=0}[C^{f32,g}_{c}=D^{f32,g}_{c}+if_then_else(c-1<0,1,A^{f32,g}_{c-1}+1);];",
                 {"A": (F, [8])}, {"C": (F, [8])})
    for strategy in ("expression_splitting", "common_subexpression_elimination"):
        en = engine.enumerate(twice, strategies=[strategy], validate=True)
        assert en.invalid == [], strategy
        assert all("=A^{f32,g}_{c-1}+1;" not in nb.leir for nb in en.neighbours), strategy
    assert leirs(engine, twice, "common_subexpression_elimination") == [
        GUARD_ONLY + "L^{8}_{c=0}[D^{f32,g}_{c}=A^{f32,g}_{c}*E^{f32,g}_{c};];"
        "L^{8}_{c=0}[C^{f32,g}_{c}=D^{f32,g}_{c}+E^{f32,g}_{c};];"]


def test_a_branch_under_a_value_condition_moves_out(engine):
    # A_{c} > 0 narrows no loop range: exp(A_{c}) is read in bounds at every iteration (ELU's form)
    p = prog("L^{8}_{c=0}[D^{f32,g}_{c}=if_then_else(A^{f32,g}_{c}>0,A^{f32,g}_{c},exp(A^{f32,g}_{c})-1);];",
             {"A": (F, [8])}, {"D": (F, [8])})
    out = leirs(engine, p, "expression_splitting")
    assert "L^{8}_{c=0}[C^{f32,g}_{c}=exp(A^{f32,g}_{c});];" \
           "L^{8}_{c=0}[D^{f32,g}_{c}=if_then_else(A^{f32,g}_{c}>0,A^{f32,g}_{c},C^{f32,g}_{c}-1);];" in out


def test_expression_reorder_before_expected(engine):
    body = ("B^{4}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];"
            "B^{4}_{tx=0}[E^{f32,g}_{tx}=A^{f32,g}_{tx}+1;];"
            "B^{4}_{tx=0}[F^{f32,g}_{tx}=D^{f32,g}_{tx}+E^{f32,g}_{tx};];")
    p = prog(body, {"A": (F, [4])}, {"F": (F, [4])})
    assert leirs(engine, p, "expression_reorder") == [
        "B^{4}_{tx=0}[E^{f32,g}_{tx}=A^{f32,g}_{tx}+1;];B^{4}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];"
        "B^{4}_{tx=0}[F^{f32,g}_{tx}=D^{f32,g}_{tx}+E^{f32,g}_{tx};];"]


def test_expression_reorder_disjoint_writes(engine):
    body = ("B^{4}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx};];B^{4}_{tx=0}[D^{f32,g}_{tx+4}=C^{f32,g}_{tx};];"
            "B^{8}_{tx=0}[E^{f32,g}_{tx}=D^{f32,g}_{tx};];")
    p = prog(body, {"A": (F, [4]), "C": (F, [4])}, {"E": (F, [8])})
    assert leirs(engine, p, "expression_reorder") == [
        "B^{4}_{tx=0}[D^{f32,g}_{tx+4}=C^{f32,g}_{tx};];B^{4}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx};];"
        "B^{8}_{tx=0}[E^{f32,g}_{tx}=D^{f32,g}_{tx};];"]


# --------------------------------------------------------------------------- guards reject
NEGATIVE = [
    # fusion: the reduction D is complete only after all a; E reads it at every a
    ("operator_fusion", SOFTMAX, IOS),
    # fusion: a loop-carried read of the previous a (stmt 2 reads D_{tx,a-1}... via shifted index)
    ("operator_fusion", "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
                        "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx,a}=D^{f32,g}_{tx,7-a};];", IO2[0:1] + ({"E": (F, [4, 8])},)),
    # fusion: different loop nests
    ("operator_fusion", "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
                        "L^{8}_{a=0}B^{4}_{tx=0}[E^{f32,g}_{tx,a}=D^{f32,g}_{tx,a};];", IO2[0:1] + ({"E": (F, [4, 8])},)),
    # fission: the second equation reads the first one's reduction (argmax-like dependence)
    ("operator_fission", "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});"
                         "E^{f32,g}_{tx,a}=D^{f32,g}_{tx};];", ({"A": (F, [4, 8])}, {"E": (F, [4, 8])})),
    # inline: the producer is the reduction D (update) and E is read twice later by C (not a map)
    ("compute_inline", SOFTMAX, IOS),
    # inline: the consumer overwrites what the producer reads
    ("compute_inline", "B^{4}_{tx=0}[W^{f32,g}_{tx}=A^{f32,g}_{tx}+1;];B^{4}_{tx=0}[D^{f32,g}_{tx}=W^{f32,g}_{tx}*2;];"
                       "B^{4}_{tx=0}[W^{f32,g}_{tx}=W^{f32,g}_{tx}+D^{f32,g}_{tx};];B^{4}_{tx=0}[C^{f32,g}_{tx}=W^{f32,g}_{tx};];",
     ({"A": (F, [4])}, {"C": (F, [4])})),
    # splitting: the sub-expression would read the tensor the equation writes (no accumulator form)
    ("expression_splitting", "B^{4}_{tx=0}[E^{f32,g}_{tx}=A^{f32,g}_{tx};];"
                             "B^{4}_{tx=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}*2+exp(E^{f32,g}_{tx});];", ({"A": (F, [4])}, {"E": (F, [4])})),
    # CSE: the operand D changes between the two occurrences (in-place update in between)
    ("common_subexpression_elimination",
     "B^{4}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx}+1;];B^{4}_{tx=0}[E^{f32,g}_{tx}=exp(D^{f32,g}_{tx});];"
     "B^{4}_{tx=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+1;];B^{4}_{tx=0}[C^{f32,g}_{tx}=exp(D^{f32,g}_{tx})+E^{f32,g}_{tx};];",
     ({"A": (F, [4])}, {"C": (F, [4])})),
    # CSE: the same text means different extents of a in the two hosts
    ("common_subexpression_elimination",
     "L^{4}_{a=0}[D^{f32,g}_{a}=exp(A^{f32,g}_{a});];L^{2}_{a=0}[C^{f32,g}_{a}=exp(A^{f32,g}_{a})+D^{f32,g}_{a};];",
     ({"A": (F, [4])}, {"C": (F, [2])})),
    # reorder: write-after-write with an implicit init (reduction then its in-place bias add)
    ("expression_reorder",
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+A^{f32,g}_{tx,a};];B^{4}_{tx=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+1;];",
     ({"A": (F, [4, 8])}, {"C": (F, [4])})),
    # reorder: write-after-read
    ("expression_reorder",
     "B^{4}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx};];B^{4}_{tx=0}[E^{f32,g}_{tx}=D^{f32,g}_{tx};];"
     "B^{4}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];B^{4}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx}+E^{f32,g}_{tx};];",
     ({"A": (F, [4])}, {"C": (F, [4])})),
]


@pytest.mark.parametrize("strategy,body,io", NEGATIVE)
def test_guard_rejects(engine, strategy, body, io):
    p = prog(body, *io)
    out = leirs(engine, p, strategy)
    if strategy == "expression_reorder" and "E^{f32,g}_{tx}=D" in body:
        # only the unrelated middle pair may swap; never D's second write before E's read
        assert all(x.index("E^{f32,g}_{tx}=D") < x.index("D^{f32,g}_{tx}=A^{f32,g}_{tx}*2") for x in out)
    else:
        assert out == []


# --------------------------------------------------------------------------- inverse pairs


def test_fission_undoes_fusion_and_back(engine):
    p = prog(MAP2, *IO2)
    fused = engine.enumerate(p, strategies=["operator_fusion"]).neighbours[0].program
    assert leirs(engine, fused, "operator_fission") == [p.to_leir()]


def test_inline_undoes_splitting_and_back(engine):
    p = prog(SOFTMAX, *IOS)
    for nb in engine.enumerate(p, strategies=["expression_splitting"]).neighbours:
        assert p.to_leir() in leirs(engine, nb.program, "compute_inline")
    inl = prog(MAP2, *IO2)
    nb = engine.enumerate(inl, strategies=["compute_inline"]).neighbours[0].program
    assert inl.to_leir() in leirs(engine, nb, "expression_splitting")


def test_reorder_is_its_own_inverse(engine):
    body = "B^{4}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];B^{4}_{tx=0}[E^{f32,g}_{tx}=A^{f32,g}_{tx}+D^{f32,g}_{tx}*0;];"
    p = prog("B^{4}_{tx=0}[F^{f32,g}_{tx}=A^{f32,g}_{tx}*3;];" + body, {"A": (F, [4])}, {"E": (F, [4])})
    nb = engine.enumerate(p, strategies=["expression_reorder"]).neighbours[0].program
    assert p.to_leir() in leirs(engine, nb, "expression_reorder")


# --------------------------------------------------------------------------- corpus


def _corpus():
    return [program_from_json(r) for r in corpus_records()]


@pytest.fixture(scope="module")
def corpus_neighbours(engine):
    progs = _corpus()
    assert progs
    return {p.name: (p, engine.enumerate(p, strategies=list(GRAPH), validate=True)) for p in progs}


def test_every_corpus_neighbour_is_valid(corpus_neighbours):
    """Every neighbour re-analysed with check_inits (the engine does) and none was invalid."""
    total = 0
    for name, (p, res) in corpus_neighbours.items():
        assert res.invalid == [], (name, res.invalid[:1])
        for nb in res.neighbours:
            # the text, read back, implies exactly the inits the rule built
            again = make_program(p.name, p.inputs, p.outputs, parse_body(nb.leir))
            assert again.body == nb.program.body
            total += 1
    assert total > 500


def test_reference_coverage(corpus_neighbours):
    path = COVERAGE
    missing = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        p, res = corpus_neighbours[rec["name"]]
        have = {pv.strategy for nb in res.neighbours for pv in nb.provenances}
        missing += [(rec["name"], s) for s in rec["strategies"] if s in GRAPH and s not in have]
    assert missing == []


def test_enumeration_is_deterministic(corpus_neighbours):
    fresh = Enumerator()
    for name in sorted(corpus_neighbours)[::12]:  # 9 programs spread over the corpus
        p, res = corpus_neighbours[name]
        again = fresh.enumerate(p, strategies=list(GRAPH), validate=True)
        assert [json.dumps(n.to_json()) for n in again.neighbours] == [json.dumps(n.to_json()) for n in res.neighbours]


# --------------------------------------------------------------------------- numerical equivalence


def shrink(p):
    """The same program with every extent / dimension > 4 mapped to a small distinct size
    (order kept), or None when index constants tie the program to its real sizes."""
    ext = set()

    def scan(items):
        for n in items:
            if isinstance(n, Nest):
                ext.update(l.extent for l in n.loops)
                scan(n.body)
    scan(p.body)
    for d in p.known:
        ext.update(d.shape)
    m = {e: 5 + i for i, e in enumerate(sorted(e for e in ext if e > 4))}

    def fix(items):
        return tuple(replace(n, loops=tuple(replace(l, extent=m.get(l.extent, l.extent)) for l in n.loops),
                             body=fix(n.body)) if isinstance(n, Nest) else n for n in items)
    resize = lambda ds: tuple(replace(d, shape=tuple(m.get(s, s) for s in d.shape)) for d in ds)
    try:
        return make_program(p.name, resize(p.inputs), resize(p.outputs), fix(p.body))
    except LeirError:
        return None


def sample(engine, per_strategy: int):
    by = defaultdict(list)
    for p in _corpus():
        q = shrink(p)
        if q is None:
            continue
        for nb in engine.enumerate(q, strategies=list(GRAPH), validate=True).neighbours:
            by[nb.provenances[0].strategy].append((q, nb))
    return stratified(by, per_strategy)


@pytest.mark.parametrize("per_strategy", [3, pytest.param(7, marks=pytest.mark.long)])
def test_sample_verifies_equal(engine, tvm, per_strategy):
    """``per_strategy`` neighbours of every graph strategy verify Equal (7: the long run; 90: slow)."""
    pairs = sample(engine, per_strategy)
    assert len(pairs) >= 5 * per_strategy and len({s for s, _, _ in pairs}) == len(GRAPH)
    assert_all_equal(pairs)


@pytest.mark.slow
def test_large_sample_verifies_equal(engine, tvm):
    pairs = sample(engine, 90)
    assert len(pairs) >= 250
    assert_all_equal(pairs)
