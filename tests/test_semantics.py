"""Semantic analysis: explicit inits, shapes from real index ranges, def-use, bindings."""
import pytest

from conftest import corpus_records
from engine.leir.ast import Equation, TensorDecl
from engine.leir.diagnostics import LeirError
from engine.leir.files import parse_leir_file, program_from_json
from engine.leir.parser import parse_body
from engine.leir.program import make_program

RECORDS = corpus_records()


def prog(body: str, inputs="A f32[16, 8]", output="C f32[16]"):
    header = "".join(f"input {d.strip()}\n" for d in inputs.split(";") if d.strip())
    return parse_leir_file(f"{header}output {output}\n{body}\n", "t.leir")


def test_every_corpus_program_is_valid():
    for rec in RECORDS:
        p = program_from_json(rec)
        assert p.to_leir() == rec["leir"]
        assert {b.name for b in p.info.buffers.values() if b.role != "intermediate"} == \
            {d["name"] for d in rec["inputs"] + rec["outputs"]}


@pytest.mark.parametrize("rhs,init", [
    ("C^{f32,g}_{tx}+A^{f32,g}_{tx,a}", "0"),
    ("C^{f32,g}_{tx}-A^{f32,g}_{tx,a}", "0"),
    ("C^{f32,g}_{tx}*A^{f32,g}_{tx,a}", "1"),
    ("A^{f32,g}_{tx,a}/C^{f32,g}_{tx}", "1"),
    ("max(C^{f32,g}_{tx},A^{f32,g}_{tx,a})", "-inf"),
    ("min(C^{f32,g}_{tx},A^{f32,g}_{tx,a})", "inf"),
    ("C^{f32,g}_{tx}+A^{f32,g}_{tx,a}*2-1", "0"),
])
def test_reduction_identity_follows_the_shape_of_the_equation(rhs, init):
    p = prog(f"B^{{16}}_{{tx=0}}L^{{8}}_{{a=0}}[C^{{f32,g}}_{{tx}}={rhs};];")
    (e,) = p.info.equations
    assert e.eq.init == init
    assert e.reduction_axes == ("a",)
    assert p.to_leir() == f"B^{{16}}_{{tx=0}}L^{{8}}_{{a=0}}[C^{{f32,g}}_{{tx}}={rhs};];"


def test_update_after_first_write_has_no_init():
    p = prog("B^{16}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+A^{f32,g}_{tx,a};];"
             "B^{16}_{tx=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+1;];")
    first, second = p.info.equations
    assert (first.eq.init, second.eq.init) == ("0", None)
    assert second.is_update and second.reduction_axes == ()


@pytest.mark.parametrize("rhs", ["A^{f32,g}_{tx,a}+C^{f32,g}_{tx}", "(C^{f32,g}_{tx}+A^{f32,g}_{tx,a})*2"])
def test_self_read_in_other_shapes_is_read_before_write(rhs):
    with pytest.raises(LeirError, match="'C' is read before it is written"):
        prog(f"B^{{16}}_{{tx=0}}L^{{8}}_{{a=0}}[C^{{f32,g}}_{{tx}}={rhs};];")


def test_check_inits_rejects_rewrites_that_change_meaning():
    p = prog("B^{16}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a};];"
             "B^{16}_{tx=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}*2;];B^{16}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx};];")
    swapped = (p.body[1], p.body[0], p.body[2])  # the scaling now comes first: its text implies an init
    with pytest.raises(LeirError, match="initialisation"):
        p.with_body(swapped, check_inits=True)
    assert p.with_body(p.body, check_inits=True) == p


