"""The CPU strategies of rules/cpu.egg (issue 27): reduction_vectorization and register_blocking.

Before/expected texts, the guards that keep a rewrite out, verification of every neighbour on
random inputs at the strategy's exactness (bitwise where it says so), replay, and what the llvm
lowering makes of the result (vector loops, unrolled rows)."""
from __future__ import annotations

import pytest

from rulekit import engine_for, prog

MAX = prog("B^{4}_{tx=0}L^{64}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];",
           {"A": (4, 64)}, {"D": (4,)})
SUMSQ = prog("B^{4}_{tx=0}L^{6}_{a=0}L^{32}_{c=0}[F^{f32,g}_{tx}=F^{f32,g}_{tx}+A^{f32,g}_{tx,a,c}**2;];",
             {"A": (4, 6, 32)}, {"F": (4,)})
MM = prog("B^{16}_{tx=0}L^{64}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];",
          {"A": (16, 8), "C": (8, 64)}, {"D": (16, 64)})
# gemm as the translator writes it: the weight F[a, c] is contiguous along the reduction
GEMM = prog("B^{8}_{tx=0}L^{32}_{a=0}L^{16}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*F^{f32,g}_{a,c};];",
            {"A": (8, 16), "F": (32, 16)}, {"D": (8, 32)})


@pytest.fixture(scope="module")
def eng():
    return engine_for("cpu.egg")


def steps(eng, p, strategy):
    res = eng.enumerate(p, [strategy], validate=True)
    assert not res.invalid, res.invalid
    return res.neighbours


def params(nb) -> dict:
    return dict(nb.provenances[0].params)


def test_reduction_vectorization_extremum_every_lane_count_bitwise(eng):
    nbs = steps(eng, MAX, "reduction_vectorization")
    assert sorted(params(n)["lanes"] for n in nbs) == [4, 8, 16, 32, 64]
    assert all(n.provenances[0].rule == "reduction_vectorization/extremum" and
               params(n)["exactness"] == "bitwise" for n in nbs)
    by = {params(n)["lanes"]: n.leir for n in nbs}
    assert by[16] == ("B^{4}_{tx=0}L^{4}_{c=0}V^{16}_{a=0}[C^{f32,g}_{tx,a}=max(C^{f32,g}_{tx,a},A^{f32,g}_{tx,c*16+a});];"
                      "B^{4}_{tx=0}L^{16}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},C^{f32,g}_{tx,a});];")
    # all 64 lanes: the loop itself becomes the vector loop, no outer loop
    assert by[64].startswith("B^{4}_{tx=0}V^{64}_{a=0}[C^{f32,g}_{tx,a}=max(C^{f32,g}_{tx,a},A^{f32,g}_{tx,a});];")


def test_reduction_vectorization_keeps_outer_reduction_loops_in_the_partials(eng):
    nbs = {params(n)["lanes"]: n for n in steps(eng, SUMSQ, "reduction_vectorization")}
    assert set(nbs) == {4, 8, 16, 32}
    assert nbs[8].leir == ("B^{4}_{tx=0}L^{6}_{a=0}L^{4}_{d=0}V^{8}_{c=0}[C^{f32,g}_{tx,c}=C^{f32,g}_{tx,c}+"
                           "A^{f32,g}_{tx,a,d*8+c}**2;];B^{4}_{tx=0}L^{8}_{c=0}[F^{f32,g}_{tx}=F^{f32,g}_{tx}+C^{f32,g}_{tx,c};];")
    assert params(nbs[8])["exactness"] == "reassociating"


@pytest.mark.parametrize("body, inputs, outputs, why", [
    # the innermost loop is not a reduction axis
    ("B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,a};];", {"A": (4, 8)}, {"D": (4, 8)},
     "no reduction loop"),
    # no lane count divides 6
    ("B^{4}_{tx=0}L^{6}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a};];", {"A": (4, 6)}, {"D": (4,)},
     "extent 6"),
    # the sum flows into a comparison (argmax): reassociating it could flip the comparison
    ("B^{4}_{tx=0}L^{8}_{a=0}[S^{f32,g}_{tx}=S^{f32,g}_{tx}+A^{f32,g}_{tx,a};];"
     "B^{4}_{tx=0}[D^{f32,g}_{tx}=if_then_else(S^{f32,g}_{tx}>0,1,0);];", {"A": (4, 8)}, {"D": (4,)},
     "not InexactOK"),
    # a half-precision product's partials can overflow where the whole does not
    ("B^{4}_{tx=0}L^{8}_{a=0}[D^{f16,g}_{tx}=D^{f16,g}_{tx}*A^{f16,g}_{tx,a};];", {"A": ("f16", (4, 8))},
     {"D": ("f16", (4,))}, "f16 product"),
    # the accumulator is read at another element: not a reduction form
    ("B^{4}_{tx=0}[D^{f32,g}_{tx}=1;];B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+D^{f32,g}_{3-tx}*A^{f32,g}_{tx,a};];",
     {"A": (4, 8)}, {"D": (4,)}, "not ReduceForm"),
])
def test_reduction_vectorization_guards(eng, body, inputs, outputs, why):
    assert steps(eng, prog(body, inputs, outputs), "reduction_vectorization") == [], why


