"""engine.lint: metadata, rule names, unknown relations and unused guards, located."""
import shutil
import subprocess
import sys

import pytest

from engine.rewrite.lint import lint
from tests.conftest import ROOT
from rulekit import copy_schema, rule_file_dir

GOOD = """
;; @strategy loop_unrolling
;; @category operator
;; @difficulty medium
;; @K 0 @P 1 @S 0
;; @inverse none
;; @exactness bitwise
;; @description unrolls a loop
(rule ((= s (Nest ls body)) (LoopAt ls i l) (= l (Lp "L" v n)) (> n 1))
      ((Step s (Nest (LSet ls i (Lp "U" v n)) body) "loop_unrolling" (PNil)))
      :ruleset step :name "loop_unrolling")
;; (the example after the rule keeps the line numbers the tests below name)
;; @example
;;   input  A f32[4]
;;   output C f32[4]
;;   L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}*2;];
;; @after
;;   U^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}*2;];
"""


def errors(rep):
    return [line for line in rep.lines() if ": error: " in line]


def test_operator_rules_are_clean(tmp_path):
    shutil.copy(ROOT / "rules" / "operator.egg", tmp_path / "operator.egg")
    copy_schema(tmp_path)
    assert errors(lint(tmp_path)) == []


def test_good_block(tmp_path):
    assert errors(lint(rule_file_dir(tmp_path, GOOD))) == []


@pytest.mark.parametrize("old,new,message,line", [
    ("@strategy loop_unrolling", "@strategy paper", "'paper' names a strategy set", 2),
    (";; @difficulty medium\n", "", "has no @difficulty", 2),
    ("@difficulty medium", "@difficulty hard", "@difficulty must be one of easy, medium, difficult", 4),
    ("@category operator", "@category loops", "@category must be one of", 3),
    ("@exactness bitwise", "@exactness bitwise\n;; @benefit speed", "@benefit: unknown benefit 'speed'", 8),
    ("@exactness bitwise", "@exactness bitwise\n;; @origin mine", "@origin must be one of paper, extra, user", 8),
    ("@exactness bitwise", "@exactness exact", "@exactness must be one of", 7),
    ("@inverse none", "@inverse loop_unfold", "@inverse 'loop_unfold'", 6),
    ("@K 0", "@K x", "@K must be a non-negative integer", 5),
    ('"loop_unrolling" (PNil)', '"loop_unroll" (PNil)', "must name it", 10),
    (':name "loop_unrolling"', ':name "unroll"', "must be named 'loop_unrolling'", 11),
    ("(> n 1)", "(> n 1) (NoSuchFact s)", "unknown relation or function 'NoSuchFact'", 9),
    ("(LoopAt ls i l)", "(LoopAt ls i l) (ParallelAxis s w)", "pattern variable 'w'", 9),
    (":ruleset step", ":ruleset other", "must be in ':ruleset step'", 9),
])
def test_bad_blocks_are_located(tmp_path, old, new, message, line):
    assert old in GOOD
    errs = errors(lint(rule_file_dir(tmp_path, GOOD.replace(old, new))))
    assert any(message in e for e in errs), errs
    hit = next(e for e in errs if message in e)
    assert hit.startswith(str(tmp_path / "x.egg") + f":{line}:") or "egglog" in hit, hit


def test_egglog_errors_are_located(tmp_path):
    errs = errors(lint(rule_file_dir(tmp_path, GOOD.replace("(Lp \"U\" v n)", "(Lp \"U\" v)"))))
    assert any("x.egg:10:" in e and "egglog" in e for e in errs), errs