def test_intermediate_shapes_use_real_index_ranges():
    p = prog("B^{16}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,7-a}=A^{f32,g}_{tx,a};];"
             "B^{6}_{tx=0}[E^{f32,g}_{tx%4,tx//4}=A^{f32,g}_{tx,0};];"
             "B^{16}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx,0}+E^{f32,g}_{tx%4,tx//8};];")
    assert p.info.buffers["D"].shape == (16, 8)       # 7-a spans [0, 7]; the reference infers 1
    assert p.info.buffers["E"].shape == (4, 2)        # tx%4 reaches 3 although 5%4 = 1
    assert p.info.buffers["D"].role == "intermediate"


def test_shape_is_the_maximum_over_write_sites_never_the_sum():
    p = prog("B^{16}_{tx=0}L^{4}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a};];"
             "B^{16}_{tx=0}L^{4}_{a=0}[D^{f32,g}_{tx,a+4}=A^{f32,g}_{tx,a+4};];"
             "B^{16}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+D^{f32,g}_{tx,a};];")
    assert p.info.buffers["D"].shape == (16, 8)


def test_guarded_reads_are_in_bounds_only_inside_their_guard():
    ok = prog("B^{16}_{tx=0}L^{10}_{a=0}[D^{f32,g}_{tx,a}=if_then_else(1<=a<9,A^{f32,g}_{tx,a-1},0);];"
              "B^{16}_{tx=0}L^{10}_{a=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+D^{f32,g}_{tx,a};];")
    assert ok.info.buffers["D"].shape == (16, 10)
    with pytest.raises(LeirError, match=r"out of bounds: index 1 \('a-1'\) ranges over \[-1, 8\]"):
        prog("B^{16}_{tx=0}L^{10}_{a=0}[D^{f32,g}_{tx,a}=if_then_else(1<=a<10,0,A^{f32,g}_{tx,a-1});];"
             "B^{16}_{tx=0}L^{10}_{a=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+D^{f32,g}_{tx,a};];")


def test_prefix_form_guarded_by_its_boundary_needs_no_init():
    p = prog("B^{16}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=max(if_then_else(a-1<0,-inf,D^{f32,g}_{tx,a-1}),"
             "A^{f32,g}_{tx,a});];B^{16}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx,7};];")
    assert p.info.equations[0].eq.init is None
    assert p.info.buffers["D"].shape == (16, 8)


def test_tensor_valued_indices_are_bounded_through_their_definition():
    p = prog("B^{4}_{tx=0}L^{2}_{a=0}[K^{i64,g}_{tx,a}=tx*2+a;];"
             "B^{4}_{tx=0}L^{2}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{K^{i64,g}_{tx,a},0};];",
             inputs="A f32[8, 3]", output="C f32[4, 2]")
    assert p.info.buffers["K"].dtype == "i64"
    with pytest.raises(LeirError, match="out of bounds"):
        prog("B^{4}_{tx=0}L^{2}_{a=0}[K^{i64,g}_{tx,a}=tx*2+a+1;];"
             "B^{4}_{tx=0}L^{2}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{K^{i64,g}_{tx,a},0};];",
             inputs="A f32[8, 3]", output="C f32[4, 2]")


def test_nested_sub_nest_sees_outer_loops():
    p = prog("B^{16}_{tx=0}L^{8}_{a=0}[D^{f32,l}_{tx,a}=A^{f32,g}_{tx,a};"
             "L^{4}_{i=0}[E^{f32,g}_{tx,a,i}=D^{f32,l}_{tx,a}*i;];];"
             "B^{16}_{tx=0}L^{8}_{a=0}L^{4}_{i=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+E^{f32,g}_{tx,a,i};];")
    eqs = p.info.equations
    assert eqs[1].path == (0, 1, 0)
    assert [l.var for l in eqs[1].loops] == ["tx", "a", "i"]
    assert p.info.buffers["D"].scope == "l" and p.info.buffers["E"].shape == (16, 8, 4)