def test_reduction_vectorization_partials_stay_within_int32_indexing(eng):
    """The partials hold X's elements times the lanes; from 2^31 elements on TVM cannot index them
    (the corpus's Matmul4D offered such steps, which did not build). Enumerated and built, never run."""
    big = prog("B^{1024}_{tx=0}L^{8}_{b=0}L^{16384}_{a=0}L^{64}_{c=0}[D^{f32,g}_{tx,b,a}=D^{f32,g}_{tx,b,a}+"
               "A^{f32,g}_{tx,b,c}*C^{f32,g}_{c,a};];",
               {"A": (1024, 8, 64), "C": (64, 16384)}, {"D": (1024, 8, 16384)})    # D: 2^27 elements
    nbs = {params(n)["lanes"]: n for n in steps(eng, big, "reduction_vectorization")}
    assert set(nbs) == {4, 8}                       # 16 lanes would make 2^31
    from lowering.run import build
    build(nbs[8].program)                           # 2^30 partials: the largest offered builds


def test_register_blocking_tiles_rows_and_columns_around_the_reduction(eng):
    nbs = steps(eng, MM, "register_blocking")
    got = sorted((params(n)["rows"], params(n)["row_block"], params(n)["cols"], params(n)["col_block"]) for n in nbs)
    # rows: tx (16) by 2, 4, 8; columns: a (64) by 8, 16, 32, and the whole loop (64, a serial loop)
    assert got == [("tx", r, "a", c) for r in (2, 4, 8) for c in (8, 16, 32, 64)]
    by = {(params(n)["row_block"], params(n)["col_block"]): n.leir for n in nbs}
    assert by[(4, 16)] == ("B^{4}_{tx=0}L^{4}_{a=0}L^{8}_{c=0}U^{4}_{f=0}V^{16}_{d=0}[D^{f32,g}_{tx*4+f,a*16+d}="
                           "D^{f32,g}_{tx*4+f,a*16+d}+A^{f32,g}_{tx*4+f,c}*C^{f32,g}_{c,a*16+d};];")
    assert by[(8, 64)] == ("B^{2}_{tx=0}L^{8}_{c=0}U^{8}_{d=0}V^{64}_{a=0}[D^{f32,g}_{tx*8+d,a}="
                           "D^{f32,g}_{tx*8+d,a}+A^{f32,g}_{tx*8+d,c}*C^{f32,g}_{c,a};];")
    assert all(params(n).get("exactness", "bitwise") == "bitwise" for n in nbs)


@pytest.mark.parametrize("body, inputs, outputs, why", [
    # an elementwise nest: nothing to hold in registers
    ("B^{16}_{tx=0}L^{64}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];", {"A": (16, 64)}, {"D": (16, 64)},
     "no reduction"),
    # the column loop must index the output's last dimension (contiguous tile columns)
    ("B^{64}_{tx=0}L^{16}_{a=0}L^{8}_{c=0}[D^{f32,g}_{a,tx}=D^{f32,g}_{a,tx}+A^{f32,g}_{a,c}*C^{f32,g}_{c,tx};];",
     {"A": (16, 8), "C": (8, 64)}, {"D": (16, 64)}, "B column loop of extent 64 would lose its binding"),
    # a recurrence along the rows (the row before is read): no loop owns its elements
    ("B^{16}_{tx=0}L^{16}_{a=0}[D^{f32,g}_{tx,a}=0;];B^{16}_{tx=0}L^{16}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a}="
     "D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*if_then_else(tx-1<0,0,D^{f32,g}_{tx-1,a});];", {"A": (16, 8)}, {"D": (16, 16)},
     "recurrence"),
])
def test_register_blocking_guards(eng, body, inputs, outputs, why):
    got = steps(eng, prog(body, inputs, outputs), "register_blocking")
    if why.startswith("B column"):     # tiles of a at most; never the whole bound loop tx as the vector loop
        assert all(params(n)["cols"] == "tx" and params(n)["col_block"] < 64 for n in got) and \
            all("V^{64}" not in n.leir for n in got)
    else:
        assert got == [], why


def test_every_neighbour_verifies_and_replays(eng, verifier):
    from engine import Engine
    from lowering import tolerance_for
    full = Engine(strategies=["reduction_vectorization", "register_blocking"])
    for p in (MAX, SUMSQ, MM, GEMM):
        for s in full.enumerate(p):
            v = verifier.verify(p, s.program, tolerance_for(s.exactness, "strict"))
            assert v.equal, (s.rule, dict(s.params), v.reason, v.message)
            again = full.apply(p, {"rule": s.rule, "site": list(s.site), "params": dict(s.params)})
            assert again.to_leir() == s.leir


def test_lowered_loops_are_vector_and_unrolled(eng):
    from lowering.tir import lower_to_tvmscript
    rv = next(n for n in steps(eng, MAX, "reduction_vectorization") if params(n)["lanes"] == 16)
    assert "for a in T.vectorized(16):" in lower_to_tvmscript(rv.program)
    rb = next(n for n in steps(eng, MM, "register_blocking") if (params(n)["row_block"], params(n)["col_block"]) == (4, 16))
    text = lower_to_tvmscript(rb.program)
    assert "for tx in T.parallel(4):" in text and "for f in T.unroll(4):" in text and "for d in T.vectorized(16):" in text
