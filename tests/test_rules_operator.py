"""Operator-level strategies: before/expected and guard-rejection tests, one group per rule.

The engine here loads only the schema and rules/operator.egg (copied to a temp dir), so the
tests pin the operator block independently of the other strategy files.
"""

import pytest

from engine.rewrite.enumerator import Enumerator
from engine.leir.parser import parse_body
from engine.leir.program import make_program
from engine.leir.ast import TensorDecl
from rulekit import operator_rules_dir


@pytest.fixture(scope="module")
def eng(tmp_path_factory):
    d = operator_rules_dir(tmp_path_factory)
    return Enumerator(d)


def prog(leir, inputs, outputs):
    return make_program("t", [TensorDecl(n, "f32", tuple(s)) for n, s in inputs],
                        [TensorDecl(n, "f32", tuple(s)) for n, s in outputs], parse_body(leir))


MM = prog("B^{4}_{tx=0}L^{6}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];",
          [("A", (4, 8)), ("C", (8, 6))], [("D", (4, 6))])
MAXR = prog("B^{4}_{tx=0}L^{6}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];",
            [("A", (4, 6))], [("D", (4,))])
# prefix recurrence: reordering or parallelising a is illegal
PREFIX = prog("B^{4}_{tx=0}L^{6}_{a=0}[F^{f32,g}_{tx,a}=if_then_else(a-1<0,0,F^{f32,g}_{tx,a-1})+A^{f32,g}_{tx,a};];"
              "B^{4}_{tx=0}L^{6}_{a=0}[D^{f32,g}_{tx,a}=F^{f32,g}_{tx,a};];",
              [("A", (4, 6))], [("D", (4, 6))])
# loop var used as a value: no split / tiling of it
TRIU = prog("B^{6}_{tx=0}L^{6}_{a=0}[D^{f32,g}_{tx,a}=if_then_else(tx<=a,A^{f32,g}_{tx,a},0);];",
            [("A", (6, 6))], [("D", (6, 6))])
EW = prog("B^{4}_{tx=0}L^{2}_{a=0}L^{2048}_{c=0}[D^{f32,g}_{tx,a,c}=A^{f32,g}_{tx,a,c}*2;];",
          [("A", (4, 2, 2048))], [("D", (4, 2, 2048))])


def texts(eng, p, strategy):
    res = eng.enumerate(p, [strategy], validate=True)
    assert not res.invalid, res.invalid
    return [n.leir for n in res.neighbours], res.neighbours


def test_loop_split_every_divisor_fresh_name(eng):
    out, nbs = texts(eng, MM, "loop_split")
    assert "B^{4}_{tx=0}L^{3}_{d=0}L^{2}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,d*2+a}=D^{f32,g}_{tx,d*2+a}+" \
           "A^{f32,g}_{tx,c}*C^{f32,g}_{c,d*2+a};];" in out
    # factors: tx 2; a 2,3; c 2,4 -> 5 neighbours, all parameters listed
    got = sorted((dict(n.provenances[0].params)["loop"], dict(n.provenances[0].params)["factor"]) for n in nbs)
    assert got == [("a", 2), ("a", 3), ("c", 2), ("c", 4), ("tx", 2)]
    for n in nbs:  # fresh outer name never collides with a loop of the statement
        assert n.fresh_names and all(v not in ("tx", "a", "c") for v in n.fresh_names.values())


def test_loop_split_rejects_value_use_and_prime(eng):
    out, _ = texts(eng, TRIU, "loop_split")
    assert out == []  # tx and a are both used as values in if_then_else
    p = prog("B^{4}_{tx=0}L^{7}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a};];", [("A", (4, 7))], [("D", (4, 7))])
    out, nbs = texts(eng, p, "loop_split")
    assert {dict(n.provenances[0].params)["loop"] for n in nbs} == {"tx"}  # 7 is prime


def test_loop_fusion_inverts_split(eng):
    for n in eng.enumerate(MM, ["loop_split"]).neighbours:
        back = [m.leir for m in eng.enumerate(n.program, ["loop_fusion"]).neighbours]
        assert MM.to_leir() in back