@pytest.mark.parametrize("body,message", [
    ("B^{16}_{ab=0}[C^{f32,g}_{ab}=A^{f32,g}_{ab,0};];", "must be named tx, ty, tz, bx, by or bz"),
    ("B^{16}_{bx=0}B^{8}_{bxa=0}[C^{f32,g}_{bx}=A^{f32,g}_{bx,bxa};];", "both bound to blockIdx.x"),
    ("B^{16}_{tx=0}B^{8}_{tz=0}B^{16}_{ty=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx,tz};];", "2048 threads per block"),
    ("B^{16}_{tx=0}B^{128}_{tza=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx,0};];", "above the hardware limit 64"),
    ("B^{16}_{tx=0}L^{8}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx,0};];", "bound twice"),
    ("B^{16}_{tx=0}[A^{f32,g}_{tx,0}=1;C^{f32,g}_{tx}=A^{f32,g}_{tx,0};];", "inputs are read-only"),
    ("B^{16}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx};];", "'D' is not a known tensor and is never written"),
    ("B^{16}_{tx=0}[C^{f32,g}_{tx}=Dd^{f32,g}_{tx};];B^{16}_{tx=0}[Dd^{f32,g}_{tx}=1;];",
     "'Dd' is read before it is written"),
    ("B^{16}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx};];", "has rank 2 but is indexed with 1 subscript"),
    ("B^{16}_{tx=0}[C^{f16,g}_{tx}=A^{f32,g}_{tx,0};];", "'C' is declared f32 but used as f16"),
    ("B^{16}_{tx=0}[C^{f32,s}_{tx}=A^{f32,g}_{tx,0};];", "must have scope g"),
    ("B^{16}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx,a};];", "'a' is not a loop variable"),
    ("B^{16}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx,0.5};];", "indices are integers"),
    ("B^{16}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx,A^{f32,g}_{tx,0}};];", "cannot be used as an index"),
    ("B^{8}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx,0};];", r"declared with shape \[16\] but the program writes shape \[8\]"),
    ("B^{16}_{tx=0}[D^{f32,g}_{tx-1}=A^{f32,g}_{tx,0};];B^{16}_{tx=0}[C^{f32,g}_{tx}=1;];", "negative index"),
    ("B^{16}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx,0};];B^{16}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx+1};];",
     "read of 'D' out of bounds"),
])
def test_invalid_programs_are_rejected_with_a_located_reason(body, message):
    with pytest.raises(LeirError, match=message) as ex:
        prog(body)
    assert ex.value.line is not None and ex.value.col is not None


def test_make_program_is_idempotent_and_fills_inits():
    body = parse_body("B^{16}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx}=C^{f32,g}_{tx}+A^{f32,g}_{tx,a};];")
    assert body[0].body[0].init is None
    decls = ([TensorDecl("A", "f32", (16, 8))], [TensorDecl("C", "f32", (16,))])
    p = make_program("s", *decls, body)
    assert isinstance(p.body[0].body[0], Equation) and p.body[0].body[0].init == "0"
    assert make_program("s", *decls, p.body) == p


# --------------------------------------------------------------------------- trees built by hand


def _one(rhs, loops=None):
    from engine.leir.ast import Loop, Nest, Ref, Var
    loops = loops or (Loop("B", "tx", 16),)
    return (Nest(loops, (Equation(Ref("C", "f32", "g", (Var("tx"),)), rhs),)),)


DECLS = ([TensorDecl("A", "f32", (16, 8))], [TensorDecl("C", "f32", (16,))])


