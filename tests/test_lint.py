"""engine.lint: metadata, rule names, unknown relations and unused guards, located."""
import shutil
import subprocess
import sys

import pytest

from engine.rewrite.lint import lint
from tests.conftest import ROOT

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
"""


def rules_dir(tmp_path, text):
    shutil.copy(ROOT / "rules" / "leir.egg", tmp_path / "leir.egg")
    (tmp_path / "x.egg").write_text(text)
    return tmp_path


def errors(rep):
    return [line for line in rep.lines() if ": error: " in line]


def test_operator_rules_are_clean(tmp_path):
    shutil.copy(ROOT / "rules" / "operator.egg", tmp_path / "operator.egg")
    shutil.copy(ROOT / "rules" / "leir.egg", tmp_path / "leir.egg")
    assert errors(lint(tmp_path)) == []


def test_good_block(tmp_path):
    assert errors(lint(rules_dir(tmp_path, GOOD))) == []


@pytest.mark.parametrize("old,new,message,line", [
    ("@strategy loop_unrolling", "@strategy loop_unroll", "unknown strategy 'loop_unroll'", 2),
    (";; @difficulty medium\n", "", "has no @difficulty", 2),
    ("@difficulty medium", "@difficulty easy", "the paper's bucket for 'loop_unrolling' is 'medium'", 4),
    ("@category operator", "@category graph", "the spec puts 'loop_unrolling' in 'operator'", 3),
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
    errs = errors(lint(rules_dir(tmp_path, GOOD.replace(old, new))))
    assert any(message in e for e in errs), errs
    hit = next(e for e in errs if message in e)
    assert hit.startswith(str(tmp_path / "x.egg") + f":{line}:") or "egglog" in hit, hit


def test_egglog_errors_are_located(tmp_path):
    errs = errors(lint(rules_dir(tmp_path, GOOD.replace("(Lp \"U\" v n)", "(Lp \"U\" v)"))))
    assert any("x.egg:10:" in e and "egglog" in e for e in errs), errs


def test_cli_exit_codes(tmp_path):
    d = rules_dir(tmp_path, GOOD.replace("@strategy loop_unrolling", "@strategy nope"))
    r = subprocess.run([sys.executable, "-m", "engine.lint", str(d)], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "x.egg:2:1: error: unknown strategy 'nope'" in r.stderr
    r = subprocess.run([sys.executable, "-m", "engine.lint", str(tmp_path / "missing")], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