def test_loop_fusion_rejects_other_uses(eng):
    p = prog("B^{4}_{tx=0}L^{3}_{f=0}L^{2}_{a=0}[D^{f32,g}_{tx,f*2+a}=A^{f32,g}_{tx,f*2+a}+A^{f32,g}_{tx,a};];",
             [("A", (4, 6))], [("D", (4, 6))])
    assert texts(eng, p, "loop_fusion")[0] == []


def test_loop_reorder_legal_swaps_and_exactness(eng):
    out, nbs = texts(eng, MM, "loop_reorder")
    assert "L^{6}_{a=0}B^{4}_{tx=0}L^{8}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];" in out
    assert len(out) == 3
    assert all(dict(n.provenances[0].params)["exactness"] == "bitwise" for n in nbs)
    # two reduction axes: the swap reassociates a sum, but is exact for max
    p = prog("B^{4}_{tx=0}L^{6}_{a=0}L^{5}_{c=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a,c};];",
             [("A", (4, 6, 5))], [("D", (4,))])
    ex = {dict(n.provenances[0].params)["outer"] + dict(n.provenances[0].params)["inner"]:
          n.provenances[0].exactness for n in texts(eng, p, "loop_reorder")[1]}
    # tx <-> c moves c in front of a: the sum runs c-major, also a reassociation
    assert ex == {"txa": "bitwise", "txc": "reassociating", "ac": "reassociating"}


def test_loop_reorder_across_a_reduction_loop_reassociates(eng):
    # exchanging the spatial tx with the reduction d moves d across the reduction c between
    # them: (c, d) becomes (d, c), a different summation order (corpus GroupNorm: 20 steps
    # listed bitwise differed from the original at exact tolerance)
    p = prog("B^{4}_{tx=0}L^{3}_{c=0}L^{5}_{d=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,c,d};];",
             [("A", (4, 3, 5))], [("D", (4,))])
    nbs = texts(eng, p, "loop_reorder")[1]
    ex = {(dict(n.provenances[0].params)["outer"], dict(n.provenances[0].params)["inner"]):
          n.provenances[0].exactness for n in nbs}
    assert ex == {("tx", "c"): "bitwise", ("tx", "d"): "reassociating", ("c", "d"): "reassociating"}
    # max is order-free: the same swap stays bitwise
    m = prog("B^{4}_{tx=0}L^{3}_{c=0}L^{5}_{d=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,c,d});];",
             [("A", (4, 3, 5))], [("D", (4,))])
    assert {n.provenances[0].exactness for n in texts(eng, m, "loop_reorder")[1]} == {"bitwise"}


def test_bitwise_loop_reorders_are_bitwise(eng):
    """Every swap listed bitwise gives the original's outputs bit for bit (exact tolerance),
    non-adjacent swaps among several reduction and spatial loops included."""
    from lowering import Verifier
    p = prog("B^{4}_{tx=0}L^{3}_{a=0}L^{7}_{c=0}L^{2}_{b=0}L^{9}_{d=0}"
             "[D^{f32,g}_{tx,b}=D^{f32,g}_{tx,b}+A^{f32,g}_{tx,a,c,b,d}*1.37;];",
             [("A", (4, 3, 7, 2, 9))], [("D", (4, 2))])
    nbs = [n for n in texts(eng, p, "loop_reorder")[1] if n.provenances[0].exactness == "bitwise"]
    # swaps that keep the reduction loops a, c, d in order: (tx, a), (tx, b), (c, b), (b, d)
    assert len(nbs) == 4
    with Verifier(tolerance="exact", trials=2) as v:
        bad = [(n.leir, r.reason) for n in nbs for r in [v.verify(p, n.program)] if not r.equal]
    assert bad == []


def test_loop_reorder_rejects_recurrence(eng):
    out, _ = texts(eng, PREFIX, "loop_reorder")
    assert all(not t.startswith("L^{6}_{a=0}B^{4}_{tx=0}[F") for t in out)
    assert out == ["B^{4}_{tx=0}L^{6}_{a=0}[F^{f32,g}_{tx,a}=if_then_else(a-1<0,0,F^{f32,g}_{tx,a-1})+A^{f32,g}_{tx,a};];"
                   "L^{6}_{a=0}B^{4}_{tx=0}[D^{f32,g}_{tx,a}=F^{f32,g}_{tx,a};];"]