@pytest.mark.parametrize("make,message", [
    (lambda ast: _one(ast.Num("٣")), "is not a LEIR number"),
    (lambda ast: _one(ast.Num("²")), "is not a LEIR number"),
    (lambda ast: _one(ast.Num("1" * 5000)), "integer literal 1111111111...1111 .5000 digits. is out of range"),
    (lambda ast: _one(ast.Num("-1")), "is not a LEIR number"),
    (lambda ast: _one(ast.Var("a b")), "'a b' is not a valid loop variable name"),
    (lambda ast: _one(ast.Ref("a", "f32", "g")), "tensor name 'a' must be one capital letter"),
    (lambda ast: _one(ast.Ref("Tx", "f32", "g")), "reserved letter"),
    (lambda ast: _one(ast.BinOp("^", ast.Num("1"), ast.Num("2"))), "unknown operator '\\^'"),
    (lambda ast: _one(ast.Call("tanh", (ast.Num("1"),))), "unknown function 'tanh'"),
    (lambda ast: _one(ast.Call("max", (ast.Num("1"),))), "'max' takes 2 arguments, got 1"),
    (lambda ast: _one(ast.Num("1"), (ast.Loop("B", "tx", 2**31),)), "loop extent 2147483648 exceeds the limit"),
    (lambda ast: _one(ast.Num("1"), (ast.Loop("B", "tx", 10**5000),)), "loop extent .an integer of 16610 bits."),
    (lambda ast: _one(ast.Num("1"), (ast.Loop("B", "tx", True),)), "loop extent must be an integer"),
    (lambda ast: _one(ast.Num(["1"])), "malformed Num"),
])
def test_hand_built_trees_that_would_not_read_back_are_rejected(make, message):
    from engine.leir import ast
    from engine.leir.program import Program
    body = make(ast)
    with pytest.raises(LeirError, match=message):
        make_program("p", *DECLS, body)
    with pytest.raises(LeirError, match=message):  # a Program constructed directly is checked before printing
        Program("p", tuple(DECLS[0]), tuple(DECLS[1]), body).to_leir()


@pytest.mark.parametrize("n", [101, 100_000])
def test_a_hand_built_tree_too_deep_is_rejected_without_recursion(n):
    from engine.leir.ast import BinOp, Num, Ref, Var
    from engine.leir.limits import MAX_DEPTH
    e = Ref("A", "f32", "g", (Var("tx"), Num("0")))
    for _ in range(n):
        e = BinOp("+", e, Num("1"))
    with pytest.raises(LeirError, match=f"nested more than {MAX_DEPTH} levels deep"):
        make_program("p", *DECLS, _one(e))


def test_declarations_are_checked_like_the_readers_check_them():
    from engine.leir.ast import Num, Ref, Var
    body = _one(Ref("A", "f32", "g", (Var("tx"), Num("0"))))
    assert make_program("p", *DECLS, body).name == "p"
    for decl, message in ((TensorDecl("a", "f32", (16, 8)), "tensor name 'a'"),
                          (TensorDecl("A", "f32", (16, 2**31)), "each dimension of 'A' 2147483648 exceeds the limit"),
                          (TensorDecl("A", "f32", (16, True)), "each dimension of 'A' must be an integer"),
                          (TensorDecl("A", "f3", (16, 8)), "unknown dtype code 'f3'")):
        with pytest.raises(LeirError, match=message):
            make_program("p", [decl], DECLS[1], body)


def test_a_body_of_anything_but_loop_nests_is_rejected():
    from engine.leir.ast import Num, Ref, Var
    eq = Equation(Ref("C", "f32", "g", (Var("tx"),)), Num("1"))
    with pytest.raises(LeirError, match="a program body is a sequence of loop nests, not of Equation"):
        make_program("p", *DECLS, (eq,))


def test_statements_are_checked_once_however_many_programs_share_them(monkeypatch):
    from engine.leir import limits
    p = prog("B^{16}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a};];"
             "B^{16}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx};];")
    assert all(limits._CHECKED.get(id(n)) is n for n in p.body)  # analysis marks the body it returns
    checked = []
    real = limits._check
    monkeypatch.setattr(limits, "_check", lambda body: checked.append(len(body)) or real(body))
    assert p.with_body(p.body) == p                                   # nothing new: nothing checked
    other = parse_body("B^{16}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx}*2;];")
    assert p.with_body((p.body[0],) + other).to_leir().endswith("*2;];")  # a neighbour: its new statement
    assert checked == [1]
