"""Fresh names for rule placeholders, chosen and substituted in the printed text."""
import pytest

from engine.rewrite.enumerator import _Uncovered, fresh_plan, rename_text
from engine.leir.parser import parse_body
from engine.leir.printer import body_to_str, item_to_str


def _stmts(text: str) -> tuple:
    # placeholders are not LEIR identifiers: write zzx (variables) and Qx (tensors) for "#.X"
    from dataclasses import replace
    from engine.leir.ast import Ref, Var, transform

    def fix(x):
        if isinstance(x, Var) and x.name.startswith("zz"):
            return replace(x, name="#." + x.name[2:])
        if isinstance(x, Ref) and x.name.startswith("Q"):
            return replace(x, name="#." + x.name[1:])
        return x

    def item(it):
        from engine.leir.ast import Equation
        if isinstance(it, Equation):
            return replace(it, lhs=transform(it.lhs, fix), rhs=transform(it.rhs, fix))
        loops = tuple(replace(l, var="#." + l.var[2:]) if l.var.startswith("zz") else l for l in it.loops)
        return replace(it, loops=loops, body=tuple(item(b) for b in it.body))
    return tuple(item(n) for n in parse_body(text))


def test_longest_placeholder_wins_and_every_placeholder_must_be_known():
    assert rename_text("#.1^{f32,g}+#.12^{f32,g}", {"#.1": "C", "#.12": "D"}) == "C^{f32,g}+D^{f32,g}"
    assert rename_text("A^{f32,g}", {}) == "A^{f32,g}"
    with pytest.raises(_Uncovered):
        rename_text("#.x+1", {"#.1": "C"})


def test_loop_and_tensor_placeholders_get_fresh_names_in_text():
    stmts = _stmts("L^{4}_{i=0}L^{2}_{zzu=0}[Qa^{f32,g}_{i,zzu}=A^{f32,g}_{i*2+zzu}/zzu;];")
    texts = [item_to_str(n) for n in stmts]
    assert "#.u" in texts[0] and "#.a^{" in texts[0]
    per_stmt, names, renamed = fresh_plan({"A", "B"}, stmts, texts)
    assert names == {"#.a": "C", "#.u": "a"}   # no prefix: the first free name
    assert renamed == ["L^{4}_{i=0}L^{2}_{a=0}[C^{f32,g}_{i,a}=A^{f32,g}_{i*2+a}/a;];"]
    assert per_stmt == [names]


def test_a_placeholder_no_header_declares_is_found_by_walking():
    """A read of a placeholder tensor nobody writes, and a placeholder variable no loop
    binds (rule bugs that re-analysis reports) are still named, not printed raw."""
    stmts = _stmts("L^{4}_{i=0}[A^{f32,g}_{i}=Qg^{f32,g}_{i}+zzz;];")
    texts = [item_to_str(n) for n in stmts]
    _, names, renamed = fresh_plan({"A"}, stmts, texts)
    assert set(names) == {"#.g", "#.z"}
    assert "#" not in renamed[0]
    assert renamed[0] == f"L^{{4}}_{{i=0}}[A^{{f32,g}}_{{i}}={names['#.g']}^{{f32,g}}_{{i}}+{names['#.z']};];"


def test_names_avoid_what_the_statement_and_program_use():
    stmts = _stmts("L^{4}_{u=0}L^{2}_{zzu=0}[Qa^{f32,g}_{u,zzu}=C^{f32,g}_{u};];")
    texts = [body_to_str(stmts)]
    _, names, renamed = fresh_plan({"C", "D"}, stmts, texts)
    assert names["#.u"] not in ("u",) and names["#.a"] not in ("C", "D")
    assert "#" not in renamed[0]
