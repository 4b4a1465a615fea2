"""Issue 29, bullet 1: every command that loads rules checks them as lint does (a located error,
exit status 2, never a traceback, never a file silently ignored, whatever strategies the
command uses); lint reports each mistake once, with advice that fits the file's folder, says
which blocks it checked, the examples' run (lowering.rule_examples --only) limits to named folders or
strategies, and the project's
own rules lint with no warning. And bullet 5's argument errors (the flag named, a did-you-mean)."""
from __future__ import annotations

import json

import pytest
from conftest import ROOT

from engine.leir.cli import run_cli

PROGRAM = ROOT / "examples" / "softmax.leir"


def builtin() -> tuple[int, int]:
    """(strategy blocks, rule files) of the built-in rules."""
    from engine.rewrite.rulebook import load_rulebook
    book = load_rulebook()
    return len(book.strategies), len(book.files)
BLOCK = """;; @strategy loop_serialization_mine
;; @category operator
;; @difficulty easy
;; @K 0 @P 1 @S 0
;; @inverse none
;; @exactness bitwise
;; @benefit none
;; @description runs a parallel loop's iterations one after another
;; @example
;;   input  A f32[4, 8]
;;   output C f32[4, 8]
;;   P^{4}_{a=0}L^{8}_{b=0}[C^{f32,g}_{a,b}=A^{f32,g}_{a,b}*2;];
;; @after loop_serialization_mine loop=a
;;   L^{4}_{a=0}L^{8}_{b=0}[C^{f32,g}_{a,b}=A^{f32,g}_{a,b}*2;];
(rule ((= s (Nest ls body)) (LoopAt ls i l) (= l (Lp "P" v n)))
      ((Step s (Nest (LSet ls i (Lp "L" v n)) body) "loop_serialization_mine" (PStr "loop" v (PNil))))
      :ruleset step :name "loop_serialization_mine")
"""
BAD = BLOCK.replace("(LoopAt ls i l)", "(LoopAtt ls i l)")       # the broken guard, line 15 col 29


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "mine.egg").write_text(BAD)
    return d


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    d = tmp_path_factory.mktemp("good")
    (d / "mine.egg").write_text(BLOCK)
    return d


