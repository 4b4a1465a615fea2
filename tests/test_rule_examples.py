"""Every ``;; @example`` of every strategy block is a test (engine/rewrite/examples.py): the
BEFORE program enumerated with the block's strategy lists the AFTER program (modulo renaming),
the step replays from its JSON record with ``Engine.apply``, and the neighbour verifies on llvm
at the block's exactness (engine/rewrite/example_check.py).

The built-in rules/ are always tested. ``LEIR_RULES`` (rules directories separated by
``os.pathsep``) adds a user's folders: ``LEIR_RULES=my_rules pytest tests/test_rule_examples.py``.
Without pytest: ``python -m lowering.rule_examples [RULES_DIR]`` runs the same checks.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.rewrite.example_check import ExampleChecker, format_outcome
from engine.rewrite.examples import Example
from engine.rewrite.rulebook import load_rulebook
from lowering.rule_examples import example_verify


def _folders() -> list[str | None]:
    """None (the built-in rules), then the LEIR_RULES folders."""
    extra = [p for p in os.environ.get("LEIR_RULES", "").split(os.pathsep) if p]
    return [None] + extra


def _cases():
    out = []
    for folder in _folders():
        book = load_rulebook(folder)
        tag = "rules" if folder is None else Path(folder).name
        for s in book.strategies:
            for ex in s.examples:
                out.append(pytest.param(folder, ex, id=f"{tag}:{ex.name}"))
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def verifier():
    """One llvm Verifier (one worker process, its build cache) for every example of the module."""
    from lowering import Verifier
    with Verifier(target="llvm", trials=3, timeout=120) as v:
        yield v


@pytest.fixture(scope="module")
def checkers(verifier):
    made: dict = {}

    def get(folder):
        if folder not in made:
            made[folder] = ExampleChecker(example_verify(verifier), folder)
        return made[folder]
    return get


@pytest.mark.parametrize("folder, example", CASES)
def test_example(checkers, folder, example: Example):
    outcome = checkers(folder).check(example)
    assert outcome.ok, format_outcome(outcome)


def test_every_block_of_the_project_has_an_example():
    """The paper's 43 and dead_code_elimination each carry at least one example."""
    book = load_rulebook()
    assert len(book.strategies) >= 44
    assert [s.name for s in book.strategies if not s.examples] == []
    assert {s.name for s in book.strategies} >= {"dead_code_elimination", "online_softmax", "loop_split"}


# ------------------------------------------------------------------ the check can fail

def _with_after(ex: Example, body: str) -> Example:
    from dataclasses import replace
    from engine.rewrite.examples import Snippet
    return replace(ex, after=Snippet(((ex.after_line + 1, 5, body),)))


def test_a_wrong_after_fails_located(checkers):
    """An AFTER the strategy does not give is reported at its @after line."""
    ex = next(e for s in load_rulebook().strategies if s.name == "loop_split" for e in s.examples)
    before = ex.before_program()
    wrong = _with_after(ex, before.to_leir().replace("*2", "*3"))
    out = checkers(None).check(wrong)
    assert not out.ok and "not among" in out.error and out.line == ex.after_line


def test_a_pin_on_another_rule_fails(checkers):
    from dataclasses import replace
    ex = next(e for s in load_rulebook().strategies if s.name == "loop_split" for e in s.examples)
    out = checkers(None).check(replace(ex, params=(("factor", "4"),)))
    assert not out.ok and "not by the rule and parameters" in out.error


_BROKEN = """
;; @strategy double_it
;; @category operator
;; @difficulty easy
;; @K 0 @P 1 @S 0
;; @inverse none
;; @exactness bitwise
;; @description (a wrong rule, for the test) doubles a stored value
;; @example
;;   input  A f32[4]
;;   output C f32[4]
;;   L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a};];
;; @after double_it
;;   L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}*2;];
(rule ((= s (Nest ls (ICons (Eqn lhs r "") (INil)))))
      ((Step s (Nest ls (ICons (Eqn lhs (Bin "*" r (Num "2")) "") (INil))) "double_it" (PNil)))
      :ruleset step :name "double_it")
"""


# ------------------------------------------------------------------ lint: examples without TVM

def _lint_errors(tmp_path, text):
    from engine.rewrite.lint import lint
    from rulekit import rule_file_dir
    return [line for line in lint(rule_file_dir(tmp_path, text)).lines() if ": error: " in line]


def _example_errors(tmp_path, text):
    """What lint reports of the examples, without loading egglog: the rule book's layout
    problems and each example's text check."""
    from rulekit import rule_file_dir
    book = load_rulebook(rule_file_dir(tmp_path, text))
    out = [f"{f}:{line}:1: {msg}" for f, line, msg in book.problems]
    for s in book.strategies:
        out += [f"{e.file}:{e.line}:{e.col}: {e.message}" for ex in s.examples for e in ex.check_text()]
    return out


@pytest.mark.parametrize("old,new,message,where", [
    ("A^{f32,g}_{a};];\n;; @after", "A^{f32,g}_{a}+;];\n;; @after", "unexpected ';'", "12:46"),
    ("*2;];", "* 2;];", "not canonical LEIR: expected '2;];' here", "14:46"),
    (";;   input  A f32[4]\n;;   output C f32[4]\n", "", "needs 'input' / 'output' header lines", "9:1"),
    (";;   input  A f32[4]\n", "", "'A' is not a known tensor", "11:32"),
    (";; @after double_it", ";; @after double_that", "names rule 'double_that', which is not a rule", "13:1"),
    (";; @after double_it", ";; @after double_it factor", "@after takes [RULE] [KEY=VALUE ...], got 'factor'", "13:"),
    (";; @after double_it\n;;   L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}*2;];\n", "",
     "an @example needs at least one @after", "9:1"),
    (";; @example\n", "", "@after without an @example", "12:1"),
    ("output C f32[4]", "output C f32[5]", "'C' is declared with shape [5]", "12:18"),
])
def test_example_mistakes_are_located(tmp_path, old, new, message, where):
    assert old in _BROKEN
    errs = _example_errors(tmp_path, _BROKEN.replace(old, new))
    hits = [e for e in errs if message in e]
    assert hits and hits[0].startswith(f"{tmp_path / 'x.egg'}:{where}"), errs


def test_lint_requires_an_example_and_reports_its_errors(tmp_path):
    start, end = _BROKEN.index(";; @example"), _BROKEN.index("(rule")
    errs = _lint_errors(tmp_path, _BROKEN[:start] + _BROKEN[end:])
    assert any(e.startswith(f"{tmp_path / 'x.egg'}:2:1:") and "has no @example" in e for e in errs), errs
    errs = _lint_errors(tmp_path, _BROKEN.replace("*2;];", "* 2;];"))
    assert any(e.startswith(f"{tmp_path / 'x.egg'}:14:46: error: example of 'double_it': not canonical") for e in errs)


def test_cli_runs_the_examples(tmp_path, capsys, verifier):
    """``python -m lowering.rule_examples DIR``: a rule that changes a value is listed and
    replays, but the llvm check catches it; the failure is located at its @after, exit 2."""
    from lowering.rule_examples import run_examples
    from rulekit import rule_file_dir
    d = rule_file_dir(tmp_path, _BROKEN)
    assert run_examples(str(d), verifier=verifier) == 2
    err = capsys.readouterr().err
    assert "x.egg:13:1: error: example of 'double_it': the neighbour does not verify" in err
    assert "1 example(s) of 1 block(s): 0 passed, 1 failed" in err
