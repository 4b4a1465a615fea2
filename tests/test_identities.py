"""LEIR expressions in rule files (engine/rewrite/leirterms.py): identities written in LEIR, the
(leir "...") term macro, their exact translation, located errors, and rulediff."""
from __future__ import annotations

import pytest

from engine.rewrite.leirterms import ExprError, leir_term
from engine.rewrite.lint import lint
from engine.rewrite.rulebook import RULES_DIR, load_rulebook, read_sexps, sexp_text
from engine.rewrite.rulediff import diff, main as rulediff_main
from rulekit import rule_file_dir


@pytest.mark.parametrize("text,term", [
    ("1/(1+exp(-x))", '(Bin "/" (Num "1") (Bin "+" (Num "1") (Call "exp" (ECons (Un "-" x) (ENil)))))'),
    ("a**2-2*a*b+b**2",
     '(Bin "+" (Bin "-" (Bin "**" a (Num "2")) (Bin "*" (Bin "*" (Num "2") a) b)) (Bin "**" b (Num "2")))'),
    ("x*a/c", '(Bin "/" (Bin "*" x a) c)'),
    ("x*(a/c)", '(Bin "*" x (Bin "/" a c))'),
    ("f==-inf", '(Cmp "==" (ECons f (ECons (Un "-" (Num "inf")) (ENil))))'),
    ("0<=c<n", '(Cmp "<=,<" (ECons (Num "0") (ECons c (ECons n (ENil)))))'),
    ("if_then_else(c, 0, max(p, e))",
     '(Call "if_then_else" (ECons c (ECons (Num "0") (ECons (Call "max" (ECons p (ECons e (ENil)))) (ENil)))))'),
    ("A^{f16,s}_{i,2}*1.5e-3", '(Bin "*" (Ref "A" "f16" "s" (ECons i (ECons (Num "2") (ENil)))) (Num "1.5e-3"))'),
])
def test_leir_expression_translates_to_the_constructor_term(text, term):
    assert leir_term(text, 1, 1)[0] == term


def test_bindings_are_written_in_place_and_names_reported():
    term, used = leir_term("exp(v-p)", 1, 1, {"v": "(Ref n d sc ix)"})
    assert term == '(Call "exp" (ECons (Bin "-" (Ref n d sc ix) p) (ENil)))' and used == {"v", "p"}


@pytest.mark.parametrize("text,kw,message,col", [
    ("a+foo(b)", {}, "unknown function 'foo'", 6),
    ("a+(b", {}, "unexpected end of input", 8),
    ("a + ab", {"declared": set()}, "'ab' is neither a one-letter pattern variable", 8),
    ("e*2", {"reserved": ("e", "s")}, "a name of the rule template", 4),
])
def test_errors_point_into_the_string(text, kw, message, col):
    with pytest.raises(ExprError) as info:
        leir_term(text, 7, 3, **kw)       # the string's opening quote at 7:3
    assert message in str(info.value) and (info.value.line, info.value.col) == (7, col)


BLOCKS = """
;; @strategy powsimp
;; @category math
;; @difficulty easy
;; @K 1 @P 1 @S 0
;; @inverse expand_powsimp
;; @exactness reassociating
;; @description combines powers

;; @strategy expand_powsimp
;; @category math
;; @difficulty easy
;; @K 1 @P 1 @S 0
;; @inverse powsimp
;; @exactness reassociating
;; @description splits powers
"""
LEIR_PAIR = BLOCKS + """(identity "powsimp/exp_product" "expand_powsimp/exp_sum"
          "exp(a)*exp(b)" "exp(a+b)")
"""
TERM_PAIR = BLOCKS + """(identity "powsimp/exp_product" "expand_powsimp/exp_sum"
          (Bin "*" (Call "exp" (ECons a (ENil))) (Call "exp" (ECons b (ENil))))
          (Call "exp" (ECons (Bin "+" a b) (ENil))))
"""


def _errors(rep):
    """Lint's errors, less the missing examples of the fixtures' blocks (tests/test_rule_examples.py
    covers examples; these tests are about what the identities expand to)."""
    return [line for line in rep.lines() if ": error: " in line and "has no @example" not in line]


