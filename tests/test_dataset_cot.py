"""Chain-of-thought traces: rendered from the rule block's ``@cot`` templates and the step's
provenance, and every claim re-derived by the checker (dataset.text.cot, dataset.check.claims,
engine.rewrite.cot_template).

Programs: small corpus programs (shrunk) chosen so that every strategy has steps, probe
equations for the algebraic strategies, and the attention example before and after its
online-softmax step. Every step of them must get a strategy-specific trace (never the generic
fallback) whose claims all hold; traces with a wrong name, count, factor, statement or
description must be caught.
"""
from __future__ import annotations

import functools
import re
from dataclasses import replace

import pytest
from conftest import EXAMPLES, corpus_records

from dataset.text import cot
from dataset.check import claims
from dataset.generate.shrink import shrink_program
from engine import Engine, load_program
from engine.leir.diagnostics import LeirError
from engine.leir.files import program_from_json
from engine.rewrite import cot_template
from engine.rewrite.rulebook import load_rulebook
from rulekit import rule_file_dir

CORPUS_PROGRAMS = ("Matmul3D", "softmax", "Hingeloss", "Matmul_for_symmetric_matrices", "Sigmoid", "GELU",
                   "Max_Pooling_1D", "Average_Pooling_3D", "Argmax_over_a_dimension", "HuberLoss",
                   "CosineSimilarityLoss", "GroupNorm", "cumsum_exclusive", "conv1d_conv1d_padding")
_X, _Y = "A^{f32,g}_{tx,a}", "C^{f32,g}_{tx,a}"
PROBES = (f"{_X}/2+{_Y}/2", f"(exp(2*{_X})-1)/(exp(2*{_X})+1)", f"exp({_X})*exp(-{_Y})", f"2*{_X}+3*{_X}",
          f"log(exp({_X})+1)+log(exp({_Y})+1)", f"log((exp({_X})+1)*(exp({_Y})+1))")


def _probe(k: int, rhs: str):
    decl = [{"name": n, "dtype": "f32", "shape": [4, 8]} for n in "AC" if f"{n}^" in rhs]
    return program_from_json({"name": f"probe_{k}", "inputs": decl,
                              "outputs": [{"name": "F", "dtype": "f32", "shape": [4, 8]}],
                              "leir": f"B^{{4}}_{{tx=0}}L^{{8}}_{{a=0}}[F^{{f32,g}}_{{tx,a}}={rhs};];"})


@functools.cache
def engine():
    return Engine(strategies="all")


@functools.cache
def programs() -> tuple:
    recs = {r["name"]: r for r in corpus_records()}
    out = [shrink_program(program_from_json(recs[n])) for n in CORPUS_PROGRAMS if n in recs]
    out += [_probe(k, rhs) for k, rhs in enumerate(PROBES)]
    att = shrink_program(load_program(EXAMPLES / "attention.leir"))
    out.append(att)
    online = engine().enumerate(att, strategies=["online_softmax"])
    out.append(replace(online[0].program, name="attention_online_softmax"))
    return tuple(p for p in out if p is not None)


@functools.cache
def steps() -> tuple:
    eng = engine()
    return tuple((p, s) for p in programs() for s in eng.enumerate(p))


def description(strategy: str) -> str:
    return engine().strategy(strategy).meta["description"]


def block(strategy: str):
    return engine().strategy(strategy)


def trace(p, s) -> str:
    return cot.render(block(s.strategy), p, s.program, s)


def check(text, p, s, step=None) -> list[str]:
    return claims.check_trace(text, block(s.strategy), p, s.program, step or s)


def first(strategy: str):
    return next((p, s) for p, s in steps() if s.strategy == strategy)


def _is_generic(text: str) -> bool:
    body = text.split(cot.INSTANCE_OPENING, 1)[1]
    return any(claims.template_regex(g).fullmatch(body) for g in cot_template.GENERIC)


PER_RULE = 20      # steps of each rule checked (the first ones, in program and enumeration order)


