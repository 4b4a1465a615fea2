"""Range guards (issue 14): rules whose result can overflow where the original does not fire
only on f32 / f64 arithmetic. Each one still fires on an f32 program and no longer on the same
program in f16 (or bf16, or f32 output over f16 reads); rules without the hazard still fire on f16."""
from __future__ import annotations

import pytest

from conftest import EXAMPLES
from engine import Engine, load_program
from engine.rewrite.rulebook import RANGE_RELATIONS, load_rulebook, read_sexps
from rulekit import prog

R = "B^{4}_{tx=0}L^{8}_{a=0}"
A, C, D = "A^{f32,g}_{tx,a}", "C^{f32,g}_{tx,a}", "D^{f32,g}_{tx,a}"

# (rule, right-hand side of F_{tx,a} = ... over A, C, D) where the rule fires on f32
ELEMENTWISE = [
    ("cancellation/exp_pair_quotient", f"(exp({A})-exp(-{A}))/(exp({A})+exp(-{A}))"),
    ("cancellation/reciprocal_exp", f"1/(1+exp(-{A}))"),
    ("expand_cancellation/exp_pair_quotient", f"(exp(2*{A})-1)/(exp(2*{A})+1)"),
    ("together/term_right", f"{A}/{C}+{D}"),
    ("together/term_left", f"{D}+{A}/{C}"),
    ("together/term_right_difference", f"{A}/{C}-{D}"),
    ("together/term_left_difference", f"{D}-{A}/{C}"),
    ("together/two_fractions", f"{A}/{C}+{D}/{A}"),
    ("together/scaled_fraction", f"{D}*({A}/{C})"),
    ("expand_powsimp/exp_sum", f"exp({A}+{D})"),
    ("expand_powsimp/exp_difference", f"exp({A}-{D})"),
    ("expand_powsimp/exp_difference_quotient", f"exp({A}-{D})"),
    ("expand_powsimp/power_sum", f"2**({A}+{D})"),
    ("logsimp/product", f"log(exp({A}))+log(exp({D}))"),
    ("logsimp/quotient", f"log(exp({A}))-log(exp({D}))"),
    ("logsimp/power", f"{C}*log(exp({A}))"),
    ("exponential_split/ref", f"exp({A})"),
    ("exponential_split/difference", f"exp({A}-{D})"),
    ("exponential_split/sum", f"exp({A}+{D})"),
    ("exponential_split/negation", f"exp(-{A})"),
    ("multiplicative_split/previous_element", f"{A}+1"),
]
# (rule, right-hand side) of rules with no range hazard: they fire on f16 too
UNGUARDED = [
    ("powsimp/exp_product", f"exp({A})*exp({D})"),
    ("expand_powsimp/square", f"{A}**2"),
    ("expand_cancellation/reciprocal_exp", f"exp({A})/(exp({A})+1)"),
    ("apart/polynomial_part_right", f"({A}+{D}*{C})/{C}"),
    ("factorization/common_divisor_sum", f"{A}/2+{D}/2"),
    ("expand_log/product", f"log(exp({A})*exp({D}))"),
    ("additive_split/previous_element", f"{A}*2"),
]
PRODUCT = "B^{4}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{tx}=F^{f32,g}_{tx}*A^{f32,g}_{tx,a};];"
SUM = PRODUCT.replace("*A", "+A")
REDUCTIONS = [("reduction_factorization/product", PRODUCT), ("tensor_split_to_decouple_operators/reduction", PRODUCT),
              ("reduction_vectorization/product", PRODUCT)]
SUM_REDUCTIONS = [("reduction_factorization/sum", SUM), ("tensor_split_to_decouple_operators/reduction", SUM)]


@pytest.fixture(scope="module")
def engine():
    return Engine(strategies="all")


def elementwise(rhs: str, dtype: str = "f32", reads: str | None = None):
    """F_{tx,a} = rhs; F of ``dtype``, A, C, D of ``reads`` (default: the same)."""
    reads = reads or dtype
    body = f"{R}[F^{{f32,g}}_{{tx,a}}={rhs};];".replace("f32", reads).replace(f"F^{{{reads},g}}", f"F^{{{dtype},g}}")
    return prog(body, {n: (reads, (4, 8)) for n in "ACD"}, {"F": (dtype, (4, 8))})


