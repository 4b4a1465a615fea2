"""Tests for rules/partial.egg: partially_equivalent_then_correct (strategies.md S35).

Before/expected text for a reduced conv1d pair, the conv2d generalisation (one neighbour per
padded axis), guards that must reject (a single conv, different weights, different padding,
dependent or pre-written outputs, unpadded inputs, short programs the reference crashed on),
the init decided for the nested corrections, re-parsing, numeric verification (bitwise: the
rewrite repeats every operation on identical operands) and the corpus program the reference
applies it to. The engine loads the schema (rules/leir/) and rules/partial.egg only.
"""
from __future__ import annotations

import json
import re

import pytest

from conftest import CORPUS_DIR, corpus_records
from engine.leir.files import program_from_json
from engine.leir.parser import parse_body
from engine.leir.program import make_program
from rulekit import engine_for, prog_f32 as prog

CORPUS = CORPUS_DIR
S35 = "partially_equivalent_then_correct"


@pytest.fixture(scope="module")
def engine():
    return engine_for("partial.egg")


def neighbours(engine, p):
    res = engine.enumerate(p, [S35])
    assert res.invalid == [], [(i.provenance.rule, i.error) for i in res.invalid]
    return res.neighbours


def texts(engine, p):
    return [nb.leir for nb in neighbours(engine, p)]


# conv1d pair: inputs [2,3,8], padding 2 on both sides (H, I: 12), kernel 3, outputs [2,4,10]
PAD_A = "B^{2}_{tx=0}L^{3}_{a=0}L^{12}_{c=0}[H^{f32,g}_{tx,a,c}=if_then_else(2<=c<10,A^{f32,g}_{tx,a,c-2},0);];"
CONV_D = ("B^{2}_{tx=0}L^{4}_{a=0}L^{10}_{c=0}L^{3}_{d=0}L^{3}_{f=0}"
          "[D^{f32,g}_{tx,a,c}=D^{f32,g}_{tx,a,c}+H^{f32,g}_{tx,d,c+f}*G^{f32,g}_{a,d,f};];")
PAD_C = PAD_A.replace("H^", "I^").replace("A^", "C^")
CONV_E = CONV_D.replace("D^", "E^").replace("H^", "I^")
SUM = "B^{2}_{tx=0}L^{4}_{a=0}L^{10}_{c=0}[F^{f32,g}_{tx,a,c}=D^{f32,g}_{tx,a,c}+E^{f32,g}_{tx,a,c};];"
CONV1D = PAD_A + CONV_D + PAD_C + CONV_E + SUM
IO1 = ([("A", [2, 3, 8]), ("C", [2, 3, 8]), ("G", [4, 3, 3])], [("F", [2, 4, 10])])

EXPECTED_CONV1D = (
    PAD_A + PAD_C +
    "B^{2}_{tx=0}L^{3}_{a=0}L^{10}_{c=0}[J^{f32,g}_{tx,a,c}=H^{f32,g}_{tx,a,c};];"
    "B^{2}_{tx=0}L^{3}_{a=0}L^{10}_{c=0}[J^{f32,g}_{tx,a,c+10}=I^{f32,g}_{tx,a,c+2};];"
    "B^{2}_{tx=0}L^{4}_{a=0}L^{18}_{c=0}L^{3}_{d=0}L^{3}_{f=0}"
    "[K^{f32,g}_{tx,a,c}=K^{f32,g}_{tx,a,c}+J^{f32,g}_{tx,d,c+f}*G^{f32,g}_{a,d,f};];"
    "B^{2}_{tx=0}L^{4}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a,c}=K^{f32,g}_{tx,a,c};];"
    "B^{2}_{tx=0}L^{4}_{a=0}L^{8}_{c=0}[E^{f32,g}_{tx,a,c+2}=K^{f32,g}_{tx,a,c+10};];"
    "B^{2}_{tx=0}L^{4}_{a=0}L^{2}_{c=0}[D^{f32,g}_{tx,a,c+8}=0;L^{3}_{d=0}L^{3}_{f=0}"
    "[D^{f32,g}_{tx,a,c+8}=D^{f32,g}_{tx,a,c+8}+H^{f32,g}_{tx,d,c+8+f}*G^{f32,g}_{a,d,f};];];"
    "B^{2}_{tx=0}L^{4}_{a=0}L^{2}_{c=0}[E^{f32,g}_{tx,a,c}=0;L^{3}_{d=0}L^{3}_{f=0}"
    "[E^{f32,g}_{tx,a,c}=E^{f32,g}_{tx,a,c}+I^{f32,g}_{tx,d,c+f}*G^{f32,g}_{a,d,f};];];" + SUM)

