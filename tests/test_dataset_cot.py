"""Chain-of-thought traces: rendered from the rule block and the step's provenance, and every
claim re-derived by the checker (dataset.cot, dataset.claims).

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

from dataset import claims, cot
from dataset.shrink import shrink_program
from engine import Engine, load_program
from engine.leir.files import program_from_json

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


def trace(p, s) -> str:
    return cot.render(s.strategy, description(s.strategy), p, s.program, s.site, s.rule)


def first(strategy: str):
    return next((p, s) for p, s in steps() if s.strategy == strategy)


def _is_generic(text: str) -> bool:
    body = text.split(cot.INSTANCE_OPENING, 1)[1]
    return any(re.fullmatch(claims._template_regex(g), body) for g in cot.GENERIC)


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
        found = claims.check_trace(text, s.strategy, description(s.strategy), p, s.program, s.site)
        if found:
            problems.append(f"{s.strategy} ({s.rule}) on {p.name}: {found}")
        seen.add(s.strategy)
    assert not problems, "\n".join(problems[:20])
    assert seen == set(engine().strategies), sorted(set(engine().strategies) - seen)


def test_loop_split_trace_states_the_loops_and_the_factor():
    p, s = first("loop_split")
    text = trace(p, s)
    m = re.search(r"`(\w+)` of extent (\d+) becomes `(\w+)` of extent (\d+) and `(\w+)` of extent (\d+), "
                  r"a split by a factor of (\d+)\.$", text)
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
    assert claims.check_trace(text, s.strategy, description(strategy), p, s.program, s.site) == []
    bad = edit(text)
    assert bad != text
    assert claims.check_trace(bad, s.strategy, description(strategy), p, s.program, s.site), bad


def test_the_checker_catches_a_trace_of_another_step():
    p, s = first("loop_unrolling")
    other = next(t for q, t in steps() if q is p and t.strategy == "loop_unrolling" and t.key != s.key)
    text = trace(p, other)
    assert claims.check_trace(text, s.strategy, description(s.strategy), p, s.program, s.site)


def test_the_description_part_is_the_rule_blocks_sentence():
    p, s = first("online_softmax")
    text = trace(p, s)
    wrong = text.replace(description("online_softmax"), description("normal_loop_summation_on_exp_to_prefix_"
                                                                    "summation_on_exp"))
    assert claims.check_trace(wrong, s.strategy, description(s.strategy), p, s.program, s.site) == \
        ["the trace does not open with the description sentence of online_softmax"]


def test_a_statement_that_occurs_twice_is_quoted_once_where_the_rule_applied():
    stmt = "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
    p = program_from_json({"name": "twice", "inputs": [{"name": "A", "dtype": "f32", "shape": [4, 8]}],
                           "outputs": [{"name": "C", "dtype": "f32", "shape": [4, 8]}], "leir": stmt + stmt})
    unroll = [s for s in Engine(strategies=["loop_unrolling"]).enumerate(p) if s.site == (1,)]
    assert unroll
    s = unroll[0]
    text = cot.render(s.strategy, description(s.strategy), p, s.program, s.site, s.rule)
    assert text.count(f"of `{stmt}` can be unrolled") == 1
    assert claims.check_trace(text, s.strategy, description(s.strategy), p, s.program, s.site) == []
    # quoting the untouched copy's site instead is caught
    assert claims.check_trace(text, s.strategy, description(s.strategy), p, s.program, (0,))


def test_statements_the_rewrite_leaves_unchanged_are_not_claimed_removed():
    p, s = first("set_storage_layout")
    text = trace(p, s)
    assert "from `" in text and "; all occurrences of" in text
    facts = cot.Facts(s.strategy, p, s.program, s.site, s.rule)
    unchanged = [t for t in facts.b if t in facts.a]
    assert all(t not in (facts.removed or []) for t in unchanged)
