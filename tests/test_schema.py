"""The term schema is written once, in rules/leir/terms.egg; engine.rewrite.schema reads it, and the AST
encoder must build exactly those constructors with those argument sorts."""
import dataclasses

from engine.leir import ast
from engine.rewrite.rulebook import RULES_DIR
from engine.rewrite.schema import SIGNATURES, TERM_ARGS, read_signatures
from engine.rewrite.terms import Interner, encode
from rulekit import prog

PROGRAM_SORTS = ("Expr", "Exprs", "Loop", "Loops", "Item", "Items")
# every AST node class and the schema constructor it is encoded as
AST_TO_SCHEMA = {ast.Num: "Num", ast.Var: "Var", ast.Ref: "Ref", ast.Unary: "Un", ast.BinOp: "Bin",
                 ast.Compare: "Cmp", ast.Call: "Call", ast.Loop: "Lp", ast.Equation: "Eqn", ast.Nest: "Nest"}


def _every_node_kind():
    return prog("B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},-A^{f32,g}_{tx,a}*2.5);"
                "L^{2}_{c=0}[E^{f32,g}_{tx,c}=if_then_else(0<=a-c<8,A^{f32,g}_{tx,a},0);];];"
                "B^{4}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx}+E^{f32,g}_{tx,1};];",
                {"A": (4, 8)}, {"C": (4,)})


def test_signatures_are_read_from_the_schema_file():
    text = (RULES_DIR / "leir" / "terms.egg").read_text()
    assert read_signatures(text) == SIGNATURES
    assert {s for s, _ in SIGNATURES.values()} >= set(PROGRAM_SORTS) | {"Params"}
    assert SIGNATURES["Ref"] == ("Expr", ("S", "S", "S", "Exprs"))
    assert SIGNATURES["Lp"] == ("Loop", ("S", "S", "I"))
    assert TERM_ARGS["Bin"] == (2, 3) and TERM_ARGS["Num"] == ()


def test_every_ast_node_kind_has_its_constructor():
    for cls, ctor in AST_TO_SCHEMA.items():
        assert ctor in SIGNATURES, ctor
        fields = [f for f in dataclasses.fields(cls) if f.compare]
        # list-valued fields become one list-sort argument; Compare's operators one string
        assert len(SIGNATURES[ctor][1]) == len(fields), (cls.__name__, fields, SIGNATURES[ctor])


def test_the_encoder_builds_exactly_the_schema():
    interner = Interner()
    encode(_every_node_kind().body, interner, "l_t", "l_")
    sort_of = {}
    used = set()
    for i, key in enumerate(interner.keys):
        ctor, *args = key
        assert ctor in SIGNATURES, f"the encoder builds {ctor}, which rules/leir/terms.egg does not declare"
        sort, kinds = SIGNATURES[ctor]
        assert len(args) == len(kinds), (ctor, args, kinds)
        for a, kind in zip(args, kinds):
            if kind == "S":
                assert isinstance(a, str), (ctor, a)
            elif kind == "I":
                assert isinstance(a, int), (ctor, a)
            else:
                assert sort_of[a] == kind, (ctor, kind, interner.keys[a])
        sort_of[i] = sort
        used.add(ctor)
    program_ctors = {c for c, (s, _) in SIGNATURES.items() if s in PROGRAM_SORTS}
    assert used == program_ctors, f"schema constructors the encoder never builds: {program_ctors - used}"