# conv2d pair: inputs [2,2,4,5], padding 1 (H, I: [2,2,6,7]), 3x3 kernel, outputs [2,3,4,5]
CONV2D = (
    "B^{2}_{tx=0}L^{2}_{a=0}L^{6}_{c=0}L^{7}_{d=0}[H^{f32,g}_{tx,a,c,d}=if_then_else(1<=c<5&1<=d<6,A^{f32,g}_{tx,a,c-1,d-1},0);];"
    "B^{2}_{tx=0}L^{3}_{a=0}L^{4}_{c=0}L^{5}_{d=0}L^{2}_{f=0}L^{3}_{g=0}L^{3}_{h=0}"
    "[D^{f32,g}_{tx,a,c,d}=D^{f32,g}_{tx,a,c,d}+H^{f32,g}_{tx,f,c+g,d+h}*G^{f32,g}_{a,f,g,h};];"
    "B^{2}_{tx=0}L^{2}_{a=0}L^{6}_{c=0}L^{7}_{d=0}[I^{f32,g}_{tx,a,c,d}=if_then_else(1<=c<5&1<=d<6,C^{f32,g}_{tx,a,c-1,d-1},0);];"
    "B^{2}_{tx=0}L^{3}_{a=0}L^{4}_{c=0}L^{5}_{d=0}L^{2}_{f=0}L^{3}_{g=0}L^{3}_{h=0}"
    "[E^{f32,g}_{tx,a,c,d}=E^{f32,g}_{tx,a,c,d}+I^{f32,g}_{tx,f,c+g,d+h}*G^{f32,g}_{a,f,g,h};];"
    "B^{2}_{tx=0}L^{3}_{a=0}L^{4}_{c=0}L^{5}_{d=0}[F^{f32,g}_{tx,a,c,d}=D^{f32,g}_{tx,a,c,d}*E^{f32,g}_{tx,a,c,d};];")
IO2 = ([("A", [2, 2, 4, 5]), ("C", [2, 2, 4, 5]), ("G", [3, 2, 3, 3])], [("F", [2, 3, 4, 5])])


def conv1d(text=CONV1D, io=IO1):
    return prog(text, *io)


# ------------------------------------------------------------------ before / expected


def test_conv1d_before_expected(engine):
    assert texts(engine, conv1d()) == [EXPECTED_CONV1D]


def test_params_and_exactness(engine):
    (nb,) = neighbours(engine, conv1d())
    pv = nb.provenances[0]
    params = dict(pv.params)
    assert (params["axis"], params["first"], params["second"], params["seam"]) == ("c", "D", "E", 8)
    assert pv.exactness == "bitwise" and pv.strategy == S35


def test_corrections_are_nested_and_need_no_implicit_init(engine):
    """The explicit =0 then the accumulation: D / E are already written by the split, so the
    semantics give the accumulation no init (leir.md 7.3), and the sibling form never appears."""
    (nb,) = neighbours(engine, conv1d())
    p = nb.program
    corr = [e for e in p.info.equations if len(e.path) == 3]
    assert [(e.eq.lhs.name, e.eq.init, e.is_update) for e in corr] == [("D", None, True), ("E", None, True)]
    fused = [e for e in p.info.equations if e.eq.lhs.name == "K"]
    assert [e.eq.init for e in fused] == ["0"]
    assert "]L^" not in nb.leir  # no sibling form "...=0;]L^{3}..."
    again = make_program(p.name, p.inputs, p.outputs, parse_body(nb.leir))
    assert again.to_leir() == nb.leir


def test_conv2d_one_neighbour_per_padded_axis(engine):
    nbs = neighbours(engine, prog(CONV2D, *IO2))
    assert sorted((dict(nb.provenances[0].params)["axis"], dict(nb.provenances[0].params)["seam"]) for nb in nbs) \
        == [("c", 3), ("d", 4)]
    by_axis = {dict(nb.provenances[0].params)["axis"]: nb.leir for nb in nbs}
    # along d (extent 5, padded 7 = 1+5+1): J is H's first 6 columns then I from column 1 on
    assert "L^{6}_{d=0}[J^{f32,g}_{tx,a,c,d+6}=I^{f32,g}_{tx,a,c,d+1};];" in by_axis["d"]
    assert "L^{10}_{d=0}L^{2}_{f=0}L^{3}_{g=0}L^{3}_{h=0}[K^{f32,g}_{tx,a,c,d}=" in by_axis["d"]
    assert "L^{1}_{d=0}[D^{f32,g}_{tx,a,c,d+4}=0;L^{2}_{f=0}L^{3}_{g=0}L^{3}_{h=0}[" in by_axis["d"]
    assert "L^{1}_{c=0}L^{5}_{d=0}[E^{f32,g}_{tx,a,c,d}=0;L^{2}_{f=0}" in by_axis["c"]