def test_loop_tiling(eng):
    # extent 2 has no factor 1 < f < 2: no tile pair involves a, so nothing tiles
    assert texts(eng, EW, "loop_tiling")[0] == []
    p = prog("B^{4}_{tx=0}L^{4}_{a=0}L^{6}_{c=0}[D^{f32,g}_{tx,a,c}=A^{f32,g}_{tx,a,c};];",
             [("A", (4, 4, 6))], [("D", (4, 4, 6))])
    out, nbs = texts(eng, p, "loop_tiling")
    assert "B^{4}_{tx=0}L^{2}_{d=0}L^{3}_{f=0}L^{2}_{a=0}L^{2}_{c=0}[D^{f32,g}_{tx,d*2+a,f*2+c}=" \
           "A^{f32,g}_{tx,d*2+a,f*2+c};];" in out
    pairs = {(dict(n.provenances[0].params)["outer"], dict(n.provenances[0].params)["inner"]) for n in nbs}
    assert pairs == {("tx", "a"), ("a", "c")}
    assert len(out) == 1 * 1 + 1 * 2  # (tx 2)x(a 2) and (a 2)x(c 2,3)


def test_loop_unrolling_only_serial(eng):
    out, _ = texts(eng, MM, "loop_unrolling")
    assert out == ["B^{4}_{tx=0}U^{6}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];",
                   "B^{4}_{tx=0}L^{6}_{a=0}U^{8}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];"]
    assert texts(eng, EW, "loop_unrolling")[0] == [
        "B^{4}_{tx=0}U^{2}_{a=0}L^{2048}_{c=0}[D^{f32,g}_{tx,a,c}=A^{f32,g}_{tx,a,c}*2;];"]  # 2048 too long


def test_parallelization_and_vectorization_never_reduction(eng):
    assert texts(eng, MM, "loop_parallelization")[0] == [
        "B^{4}_{tx=0}P^{6}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];"]
    assert texts(eng, MAXR, "loop_parallelization")[0] == []
    assert texts(eng, MAXR, "loop_vectorization")[0] == []
    assert texts(eng, EW, "loop_vectorization")[0] == [
        "B^{4}_{tx=0}V^{2}_{a=0}L^{2048}_{c=0}[D^{f32,g}_{tx,a,c}=A^{f32,g}_{tx,a,c}*2;];"]  # 2048 > 64
    # a prefix recurrence axis is not parallel
    assert all("P^{6}_{a=0}[F" not in t for t in texts(eng, PREFIX, "loop_parallelization")[0])


def test_loop_binding_limits_tags_names(eng):
    out, nbs = texts(eng, EW, "loop_binding")
    tags = sorted((dict(n.provenances[0].params)["loop"], dict(n.provenances[0].params)["tag"]) for n in nbs)
    # a: 2 threads fit (4*2 <= 1024) on ty/tz, or a block; c: 2048 threads too many, blocks only (z/y <= 65535)
    assert tags == [("a", "bx"), ("a", "by"), ("a", "bz"), ("a", "ty"), ("a", "tz"),
                    ("c", "bx"), ("c", "by"), ("c", "bz")]
    assert "B^{4}_{tx=0}B^{2}_{tya=0}L^{2048}_{c=0}[D^{f32,g}_{tx,tya,c}=A^{f32,g}_{tx,tya,c}*2;];" in out
    assert texts(eng, MAXR, "loop_binding")[0] == []  # a is a reduction axis
    taken = prog("B^{4}_{tx=0}L^{2}_{a=0}L^{3}_{tya=0}[D^{f32,g}_{tx,a,tya}=A^{f32,g}_{tx,a,tya};];",
                 [("A", (4, 2, 3))], [("D", (4, 2, 3))])
    names = [n.fresh_names for n in texts(eng, taken, "loop_binding")[1]
             if dict(n.provenances[0].params) == {"loop": "a", "tag": "ty"}]
    assert names and list(names[0].values())[0] not in ("tya", "tx", "a")