def test_leir_identity_expands_like_its_constructor_form(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    ta = load_rulebook(rule_file_dir(a, LEIR_PAIR)).text(a / "x.egg")
    tb = load_rulebook(rule_file_dir(b, TERM_PAIR)).text(b / "x.egg")
    assert [sexp_text(f) for f in read_sexps(ta)] == [sexp_text(f) for f in read_sexps(tb)]
    assert ta.count("\n") == LEIR_PAIR.count("\n")            # expanded in place: line numbers kept
    assert _errors(lint(a)) == [] and diff(a, b) == []


@pytest.mark.parametrize("old,new,message,where", [
    ('"exp(a+b)"', '"exp(a+)"', "unexpected ')'", "18:34"),
    ('"exp(a+b)"', '"exp(a+bc)"', "'bc' is neither a one-letter", "18:34"),
    ('"exp(a+b)"', '"exp(a+s)"', "a name of the rule template", "18:34"),
    ('"exp(a)*exp(b)"', '"exp(a)*\n  ln(b)"', "unknown function 'ln'", "19:3"),
    ('"exp(a+b)")', '"exp(a+v)" :where ((v (Call "exp" (ENil)))))', None, None),
])
def test_bad_leir_identities_are_located(tmp_path, old, new, message, where):
    assert old in LEIR_PAIR
    errs = _errors(lint(rule_file_dir(tmp_path, LEIR_PAIR.replace(old, new))))
    if message is None:      # a :where term is written in place: lint sees the rule it makes
        assert any("does not bind" in e for e in errs), errs
        return
    assert any(message in e and f"x.egg:{where}:" in e for e in errs), errs


MACRO_RULE = """
;; @strategy loop_unrolling
;; @category operator
;; @difficulty medium
;; @K 0 @P 1 @S 0
;; @inverse none
;; @exactness bitwise
;; @description unrolls a loop
(rule ((= s (Nest ls (ICons (Eqn x RHS "") (INil)))) (LoopAt ls i l) (= l (Lp "L" v n)) (> n 1))
      ((Step s (Nest (LSet ls i (Lp "U" v n)) (ICons (Eqn x RHS "") (INil))) "loop_unrolling" (PNil)))
      :ruleset step :name "loop_unrolling")
"""


def test_leir_macro_in_a_rule(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    macro = MACRO_RULE.replace("RHS", '(leir "exp(y-m)*2" (m (Ref k d sc ix)))')
    terms = MACRO_RULE.replace("RHS", '(Bin "*" (Call "exp" (ECons (Bin "-" y (Ref k d sc ix)) (ENil))) (Num "2"))')
    rule_file_dir(a, macro)
    rule_file_dir(b, terms)
    assert load_rulebook(a).text(a / "x.egg").count("\n") == macro.count("\n")
    assert diff(a, b) == []
    assert _errors(lint(a)) == []
    bad = MACRO_RULE.replace("RHS", '(leir "exp(y-m)" (q y))')
    errs = _errors(lint(rule_file_dir(tmp_path, bad)))
    assert any("binding 'q' is not used" in e and "x.egg:9:" in e for e in errs), errs


def test_attention_rules_have_no_constructor_lists_left():
    assert "ECons" not in (RULES_DIR / "attention.egg").read_text()
    assert "(leir " in (RULES_DIR / "attention.egg").read_text()


def test_rulediff_cli(tmp_path, capsys):
    import shutil
    assert rulediff_main([str(RULES_DIR), str(RULES_DIR)]) == 0
    copy = tmp_path / "rules"
    shutil.copytree(RULES_DIR, copy)
    math = copy / "math.egg"
    math.write_text(math.read_text().replace('"x*x" "x**2"', '"x*x" "x**3"'))
    assert rulediff_main([str(RULES_DIR), str(copy)]) == 1
    out = capsys.readouterr().out
    assert "math.egg powsimp/square" in out and '(Num "3")' in out
    assert rulediff_main([str(tmp_path / "none"), str(copy)]) == 2