def test_names_and_window_order_do_not_matter(engine):
    text = (CONV1D.replace("H^", "Ha^").replace("I^", "Hb^").replace("D^", "Ya^").replace("E^", "Yb^")
            .replace("A^", "Xa^").replace("C^", "Xb^").replace("G^", "W^").replace("c+f", "f+c"))
    p = prog(text, [("Xa", [2, 3, 8]), ("Xb", [2, 3, 8]), ("W", [4, 3, 3])], [("F", [2, 4, 10])])
    (nb,) = neighbours(engine, p)
    assert "[Ya^{f32,g}_{tx,a,c+8}=0;L^{3}_{d=0}L^{3}_{f=0}[Ya^{f32,g}_{tx,a,c+8}=Ya^{f32,g}_{tx,a,c+8}+" \
           "Ha^{f32,g}_{tx,d,f+(c+8)}*W^{f32,g}_{a,d,f};];];" in nb.leir


# ------------------------------------------------------------------ guards


def test_guard_single_conv(engine):
    p = prog(PAD_A + CONV_D, [("A", [2, 3, 8]), ("G", [4, 3, 3])], [("D", [2, 4, 10])])
    assert texts(engine, p) == []


def test_no_crash_on_short_or_unrelated_programs(engine):
    """The reference indexed statements 0-3 unconditionally and crashed on these."""
    p = prog("B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];", [("A", [4])], [("C", [4])])
    assert texts(engine, p) == []
    p = prog("B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+A^{f32,g}_{tx,a};];"
             "B^{4}_{tx=0}[D^{f32,g}_{tx}=C^{f32,g}_{tx}*2;];", [("A", [4, 8])], [("D", [4])])
    assert texts(engine, p) == []


def test_guard_different_weights(engine):
    text = PAD_A + CONV_D + PAD_C + CONV_E.replace("G^", "Gb^") + SUM
    p = prog(text, [("A", [2, 3, 8]), ("C", [2, 3, 8]), ("G", [4, 3, 3]), ("Gb", [4, 3, 3])], [("F", [2, 4, 10])])
    assert texts(engine, p) == []


def test_guard_different_padding(engine):
    # the second input padded by 3 on the left and 1 on the right: same extents, different cond
    pad_c = PAD_C.replace("2<=c<10", "3<=c<11").replace("c-2", "c-3")
    assert texts(engine, conv1d(PAD_A + CONV_D + pad_c + CONV_E + SUM)) == []
    # the second input padded more (different loops)
    pad_c = PAD_C.replace("L^{12}", "L^{14}").replace("2<=c<10", "3<=c<11").replace("c-2", "c-3")
    conv_e = CONV_E.replace("L^{10}_{c=0}", "L^{12}_{c=0}")
    text = PAD_A + CONV_D + pad_c + conv_e + "B^{2}_{tx=0}L^{4}_{a=0}L^{10}_{c=0}[F^{f32,g}_{tx,a,c}=D^{f32,g}_{tx,a,c}+E^{f32,g}_{tx,a,c+1};];"
    assert texts(engine, conv1d(text)) == []


def test_guard_unpadded_or_full_window(engine):
    # no left padding (lo = 0): nothing to correct on the second output; not a padded op
    text = CONV1D.replace("if_then_else(2<=c<10,A^{f32,g}_{tx,a,c-2},0)", "if_then_else(c<8,A^{f32,g}_{tx,a,c},0)") \
        .replace("if_then_else(2<=c<10,C^{f32,g}_{tx,a,c-2},0)", "if_then_else(c<8,C^{f32,g}_{tx,a,c},0)")
    assert texts(engine, conv1d(text)) == []


def test_guard_second_pair_depends_on_first(engine):
    # the second padding reads the first conv's output: the convs are sequential, not twins
    text = PAD_A + CONV_D + PAD_C.replace("C^{f32,g}", "D^{f32,g}") + CONV_E + SUM
    p = prog(text, [("A", [2, 3, 8]), ("G", [4, 3, 3])], [("F", [2, 4, 10])])
    assert texts(engine, p) == []
    # the same program with the second input independent does fire
    assert len(texts(engine, conv1d())) == 1