def test_reduction_factorization_forms(eng):
    out, nbs = texts(eng, MM, "reduction_factorization")
    assert "B^{4}_{tx=0}L^{6}_{a=0}L^{2}_{c=0}[E^{f32,g}_{tx,a}=E^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];" \
           "B^{4}_{tx=0}L^{6}_{a=0}L^{6}_{c=0}[F^{f32,g}_{tx,a}=F^{f32,g}_{tx,a}+A^{f32,g}_{tx,c+2}*C^{f32,g}_{c+2,a};];" \
           "B^{4}_{tx=0}L^{6}_{a=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+(E^{f32,g}_{tx,a}+F^{f32,g}_{tx,a});];" in out
    assert {dict(n.provenances[0].params)["cut"] for n in nbs} == {2, 4}
    assert {n.provenances[0].exactness for n in nbs} == {"reassociating"}
    out, nbs = texts(eng, MAXR, "reduction_factorization")
    assert "B^{4}_{tx=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},max(C^{f32,g}_{tx},E^{f32,g}_{tx}));];" in out[0]  # C is free
    assert {n.provenances[0].exactness for n in nbs} == {"bitwise"}
    # not a reduction: no factorisation
    assert texts(eng, EW, "reduction_factorization")[0] == []
    # the only loop is the reduction: the combine gets a fresh extent-1 loop
    p = prog("L^{5}_{a=0}[D^{f32,g}=D^{f32,g}+A^{f32,g}_{a};];", [("A", (5,))], [("D", ())])
    out, _ = texts(eng, p, "reduction_factorization")
    assert out == ["L^{2}_{a=0}[C^{f32,g}=C^{f32,g}+A^{f32,g}_{a};];L^{3}_{a=0}[E^{f32,g}=E^{f32,g}+A^{f32,g}_{a+2};];"
                   "L^{1}_{a=0}[D^{f32,g}=D^{f32,g}+(C^{f32,g}+E^{f32,g});];"]


# KNOWN_RULE_BUGS regression (tests/test_neighbours_verify.py): MSELoss, shrunk as in the
# verified sample. G sums over tx AND a; splitting a must combine outside both loops.
MSE = prog("B^{8}_{tx=0}L^{256}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}-C^{f32,g}_{tx,a};];"
           "B^{8}_{tx=0}L^{256}_{a=0}[E^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}**2;];"
           "B^{8}_{tx=0}L^{256}_{a=0}[G^{f32,g}=G^{f32,g}+E^{f32,g}_{tx,a};];"
           "B^{1}_{tx=0}[F^{f32,g}=G^{f32,g}/32768;];",
           [("A", (8, 256)), ("C", (8, 256))], [("F", ())])


def test_reduction_factorization_combines_outside_every_reduction_loop(eng, tvm):
    from lowering.verify import verify
    out, nbs = texts(eng, MSE, "reduction_factorization")
    assert ("B^{8}_{tx=0}L^{2}_{a=0}[H^{f32,g}=H^{f32,g}+E^{f32,g}_{tx,a};];"
            "B^{8}_{tx=0}L^{254}_{a=0}[I^{f32,g}=I^{f32,g}+E^{f32,g}_{tx,a+2};];"
            "L^{1}_{a=0}[G^{f32,g}=G^{f32,g}+(H^{f32,g}+I^{f32,g});];") in out[0]
    assert len(nbs) == 7  # cuts of 256: 2 .. 128
    for n in nbs[:2]:
        r = verify(MSE, n.program, trials=3, tolerance="strict")
        assert r.ok and r.equal, (n.leir, r)
    # spatial loops stay around the combine, reduction loops (here tx and c) do not
    p = prog("L^{3}_{tx=0}L^{4}_{a=0}L^{6}_{c=0}[D^{f32,g}_{a}=D^{f32,g}_{a}+A^{f32,g}_{tx,a,c};];",
             [("A", (3, 4, 6))], [("D", (4,))])
    out, nbs = texts(eng, p, "reduction_factorization")
    assert len(out) == 3  # tx cut at 1, c cut at 2 and 3
    assert all(t.endswith("L^{4}_{a=0}[D^{f32,g}_{a}=D^{f32,g}_{a}+(C^{f32,g}_{a}+E^{f32,g}_{a});];") for t in out)
    assert all(t.count("D^{f32,g}_{a}=") == 1 and "L^{3}_{tx=0}L^{4}_{a=0}[D" not in t for t in out)
    for n in nbs:
        r = verify(p, n.program, trials=3, tolerance="strict")
        assert r.ok and r.equal, (n.leir, r)


