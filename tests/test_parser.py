"""Parser and printer: corpus round trips, the display form, and random-AST properties."""
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import corpus_records
from engine.leir.ast import (BinOp, Call, Compare, Equation, Loop, Nest, Num, Ref, Unary, Var,
                        FUNCTIONS, strip_positions)
from engine.leir.diagnostics import LeirError
from engine.leir.parser import parse_body
from engine.leir.printer import body_to_display, body_to_str

RECORDS = corpus_records()


@pytest.mark.parametrize("rec", RECORDS, ids=[r["name"] for r in RECORDS])
def test_corpus_round_trip_is_byte_identical(rec):
    assert body_to_str(parse_body(rec["leir"])) == rec["leir"]


def _messy_display(text: str) -> str:
    """The display form with more whitespace and line breaks, inserted independently of the printer."""
    text = re.sub(r"(?<![<>=!])=(?!=)", " = ", text.replace(",", " ,\n   ").replace("[", "[\n\t"))
    return re.sub(r"\];", "]\n ;", text)


@pytest.mark.parametrize("rec", RECORDS, ids=[r["name"] for r in RECORDS])
def test_display_form_parses_to_the_same_ast(rec):
    body = parse_body(rec["leir"])
    display = body_to_display(body)
    assert "^{" in display and "_{" in display
    # subscript first everywhere: a tensor name is followed by "_{" unless it is rank 0
    assert not re.search(r"[A-Z][a-z]*\^\{[a-z0-9]+,[gsl]\}_\{", display)
    assert parse_body(display) == body
    assert parse_body(_messy_display(display)) == body
    assert body_to_str(parse_body(display)) == rec["leir"]


def test_display_form_of_paper_example():
    paper = ("B_{tx=0}^{719} L_{a=0}^{549} L_{c=0}^{32}\n"
             "  [D_{tx,a}^{f32,g} = D_{tx,a}^{f32,g} + A_{tx,c}^{f32,g} \\times C_{c,a}^{f32,g};];")
    assert body_to_str(parse_body(paper)) == (
        "B^{719}_{tx=0}L^{549}_{a=0}L^{32}_{c=0}"
        "[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];")


def test_nested_sub_nest_round_trips():
    text = ("B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,l}_{tx,a}=A^{f32,g}_{tx,a};"
            "L^{16}_{i=0}[E^{f32,g}_{tx,a,i}=D^{f32,l}_{tx,a}*2;];];")
    body = parse_body(text)
    assert isinstance(body[0].body[1], Nest)
    assert body[0].body[1].loops[0] == Loop("L", "i", 16)
    assert body_to_str(body) == text


def test_structure_of_parsed_expression():
    (nest,) = parse_body("B^{4}_{tx=0}[C^{f32,g}_{tx}=-A^{f32,g}_{tx}**2+if_then_else(2<=tx<3&tx!=1,1.5e-3,-inf);];")
    eq = nest.body[0]
    a = Ref("A", "f32", "g", (Var("tx"),))
    assert eq.rhs == BinOp("+", Unary("-", BinOp("**", a, Num("2"))),
                           Call("if_then_else", (BinOp("&", Compare(("<=", "<"), (Num("2"), Var("tx"), Num("3"))),
                                                       Compare(("!=",), (Var("tx"), Num("1")))),
                                                 Num("1.5e-3"), Unary("-", Num("inf")))))


def test_redundant_parentheses_are_kept_and_ignored_by_equality():
    a = parse_body("B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{(tx+0)+0};];")
    b = parse_body("B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx+0+0};];")
    assert a == b
    assert body_to_str(a) == "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{(tx+0)+0};];"
    assert body_to_str((strip_positions(a[0]),)) == "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx+0+0};];"


def test_printer_adds_parentheses_precedence_requires():
    x, y, z = (Ref(n, "f32", "g") for n in "ACD")
    cases = {
        BinOp("*", BinOp("+", x, y), z): "(A^{f32,g}+C^{f32,g})*D^{f32,g}",
        BinOp("-", x, BinOp("-", y, z)): "A^{f32,g}-(C^{f32,g}-D^{f32,g})",
        BinOp("**", BinOp("**", x, y), z): "(A^{f32,g}**C^{f32,g})**D^{f32,g}",
        BinOp("**", x, BinOp("**", y, z)): "A^{f32,g}**C^{f32,g}**D^{f32,g}",
        Unary("-", BinOp("+", x, y)): "-(A^{f32,g}+C^{f32,g})",
        BinOp("**", Unary("-", x), Num("2")): "(-A^{f32,g})**2",
        BinOp("/", x, BinOp("*", y, z)): "A^{f32,g}/(C^{f32,g}*D^{f32,g})",
    }
    for e, want in cases.items():
        text = f"B^{{1}}_{{tx=0}}[E^{{f32,g}}={want};];"
        body = (Nest((Loop("B", "tx", 1),), (Equation(Ref("E", "f32", "g"), e),)),)
        assert body_to_str(body) == text
        assert parse_body(text) == body