def test_cli_exit_codes(tmp_path):
    d = rule_file_dir(tmp_path, GOOD.replace("@K 0", "@K zero"))
    r = subprocess.run([sys.executable, "-m", "engine.lint", str(d)], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "x.egg:5:4: error: @K must be a non-negative integer, got 'zero'" in r.stderr
    r = subprocess.run([sys.executable, "-m", "engine.lint", str(tmp_path / "missing")], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr


PAIR = """
;; @strategy powsimp
;; @category math
;; @difficulty easy
;; @K 1 @P 1 @S 0
;; @inverse expand_powsimp
;; @exactness reassociating
;; @description combines powers
;; @example
;;   input  A f32[8]
;;   input  D f32[8]
;;   output C f32[8]
;;   L^{8}_{a=0}[C^{f32,g}_{a}=exp(A^{f32,g}_{a})*exp(D^{f32,g}_{a});];
;; @after powsimp/exp_product
;;   L^{8}_{a=0}[C^{f32,g}_{a}=exp(A^{f32,g}_{a}+D^{f32,g}_{a});];
;; @strategy expand_powsimp
;; @category math
;; @difficulty easy
;; @K 1 @P 1 @S 0
;; @inverse powsimp
;; @exactness reassociating
;; @description splits powers
;; @example
;;   input  A f32[8]
;;   input  D f32[8]
;;   output C f32[8]
;;   L^{8}_{a=0}[C^{f32,g}_{a}=exp(A^{f32,g}_{a}+D^{f32,g}_{a});];
;; @after expand_powsimp/exp_sum
;;   L^{8}_{a=0}[C^{f32,g}_{a}=exp(A^{f32,g}_{a})*exp(D^{f32,g}_{a});];
(identity "powsimp/exp_product" "expand_powsimp/exp_sum"
          (Bin "*" (Call "exp" (ECons a (ENil))) (Call "exp" (ECons b (ENil))))
          (Call "exp" (ECons (Bin "+" a b) (ENil))))
"""


def test_identity_pair_lints_clean_and_gives_both_rules(tmp_path):
    from engine.rewrite.rulebook import load_rulebook
    d = rule_file_dir(tmp_path, PAIR)
    assert errors(lint(d)) == []
    book = load_rulebook(d)
    assert {s.name: s.rules for s in book.strategies} == {"powsimp": ["powsimp/exp_product"],
                                                          "expand_powsimp": ["expand_powsimp/exp_sum"]}
    text = book.text(d / "x.egg")
    assert text.count("\n") == PAIR.count("\n")            # expanded in place: line numbers kept
    assert ":ruleset s_powsimp" in text and ":ruleset s_expand_powsimp" in text


@pytest.mark.parametrize("old,new,message", [
    ("@inverse powsimp", "@inverse none", "do not name each other as @inverse"),
    ('(Call "exp" (ECons (Bin "+" a b) (ENil))))', '(Call "exp" (ECons (Bin "+" a c) (ENil))))', "does not bind"),
    ("(ECons a (ENil))) (Call", "(ECons lhs (ENil))) (Call", "a name of the rule template"),
    ('a b) (ENil))))', 'a b) (ENil))) :range "powsimp/other")', ":range names a rule of this identity"),
    ('a b) (ENil))))', 'a b) (ENil))) :guard (Positive a))', "expected one of :when"),
    ('a b) (ENil))))', 'a b) (ENil))) :when (Positive a))', ":when takes a list of guards"),
    ('"expand_powsimp/exp_sum"', '"expand_powsimp/exp_sum" "powsimp/third"', "names one rule"),
    ('"powsimp/exp_product"', '"nope/exp_product"', "after a strategy block of this file"),
    ('a b) (ENil))))', 'a b) (ENil))) :range "expand_powsimp/exp_sum")', "no @range"),
    (";; @description splits powers", ";; @description splits powers\n;; @range exp(a) overflows", None),
    (";; @description combines powers", ";; @description combines powers\n;; @range exp(a) overflows",
     "none of its rules is guarded"),
    (";; @description combines powers", ";; @description combines powers\n;; @rnage x", "unknown metadata key @rnage"),
])
def test_bad_identities_are_located(tmp_path, old, new, message):
    assert old in PAIR
    text = PAIR.replace(old, new)
    if message is None:      # @range on expand_powsimp with no guarded rule
        text = text.replace('a b) (ENil))))', 'a b) (ENil))) :range "expand_powsimp/exp_sum")')
        assert errors(lint(rule_file_dir(tmp_path, text))) == []
        return
    errs = errors(lint(rule_file_dir(tmp_path, text)))
    assert any(message in e and str(tmp_path / "x.egg") in e for e in errs), errs


def test_identity_egglog_errors_point_at_the_identity(tmp_path):
    errs = errors(lint(rule_file_dir(tmp_path, PAIR.replace('(Bin "+" a b)', '(Bin "+" a)'))))
    assert any("x.egg:30:" in e and "egglog" in e for e in errs), errs