def reduction(body: str, dtype: str = "f32"):
    return prog(body.replace("f32", dtype), {"A": (dtype, (4, 8))}, {"F": (dtype, (4,))})


def fired(engine, program, rule) -> bool:
    strategy = rule.split("/")[0]
    return any(rule in [s.rule] + [a.rule for a in s.alternatives] for s in engine.enumerate(program, strategy))


@pytest.mark.parametrize("rule,rhs", ELEMENTWISE, ids=[r for r, _ in ELEMENTWISE])
def test_range_dependent_math_rule_fires_on_f32_only(engine, rule, rhs):
    assert fired(engine, elementwise(rhs), rule)
    assert fired(engine, elementwise(rhs, "f64"), rule)
    assert not fired(engine, elementwise(rhs, "f16"), rule)
    assert not fired(engine, elementwise(rhs, "bf16"), rule)
    # f32 output, f16 reads: the expression is still computed in f16 (the operands' type)
    assert not fired(engine, elementwise(rhs, "f32", reads="f16"), rule)


@pytest.mark.parametrize("rule,rhs", UNGUARDED, ids=[r for r, _ in UNGUARDED])
def test_rules_without_a_range_hazard_still_fire_on_f16(engine, rule, rhs):
    assert fired(engine, elementwise(rhs), rule)
    assert fired(engine, elementwise(rhs, "f16"), rule)


@pytest.mark.parametrize("rule,body", REDUCTIONS + SUM_REDUCTIONS,
                         ids=[f"{r}-{'product' if '*' in b else 'sum'}" for r, b in REDUCTIONS + SUM_REDUCTIONS])
def test_partial_products_need_wide_floats(engine, rule, body):
    assert fired(engine, reduction(body), rule)
    assert fired(engine, reduction(body, "f16"), rule) == (body == SUM)     # partial sums: no hazard


def _attention(dtype: str):
    p = load_program(EXAMPLES / "attention.leir")
    assert "f32" in p.to_leir()
    from engine.leir.ast import TensorDecl
    from engine.leir.parser import parse_body
    from engine.leir.program import make_program
    decl = lambda ds: tuple(TensorDecl(d.name, dtype if d.dtype == "f32" else d.dtype, d.shape) for d in ds)  # noqa: E731
    return make_program(p.name, decl(p.inputs), decl(p.outputs), parse_body(p.to_leir().replace("f32", dtype)))


def test_flash_attention_and_prefix_matmul_need_wide_floats(engine):
    for dtype, expect in (("f32", True), ("f16", False)):
        p = _attention(dtype)
        assert fired(engine, p, "flashattention_wo_tiling") == expect, dtype
        # online_softmax has no range hazard: it fires at f16 too, and the prefix matmul after it
        # only on f32
        online = [s for s in engine.enumerate(p, "online_softmax") if s.rule == "online_softmax"]
        assert online, dtype
        q = online[0].program
        assert fired(engine, q, "normal_matmul_to_prefix_matmul_based_on_online_softmax") == expect, dtype


def _guarded_rules() -> dict[str, str]:
    """Every rule whose query uses a range relation, with its strategy, from the rules egglog runs."""
    book = load_rulebook()
    out = {}
    for f in book.files[book.schema_count:]:           # the strategy files, not the schema's
        for form in read_sexps(book.text(f)):
            if form.head != "rule":
                continue
            if _atoms(form.value[1]) & set(RANGE_RELATIONS):
                name = next(form.value[i + 1].value.strip('"') for i, x in enumerate(form.value[:-1])
                            if not x.is_list and x.value == ":name")
                out[name] = name.split("/")[0]
    return out


def _atoms(x) -> set[str]:
    return {x.value} if not x.is_list else set().union(*(_atoms(c) for c in x.value)) if x.value else set()


def test_every_range_guarded_rule_has_a_regression_case_and_its_block_says_why():
    guarded = _guarded_rules()
    covered = {r for r, _ in ELEMENTWISE + REDUCTIONS} | {"flashattention_wo_tiling",
                                                          "normal_matmul_to_prefix_matmul_based_on_online_softmax"}
    assert set(guarded) == covered
    by_name = load_rulebook().by_name()
    for _rule, strategy in guarded.items():
        assert by_name[strategy].range, strategy
    assert {s.name for s in by_name.values() if s.range} == set(guarded.values())