def test_loop_subscript_first_and_superscript_first_mix():
    a = parse_body("B_{tx=0}^{4}[C_{tx}^{f32,g}=A^{f32,g}_{tx};];")
    b = parse_body("B^{4}_{tx=0}[C^{f32,g}_{tx}=A_{tx}^{f32,g};];")
    assert a == b


# --------------------------------------------------------------------------- hypothesis

_vars = st.sampled_from(["tx", "a", "c", "d", "bx", "byc", "aa"])
_names = st.sampled_from(["A", "C", "D", "Aa", "Ch", "Zz"])
_dtypes = st.sampled_from(["f32", "f16", "f64", "i64", "bool", "i32"])
_nums = st.one_of(st.integers(0, 10**6).map(str),
                  st.builds(lambda a, b: f"{a}.{b}", st.integers(0, 999), st.integers(0, 999)),
                  st.builds(lambda a, e: f"{a}e-{e:02d}", st.integers(1, 9), st.integers(1, 12)),
                  st.just("inf"))


def _exprs(depth: int):
    leaves = st.one_of(st.builds(Num, _nums), st.builds(Var, _vars),
                       st.builds(Ref, _names, _dtypes, st.sampled_from("gsl"), st.just(())))
    if depth == 0:
        return leaves
    sub = _exprs(depth - 1)
    return st.one_of(
        leaves,
        st.builds(Ref, _names, _dtypes, st.sampled_from("gsl"), st.lists(sub, min_size=1, max_size=3).map(tuple)),
        st.builds(Unary, st.just("-"), sub),
        st.builds(BinOp, st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "&", "|"]), sub, sub),
        st.builds(lambda ops, xs: Compare(tuple(ops), tuple(xs)),
                  st.lists(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), min_size=1, max_size=2),
                  st.lists(sub, min_size=3, max_size=3)).map(
            lambda c: Compare(c.ops, c.operands[: len(c.ops) + 1])),
        st.sampled_from(sorted(FUNCTIONS)).flatmap(
            lambda f: st.lists(sub, min_size=FUNCTIONS[f], max_size=FUNCTIONS[f]).map(lambda a: Call(f, tuple(a)))),
    )


_loops = st.builds(Loop, st.sampled_from("LPVUB"), _vars, st.integers(1, 4096))


def _nests(depth: int):
    eq = st.builds(Equation, st.builds(Ref, _names, _dtypes, st.sampled_from("gsl"),
                                       st.lists(_exprs(1), max_size=3).map(tuple)), _exprs(3))
    item = eq if depth == 0 else st.one_of(eq, eq, _nests(depth - 1))
    return st.builds(Nest, st.lists(_loops, min_size=1, max_size=3).map(tuple),
                     st.lists(item, min_size=1, max_size=3).map(tuple))


def _prints_and_parses_back(body):
    text = body_to_str(body)
    assert parse_body(text) == body
    assert body_to_str(parse_body(text)) == text
    assert parse_body(body_to_display(body)) == body


_BODIES = st.lists(_nests(2), min_size=1, max_size=3).map(tuple)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_BODIES)
def test_random_asts_print_and_parse_back_to_themselves(body):
    _prints_and_parses_back(body)


@pytest.mark.slow           # the default run draws 100 bodies (the test above)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_BODIES)
def test_many_random_asts_print_and_parse_back_to_themselves(body):
    _prints_and_parses_back(body)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="B^{}_[]=;LtxaAf32,g+*-()0123456789 \n", max_size=80))
def test_random_text_never_crashes(text):
    try:
        parse_body(text)
    except LeirError as e:
        assert e.message and (e.line is None or e.line >= 1)


# --------------------------------------------------------------------------- hostile text

ONE = "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];"


@pytest.mark.parametrize("digit", ["٣", "８", "²", "𝟘", "१", "③"])
@pytest.mark.parametrize("where", ["B^{4}", "*2", "tx=0"])
def test_numbers_are_read_from_ascii_digits_only(digit, where):
    text = ONE.replace(where, where[:-1] + digit)
    with pytest.raises(LeirError, match=f"unexpected character '{digit}'") as ex:
        parse_body(text)
    assert text[ex.value.col - 1] == digit


def test_redundant_parentheses_add_no_depth_and_print_once():
    deep = ONE.replace("A^{f32,g}_{tx}", "(" * 20000 + "A^{f32,g}_{tx}" + ")" * 20000)
    body = parse_body(deep)
    assert body == parse_body(ONE)
    assert body_to_str(body) == ONE.replace("A^{f32,g}_{tx}", "(A^{f32,g}_{tx})")


def test_positions_are_those_of_the_first_character():
    (nest,) = parse_body("B^{4}_{tx=0}[C^{f32,g}_{tx}=-(A^{f32,g}_{tx}+1)*-2;];")
    rhs = nest.body[0].rhs                      # (-(A+1)) * (-2)
    assert (rhs.pos.col, rhs.lhs.pos.col, rhs.lhs.operand.pos.col, rhs.rhs.pos.col) == (29, 29, 30, 49)
    assert nest.pos.col == 1 and nest.loops[0].pos.col == 1 and nest.body[0].pos.col == 14