def test_every_strategy_has_a_specific_trace_whose_claims_hold():
    if not corpus_records():
        pytest.skip("corpus not available")
    seen, problems, per_rule = set(), [], {}
    for p, s in steps():
        per_rule[s.rule] = per_rule.get(s.rule, 0) + 1
        if per_rule[s.rule] > PER_RULE:
            continue
        text = trace(p, s)
        assert text.startswith(f"The strategy {s.strategy.replace('_', ' ')} is used on the given IR: it "
                               f"{description(s.strategy).rstrip('.')}. Under the given IR, ")
        if s.strategy != "dead_code_elimination" and _is_generic(text):
            problems.append(f"{s.strategy} ({s.rule}) on {p.name}: generic trace")
        found = check(text, p, s)
        if found:
            problems.append(f"{s.strategy} ({s.rule}) on {p.name}: {found}")
        seen.add(s.strategy)
    assert not problems, "\n".join(problems[:20])
    assert seen == set(engine().strategies), sorted(set(engine().strategies) - seen)


def test_loop_split_trace_states_the_loops_and_the_factor():
    p, s = first("loop_split")
    text = trace(p, s)
    m = re.search(r"`(\w+)` of extent (\d+) becomes `(\w+)` of extent (\d+) and `(\w+)` of extent (\d+), "
                  r"a split by a factor of (\d+)\.(?= This can improve |$)", text)
    assert m, text
    var, n, outer, n_outer, inner, n_inner, factor = m.groups()
    assert inner == var and int(n_outer) * int(n_inner) == int(n) and int(factor) == int(n_inner)
    assert outer not in {l.var for l in p.body[s.site[0]].loops}
    assert f"_{{{outer}=0}}" in s.program.to_leir()


@pytest.mark.parametrize("strategy, edit", [
    ("loop_split", lambda t: re.sub(r"factor of (\d+)", lambda m: f"factor of {int(m[1]) + 1}", t)),
    ("loop_split", lambda t: re.sub(r"of extent (\d+) becomes", lambda m: f"of extent {int(m[1]) * 2} becomes", t)),
    ("operator_fusion", lambda t: re.sub(r" and `[^`]+` have the same", " have the same", t)),
    ("set_storage_scope", lambda t: t.replace("local memory", "shared memory").replace("global memory", "shared memory")),
    ("cache_read_write", lambda t: re.sub(r"as `([A-Z][a-z]*)`", "as `Zz`", t, count=1)),
    ("expression_splitting", lambda t: re.sub(r"introducing `([A-Z][a-z]*)`", "introducing `A`", t)),
    ("reduction_factorization", lambda t: re.sub(r"over (\d+) and (\d+)", lambda m: f"over {m[2]} and {m[1]}9", t)),
    ("loop_reorder", lambda t: re.sub(r"the loops `(\w+)` and `(\w+)` exchange", r"the loops `\2` and `tx` exchange", t)),
    ("operator_fission", lambda t: re.sub(r"with (\d+) equations", lambda m: f"with {int(m[1]) + 1} equations", t)),
    ("common_subexpression_elimination", lambda t: re.sub(r"the common part `([^`]+)`", "the common part `1`", t)),
    ("expand_powsimp", lambda t: t.replace("transform as `E", "transform as `X", 1) if "as `E" in t else t + " "),
])
def test_the_checker_catches_a_false_claim(strategy, edit):
    p, s = first(strategy)
    text = trace(p, s)
    assert check(text, p, s) == []
    bad = edit(text)
    assert bad != text
    assert check(bad, p, s), bad


def test_the_checker_catches_a_trace_of_another_step():
    p, s = first("loop_unrolling")
    other = next(t for q, t in steps() if q is p and t.strategy == "loop_unrolling" and t.key != s.key)
    text = trace(p, other)
    assert check(text, p, s)


def test_the_description_part_is_the_rule_blocks_sentence():
    p, s = first("online_softmax")
    text = trace(p, s)
    wrong = text.replace(description("online_softmax"), description("normal_loop_summation_on_exp_to_prefix_"
                                                                    "summation_on_exp"))
    assert check(wrong, p, s) == \
        ["the trace does not open with the description sentence of online_softmax"]