def test_reduction_factorization_rejects_a_shared_lhs_index(eng):
    # D_{a+c}: several (a, c) share an element, so no combine over a, c adds each partial once
    p = prog("L^{3}_{a=0}L^{3}_{c=0}L^{4}_{f=0}[D^{f32,g}_{a+c}=D^{f32,g}_{a+c}+A^{f32,g}_{a,c,f};];",
             [("A", (3, 3, 4))], [("D", (5,))])
    assert texts(eng, p, "reduction_factorization")[0] == []


# ------------------------------------------------------------------ InexactOK (argmax regression)

# argmax over row sums: S (a + reduction over a and c) flows into the exact comparison
# S >= M of the i64 index I, so no rounding change of S is bounded by any tolerance.
ROWSUM = ("B^{4}_{tx=0}L^{6}_{r=0}L^{4}_{a=0}L^{8}_{c=0}[S^{f32,g}_{tx,r}=S^{f32,g}_{tx,r}+A^{f32,g}_{tx,r,a,c};];"
          "B^{4}_{tx=0}L^{6}_{r=0}[M^{f32,g}_{tx}=max(M^{f32,g}_{tx},S^{f32,g}_{tx,r});];")
ARGMAX_TAIL = ("B^{4}_{tx=0}[I^{i64,g}_{tx}=0;];"
               "B^{4}_{tx=0}L^{6}_{r=0}[I^{i64,g}_{tx}=if_then_else(S^{f32,g}_{tx,r}>=M^{f32,g}_{tx},r,I^{i64,g}_{tx});];")


def _rowsum(argmax: bool):
    a = (TensorDecl("A", "f32", (4, 6, 4, 8)),)
    if argmax:
        return make_program("t", a, (TensorDecl("I", "i64", (4,)),), parse_body(ROWSUM + ARGMAX_TAIL))
    return make_program("t", a, (TensorDecl("M", "f32", (4,)),), parse_body(ROWSUM))


def _rules(eng, p, strategy):
    return sorted({(pv.rule, pv.params.get("exactness")) for nb in texts(eng, p, strategy)[1]
                   for pv in nb.provenances})


def test_reassociating_operator_rules_keep_away_from_an_argmax(eng):
    free, exact = _rowsum(False), _rowsum(True)
    # without the argmax S is free to round: every reassociating form appears
    assert ("loop_reorder/reassociating", "reassociating") in _rules(eng, free, "loop_reorder")
    assert ("loop_tiling/reassociating", "reassociating") in _rules(eng, free, "loop_tiling")
    assert ("reduction_factorization/sum", "reassociating") in _rules(eng, free, "reduction_factorization")
    # with it only the bitwise forms remain: swaps that keep every accumulation order, and the
    # max reduction's factorization (max is exact in any order)
    assert _rules(eng, exact, "loop_reorder") == [("loop_reorder", "bitwise")]
    assert {r for r, _ in _rules(eng, exact, "loop_tiling")} == {"loop_tiling"}
    assert _rules(eng, exact, "reduction_factorization") == [("reduction_factorization/extremum", "bitwise")]
    # the S nest in particular gets no reassociating swap (a and c are both reduced there)
    s_nest = [nb.leir for nb in texts(eng, exact, "loop_reorder")[1]
              if nb.leir.startswith("B^{4}_{tx=0}L^{6}_{r=0}L^{8}_{c=0}L^{4}_{a=0}")]
    assert s_nest == []


def test_product_and_difference_factorization_keep_away_from_an_argmax(eng):
    for op in ("*", "-"):
        body = (ROWSUM + ARGMAX_TAIL).replace("S^{f32,g}_{tx,r}+A", f"S^{{f32,g}}_{{tx,r}}{op}A")
        p = make_program("t", (TensorDecl("A", "f32", (4, 6, 4, 8)),), (TensorDecl("I", "i64", (4,)),),
                         parse_body(body))
        assert _rules(eng, p, "reduction_factorization") == [("reduction_factorization/extremum", "bitwise")], op
        free = make_program("t", (TensorDecl("A", "f32", (4, 6, 4, 8)),), (TensorDecl("S", "f32", (4, 6)),),
                            parse_body(body.split("];")[0] + "];"))
        assert _rules(eng, free, "reduction_factorization"), op