def call(main, argv, capsys):
    """(exit status, stdout, stderr) of a command's main, as ``python -m`` runs it."""
    rc = run_cli(main, [str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _mains():
    from dataset.generate import driver
    from engine import apply, enumerate as enum, equiv
    from search.__main__ import _main as search
    return {"enumerate": enum.main, "apply": apply.main, "equiv": equiv.main, "generate": driver.main,
            "search": search}


@pytest.mark.parametrize("command,argv", [
    ("enumerate", [PROGRAM, "--limit", "1"]),
    ("enumerate", [PROGRAM, "--strategies", "loop_split"]),         # a strategy of the built-in rules only
    ("apply", [PROGRAM, "--step", "STEP"]),
    ("equiv", [PROGRAM, PROGRAM]),
    ("generate", [PROGRAM, "-o", "OUT", "--per-program", "1"]),      # the default set: paper, not the file's
    ("generate", [PROGRAM, "-o", "OUT", "--strategies", "user"]),
    ("search", [PROGRAM, "-o", "OUT/t.json", "--budget", "1"]),      # the default set again
])
def test_every_command_refuses_a_broken_rule_file_located(bad, tmp_path, capsys, command, argv):
    step = tmp_path / "step.json"
    step.write_text(json.dumps({"rule": "loop_split", "site": [0], "params": {}}))
    argv = [str(a).replace("OUT", str(tmp_path / "out")).replace("STEP", str(step)) for a in argv]
    rc, out, err = call(_mains()[command], argv + ["--rules", bad], capsys)
    assert rc == 2, (out, err)
    assert "mine.egg:15:29: error: unknown relation or function 'LoopAtt' (did you mean 'LoopAt'?)" in err
    assert err.count("LoopAtt") == 2 and "egglog" not in err and "Traceback" not in err     # once (+ its advice)
    assert "1 error in the rule files" in err
    assert not (tmp_path / "out").exists()                         # refused before any work


def test_lint_reports_each_mistake_once_with_advice_for_the_folder(bad, tmp_path, capsys):
    from engine.lint import main
    rc, _, err = call(main, [bad], capsys)
    assert rc == 2
    lines = [l for l in err.splitlines() if ": error: " in l]
    assert len(lines) == 1 and "mine.egg:15:29:" in lines[0]
    assert "your own rule files declare with (relation LoopAtt (...))" in lines[0]
    assert "declare it in" not in lines[0]                         # not the schema's advice: it is not the user's
    n, files = builtin()
    assert f"checked {n + 1} strategy block(s) in {files + 1} file(s): {n} built-in in" in err
    assert "(loop_serialization_mine)" in err
    # in a complete rules directory, the schema is the user's: declare it there
    import shutil
    copy = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", copy)
    (copy / "mine.egg").write_text(BAD)
    rc, _, err = call(main, [copy], capsys)
    assert rc == 2 and "(did you mean 'LoopAt'?): declare it in a relations file of" in err and "rules/leir/" in err


def test_the_projects_rules_lint_with_no_warning(capsys):
    from engine.lint import main
    rc, _, err = call(main, [], capsys)
    assert rc == 0 and err.rstrip().endswith("0 error(s), 0 warning(s)")
    n, files = builtin()
    assert f"checked {n} strategy block(s) in {files} file(s): {n} built-in in" in err


def test_an_egglog_error_is_reported_once_located_at_its_form(tmp_path, capsys):
    from engine.lint import main
    (tmp_path / "mine.egg").write_text(BLOCK.replace('(PStr "loop" v (PNil))', '(PStr "loop" v)'))  # an arity
    rc, _, err = call(main, [tmp_path], capsys)
    errors = [l for l in err.splitlines() if ": error: " in l]
    assert rc == 2 and len(errors) == 1, err
    assert "mine.egg:16:" in errors[0] and "egglog: " in errors[0] and "Arity" in errors[0]


def test_a_relation_a_users_file_declares_and_nobody_uses_is_a_warning(tmp_path, capsys):
    from engine.lint import main
    (tmp_path / "mine.egg").write_text("(relation Spare (Item))\n" + BLOCK)
    rc, _, err = call(main, [tmp_path], capsys)
    assert rc == 0 and "mine.egg:1:1: warning: relation 'Spare' is declared but no rule uses it" in err


def test_rule_examples_can_be_limited_to_a_folder_or_a_strategy(good, capsys, tvm):
    from lowering.rule_examples import main
    rc, _, err = call(main, ["--only", good], capsys)              # a folder: loaded, and only its examples run
    assert rc == 0 and "1 example(s) of 1 block(s): 1 passed, 0 failed" in err
    rc, _, err = call(main, ["--only=loop_parallelization"], capsys)         # a strategy: only its examples
    assert rc == 0 and "of 1 block(s)" in err
    rc, _, err = call(main, ["--only=loop_unroling"], capsys)
    assert rc == 2 and "error: --only: unknown strategy or strategy set 'loop_unroling' (did you mean " \
                       "'loop_unrolling'" in err


def test_argument_errors_name_the_flag_and_suggest(capsys):
    from engine import enumerate as enum
    rc, _, err = call(enum.main, [PROGRAM, "--strategy", "loop_splt"], capsys)
    assert rc == 2 and err.startswith("error: --strategies: unknown strategy or strategy set 'loop_splt' "
                                      "(did you mean 'loop_split'")
    assert "--rules DIR" in err and "<input>" not in err and len(err) < 400
    rc, _, err = call(enum.main, [PROGRAM, "--limit", "-1"], capsys)
    assert rc == 2 and err.strip() == "error: --limit must be at least 0, got -1"
    rc, _, err = call(enum.main, [PROGRAM, "--category", "mem"], capsys)
    assert rc == 2 and "error: --category: unknown category 'mem' (did you mean 'memory'?)" in err
    rc, out, _ = call(enum.main, [PROGRAM, "--strategies", "loop_split,online_softmax", "--limit", "50"], capsys)
    assert rc == 0 and {l.split("\t")[0] for l in out.splitlines() if "\t" in l} == {"loop_split", "online_softmax"}


def test_search_and_generate_name_their_strategies_flag(tmp_path, capsys):
    from dataset.generate import driver
    from search.__main__ import _main as search
    for main, argv in ((search, [PROGRAM, "-o", tmp_path / "t.json", "--strategy", "loop_splitt"]),
                       (driver.main, [PROGRAM, "-o", tmp_path / "o", "--strategy", "loop_splitt"])):
        rc, _, err = call(main, argv, capsys)
        assert rc == 2 and "error: --strategies: unknown strategy or strategy set 'loop_splitt' (did you mean " \
                           "'loop_split'" in err, err


@pytest.mark.parametrize("module", ["engine.check", "engine.enumerate", "engine.apply", "engine.equiv", "engine.lint",
                                    "dataset.generate.driver", "dataset.check.checker", "dataset.evaluate.evaluation", "search.__main__",
                                    "search.replay", "search.batch", "search.tune", "lowering.crosscheck"])
def test_help_is_whole_and_gives_every_default(module, monkeypatch):
    import argparse
    import importlib

    class Parsed(Exception):
        pass

    def grab(self, *a, **k):
        raise Parsed(self)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", grab)
    with pytest.raises(Parsed) as got:
        importlib.import_module(module).main([])
    p = got.value.args[0]
    desc = (p.description or "").strip()
    assert desc and desc[-1] in ".)", desc[-60:]                   # not cut mid-sentence
    quiet = (None, False, argparse.SUPPRESS)
    silent = [a.option_strings[0] for a in p._actions if a.option_strings and a.nargs != 0
              and a.default not in quiet and "default" not in (a.help or "")]
    assert silent == []


def test_a_value_outside_a_flags_choices_gets_the_closest(tmp_path, capsys):
    from dataset.generate import driver
    with pytest.raises(SystemExit) as ex:
        driver.main([str(PROGRAM), "-o", str(tmp_path / "o"), "--backend", "locl"])
    err = capsys.readouterr().err
    assert ex.value.code == 2 and "--backend: invalid choice: 'locl'" in err and "did you mean 'local'?" in err


def test_a_misspelt_metadata_key_gets_the_closest(tmp_path, capsys):
    from engine.lint import main
    (tmp_path / "mine.egg").write_text(BLOCK.replace(";; @difficulty easy", ";; @dificulty easy"))
    rc, _, err = call(main, [tmp_path], capsys)
    assert rc == 2 and "mine.egg:3:4: error: unknown metadata key @dificulty (did you mean @difficulty?)" in err


def test_a_rules_folder_without_rule_files_is_an_error(tmp_path, capsys):
    from engine import enumerate as enum
    rc, _, err = call(enum.main, [PROGRAM, "--rules", tmp_path], capsys)
    assert rc == 2 and f"{tmp_path.name}: error: no rule files (*.egg) in this folder" in err