def test_a_statement_that_occurs_twice_is_quoted_once_where_the_rule_applied():
    stmt = "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
    p = program_from_json({"name": "twice", "inputs": [{"name": "A", "dtype": "f32", "shape": [4, 8]}],
                           "outputs": [{"name": "C", "dtype": "f32", "shape": [4, 8]}], "leir": stmt + stmt})
    unroll = [s for s in Engine(strategies=["loop_unrolling"]).enumerate(p) if s.site == (1,)]
    assert unroll
    s = unroll[0]
    text = cot.render(block(s.strategy), p, s.program, s)
    assert text.count(f"of `{stmt}` can be unrolled") == 1
    assert check(text, p, s) == []
    # quoting the untouched copy's site instead is caught
    assert check(text, p, s, {"rule": s.rule, "site": (0,), "params": s.params})


def test_statements_the_rewrite_leaves_unchanged_are_not_claimed_removed():
    p, s = first("set_storage_layout")
    text = trace(p, s)
    assert "from `" in text and "; all occurrences of" in text
    facts = cot.Facts(s.strategy, p, s.program, s.site)
    unchanged = [t for t in facts.b if t in facts.a]
    assert all(t not in (facts.removed or []) for t in unchanged)


def test_a_rule_variant_has_its_own_template_first():
    """cache_read_write/write is tried with its own line first (written from ...), every other
    rule of the block with the block's lines (read into ... first)."""
    seen = set()
    for p, s in steps():
        if s.strategy == "cache_read_write" and s.rule not in seen:
            seen.add(s.rule)
            want = "can be written from" if s.rule == "cache_read_write/write" else "can be read into"
            assert want in trace(p, s), (s.rule, trace(p, s))
    assert seen == {"cache_read_write/read", "cache_read_write/write"}


# a strategy that is not one of the project's, in a rules folder of its own
USER = """
;; @strategy loop_mark_unrolled
;; @category operator
;; @difficulty medium
;; @K 0 @P 1 @S 0
;; @inverse none
;; @exactness bitwise
;; @description marks one serial loop of a nest for the compiler to unroll
;; @cot the loop {param.loop} of {stmt} is marked {loop_kind}, which gives {stmt_after}.
;; @example
;;   input  A f32[4, 8]
;;   output C f32[4, 8]
;;   B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];
;; @after loop_mark_unrolled loop=a
;;   B^{4}_{tx=0}U^{8}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];
(rule ((= s (Nest ls body)) (LoopAt ls i l) (= l (Lp "L" v n)) (> n 1) (< n 1024))
      ((Step s (Nest (LSet ls i (Lp "U" v n)) body) "loop_mark_unrolled" (PStr "loop" v (PNil))))
      :ruleset step :name "loop_mark_unrolled")
"""
_STMT = "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"


def _user_steps(tmp_path, text):
    eng = Engine(rules=rule_file_dir(tmp_path, text))
    p = program_from_json({"name": "one", "inputs": [{"name": "A", "dtype": "f32", "shape": [4, 8]}],
                           "outputs": [{"name": "C", "dtype": "f32", "shape": [4, 8]}], "leir": _STMT})
    steps = eng.enumerate(p)
    assert [s.strategy for s in steps] == ["loop_mark_unrolled"]
    return eng.strategy("loop_mark_unrolled"), p, steps[0]


def test_a_user_strategy_renders_its_own_template_and_the_checker_checks_it(tmp_path):
    blk, p, s = _user_steps(tmp_path, USER)
    text = cot.render(blk, p, s.program, s)
    after = _STMT.replace("L^{8}_{a=0}", "U^{8}_{a=0}")
    assert text == ("The strategy loop mark unrolled is used on the given IR: it marks one serial loop of a nest for "
                    f"the compiler to unroll. Under the given IR, the loop `a` of `{_STMT}` is marked unrolled, "
                    f"which gives `{after}`.")
    assert claims.check_trace(text, blk, p, s.program, s) == []
    for wrong in (text.replace("marked unrolled", "marked vectorized"),          # a fact
                  text.replace("the loop `a`", "the loop `tx`"),                  # the rule's parameter
                  text.replace(f"which gives `{after}`", f"which gives `{_STMT}`")):
        assert claims.check_trace(wrong, blk, p, s.program, s), wrong