def test_guard_weight_reads_the_padded_tensor(engine):
    # X = X + H*H-like windows: the "weight" reads H itself, so it cannot be shared by the fused conv
    w = "H^{f32,g}_{tx,d,c+f}"
    text = PAD_A + CONV_D.replace("G^{f32,g}_{a,d,f}", w) + PAD_C + CONV_E.replace("G^{f32,g}_{a,d,f}", w) + SUM
    assert texts(engine, conv1d(text)) == []


def test_guard_accumulating_onto_written_value(engine):
    # D already holds a bias: its conv has no zero init, so it cannot be split off a fused conv
    bias = "B^{2}_{tx=0}L^{4}_{a=0}L^{10}_{c=0}[D^{f32,g}_{tx,a,c}=G^{f32,g}_{a,0,0};];"
    assert texts(engine, conv1d(bias + CONV1D)) == []


# ------------------------------------------------------------------ numeric verification


def test_conv1d_verifies_bitwise(engine):
    from lowering.verify import verify
    p = conv1d()
    (nb,) = neighbours(engine, p)
    r = verify(p, nb.program, trials=3)
    assert r.equal and r.max_abs_err == 0.0, (r.error, r.max_abs_err)


def test_conv2d_both_axes_verify_bitwise(engine):
    from lowering.verify import verify
    p = prog(CONV2D, *IO2)
    nbs = neighbours(engine, p)
    assert len(nbs) == 2
    for nb in nbs:
        r = verify(p, nb.program, trials=3)
        assert r.equal and r.max_abs_err == 0.0, (dict(nb.provenances[0].params), r.error, r.max_abs_err)


# ------------------------------------------------------------------ corpus



@pytest.fixture(scope="module")
def corpus_neighbours(engine):
    from lowering.tir import lower_to_tvmscript
    out = {}
    for rec in corpus_records():
        nbs = neighbours(engine, program_from_json(rec))
        for nb in nbs:
            lower_to_tvmscript(nb.program, "llvm")
            p = nb.program
            assert make_program(p.name, p.inputs, p.outputs, parse_body(nb.leir)).to_leir() == nb.leir
        out[rec["name"]] = nbs
    return out


def test_corpus_coverage(corpus_neighbours):
    want = set()
    for line in (CORPUS / "reference_coverage.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if S35 in rec["strategies"]:
            want.add(rec["name"])
    assert want == {"conv1d_conv1d_padding"}
    fired = {name for name, nbs in corpus_neighbours.items() if nbs}
    assert want <= fired
    assert fired == want  # the guard is specific: no other corpus program has a padded twin pair


def test_corpus_conv1d_matches_reference_seam(corpus_neighbours):
    (nb,) = corpus_neighbours["conv1d_conv1d_padding"]
    # the reference corrects D at 512, 513 and E at 0, 1 (strategies.md S35 example)
    assert "L^{2}_{c=0}[D^{f32,g}_{tx,a,c+512}=0;L^{3}_{d=0}L^{3}_{f=0}[D^{f32,g}_{tx,a,c+512}=" in nb.leir
    assert "L^{2}_{c=0}[E^{f32,g}_{tx,a,c}=0;L^{3}_{d=0}L^{3}_{f=0}[E^{f32,g}_{tx,a,c}=" in nb.leir
    assert "L^{1026}_{c=0}L^{3}_{d=0}L^{3}_{f=0}[K^{f32,g}_{tx,a,c}=K^{f32,g}_{tx,a,c}+J^{f32,g}_{tx,d,c+f}*" in nb.leir


def shrink(name, mapping):
    rec = next(r for r in corpus_records() if r["name"] == name)
    rec = json.loads(json.dumps(rec))
    rec["leir"] = re.sub(r"\d+", lambda m: str(mapping.get(int(m.group(0)), int(m.group(0)))), rec["leir"])
    for d in rec["inputs"] + rec["outputs"]:
        d["shape"] = [mapping.get(s, s) for s in d["shape"]]
    return program_from_json(rec)


def test_reduced_corpus_program_verifies_bitwise(engine):
    """conv1d_conv1d_padding at batch 2, 8 output channels, length 16 (padded 20, output 18)."""
    from lowering.verify import verify
    p = shrink("conv1d_conv1d_padding", {16: 2, 64: 8, 512: 16, 514: 18, 516: 20})
    assert "if_then_else(2<=c<18," in p.to_leir()
    (nb,) = neighbours(engine, p)
    r = verify(p, nb.program, trials=3)
    assert r.equal and r.max_abs_err == 0.0, (r.error, r.max_abs_err)