def test_a_block_without_cot_lines_gets_the_generic_sentence(tmp_path):
    blk, p, s = _user_steps(tmp_path, "\n".join(x for x in USER.split("\n") if "@cot" not in x))
    assert blk.cot == []
    text = cot.render(blk, p, s.program, s)
    assert text.endswith(f" Under the given IR, `{_STMT}` can be rewritten as "
                         f"`{_STMT.replace('L^{8}_{a=0}', 'U^{8}_{a=0}')}`.")
    assert claims.check_trace(text, blk, p, s.program, s) == []


@pytest.mark.parametrize("template, message", [
    ("the loop {param.loop} of {stmnt} is marked.", "unknown slot {stmnt} (a fact of docs/dataset.md's table, or "
                                                    "{param.KEY} for a rule parameter); did you mean {stmt}?"),
    ("the loop {param.loop:float} is marked.", "{param.loop:float}: unknown format 'float'"),
    ("the loop {param.factor} is marked.", "{param.factor}: no rule of block 'loop_mark_unrolled' writes a "
                                           "parameter 'factor'"),
    ("loop_mark_unrolled/fast: the loop {param.loop} is marked.", "@cot loop_mark_unrolled/fast: not a rule of "
                                                                  "block 'loop_mark_unrolled'"),
    ("the loop {param.loop} of {stmt is marked.", "unbalanced brace"),
])
def test_a_bad_template_is_an_error_at_its_line_when_the_rules_load(tmp_path, template, message):
    line = "the loop {param.loop} of {stmt} is marked {loop_kind}, which gives {stmt_after}."
    d = rule_file_dir(tmp_path, USER.replace(line, template))
    found = [(f, n, m) for f, n, m in load_rulebook(d).problems]
    assert len(found) == 1 and found[0][:2] == (str(d / "x.egg"), 9) and message in found[0][2], found
    with pytest.raises(LeirError) as e:
        Engine(rules=d)
    assert e.value.line == 9 and message in e.value.message


def test_every_project_template_names_known_slots_and_parameters():
    book = load_rulebook()
    assert book.problems == []
    for st in book.strategies:
        assert st.cot, f"{st.name} has no @cot line"
        for t in st.cot:
            assert t.rule is None or t.rule in st.rules


def test_the_docs_list_every_fact():
    from conftest import ROOT
    text = (ROOT / "docs" / "dataset.md").read_text()
    assert [f for f in cot_template.FACTS if f"| `{{{f}}}` |" not in text] == []


def test_the_checker_shares_only_formats_and_templates_with_the_renderer():
    """dataset.check.claims re-derives every fact itself: from dataset.text.cot it takes the formats and the
    description sentence, never the facts or the renderer."""
    import ast
    from conftest import ROOT
    tree = ast.parse((ROOT / "dataset" / "check" / "claims.py").read_text())
    taken = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module in ("text.cot", "dataset.text.cot")
             for a in n.names}
    assert taken and taken <= {"FORMATS", "INSTANCE_OPENING", "TAGS", "description_sentence", "display_name"}, taken


def test_a_loop_superscript_is_not_a_tensor_name():
    """`V^{8}_{a=0}` is a vectorized loop, not a tensor V: inlining J out of it removes one tensor."""
    eng = Engine(strategies=["compute_inline"])
    p = program_from_json({"name": "v", "inputs": [{"name": "A", "dtype": "f32", "shape": [4, 8]}],
                           "outputs": [{"name": "C", "dtype": "f32", "shape": [4, 8]}],
                           "leir": "B^{4}_{tx=0}V^{8}_{a=0}[J^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
                                   "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=J^{f32,g}_{tx,a}+1;];"})
    (s,) = eng.enumerate(p)
    text = cot.render(eng.strategy(s.strategy), p, s.program, s)
    assert "related through the tensor `J`, which is inlined" in text
    assert claims.check_trace(text, eng.strategy(s.strategy), p, s.program, s) == []
