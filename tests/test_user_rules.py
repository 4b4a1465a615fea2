"""A user's own strategy, written as one block without any Python change: lint accepts it in a
copy of rules/ and in a folder of its own (``--rules``), rejects incomplete blocks with located
errors, ``Engine(rules=[...])`` enumerates it, the strategy sets place it, and the results it
makes record the rule files (a replay or a check with other rules is an error naming the
difference)."""
import json
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

from engine.rewrite.lint import lint
from engine.rewrite.rulebook import load_rulebook



def readme_block() -> str:
    """The strategy block of the README's "Writing a strategy": the user's strategy here."""
    text = (ROOT / "README.md").read_text()
    text = text[text.index("## Writing a strategy"):]
    return text[text.index("```lisp\n") + 8:text.index("\n```", text.index("```lisp"))] + "\n"


SERIAL = readme_block()
PROGRAM = """program scale
input  A f32[32, 64]
output C f32[32, 64]

P^{32}_{i=0}L^{64}_{a=0}[C^{f32,g}_{i,a}=A^{f32,g}_{i,a}*2.0;];
"""
SERIAL_LEIR = "L^{32}_{i=0}L^{64}_{a=0}[C^{f32,g}_{i,a}=A^{f32,g}_{i,a}*2.0;];"


def errors(rep):
    return [line for line in rep.lines() if ": error: " in line]


def cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


@pytest.fixture(scope="module")
def mine(tmp_path_factory):
    """A folder of the user's own: one rule file and a program it rewrites."""
    d = tmp_path_factory.mktemp("mine")
    (d / "serial.egg").write_text(SERIAL)
    (d / "scale.leir").write_text(PROGRAM)
    return d


def test_lint_accepts_a_new_complete_block_in_a_copy_of_rules(tmp_path):
    copy = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", copy)
    (copy / "serial.egg").write_text(SERIAL)
    assert errors(lint(copy)) == []
    book = load_rulebook(copy)
    builtin = len(load_rulebook().strategies)
    assert book.by_name()["loop_serialization"].origin == "user" and len(book.strategies) == builtin + 1


def test_lint_cli_accepts_a_folder_of_ones_own_and_rejects_incomplete_blocks(mine, tmp_path):
    r = cli("engine.lint", "--rules", mine)
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "serial.egg").write_text(SERIAL.replace(";; @exactness bitwise\n", "")
                                    .replace("@benefit none", "@benefit speed"))
    r = cli("engine.lint", "--rules", bad)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    f = str(bad / "serial.egg")
    assert f"{f}:1:4: error: strategy 'loop_serialization' has no @exactness" in r.stderr, r.stderr
    assert f"{f}:6:4: error: @benefit: unknown benefit 'speed'" in r.stderr, r.stderr


def test_a_strategy_name_used_twice_across_folders_is_a_located_error(tmp_path):
    (tmp_path / "dup.egg").write_text(SERIAL.replace("loop_serialization", "loop_unrolling"))
    errs = errors(lint([tmp_path]))
    want = f"{tmp_path / 'dup.egg'}:1:4: error: strategy 'loop_unrolling' already has a block at "
    assert any(e.startswith(want) and "operator.egg:" in e for e in errs), errs
    from engine import Engine, LeirError
    with pytest.raises(LeirError, match="already has a block"):
        Engine(rules=[tmp_path])


def test_engine_enumerates_a_user_strategy_and_the_sets_place_it(mine):
    from engine import Engine, load_program
    from engine.rewrite.engine import resolve_strategies
    prog = load_program(mine / "scale.leir")
    eng = Engine(rules=[mine], strategies="user")
    assert eng.strategies == ("loop_serialization",)
    steps = eng.enumerate(prog)
    assert [(s.strategy, s.leir) for s in steps] == [("loop_serialization", SERIAL_LEIR)]
    assert eng.apply(prog, steps[0].to_json()).to_leir() == SERIAL_LEIR
    meta = eng.strategy("loop_serialization").metadata
    assert (meta.origin, meta.benefit, meta.inverse, meta.K, meta.P) == ("user", ("none",), "loop_parallelization", 0, 1)
    book = eng.rulebook
    assert "loop_serialization" in resolve_strategies(book, "all")[0]
    assert "loop_serialization" in resolve_strategies(book, "operator")[0]
    assert "loop_serialization" not in resolve_strategies(book, "paper")[0]
    assert [m["file"] for m in eng.rule_manifest][-1] == "serial.egg"
    only = Engine(rules=str(mine))          # one folder: added to the built-in rules too
    assert {"loop_serialization", "loop_unrolling"} <= set(only.strategies)
    from engine.rewrite.rule_sources import RuleSources
    alone = Engine(rules=RuleSources((str(mine),), builtin=False))
    assert alone.strategies == ("loop_serialization",)
    from engine.rewrite.rule_sources import SCHEMA_FILES
    assert [m["file"] for m in alone.rule_manifest] == [f"leir/{n}" for n in SCHEMA_FILES] + ["serial.egg"]


def test_enumerate_many_workers_load_the_same_rules(mine):
    from engine import Engine, load_program
    prog = load_program(mine / "scale.leir")
    eng = Engine(rules=[mine], strategies=["user"])
    got = eng.enumerate_many([prog, prog], workers=2)
    assert [[s.leir for s in steps] for steps in got] == [[SERIAL_LEIR], [SERIAL_LEIR]]


def test_difference_names_each_file():
    from engine.rewrite.rule_sources import difference
    a = [{"file": "leir.egg", "sha256": "1"}, {"file": "math.egg", "sha256": "2"}, {"file": "old.egg", "sha256": "3"}]
    b = [{"file": "leir.egg", "sha256": "1"}, {"file": "math.egg", "sha256": "9"}, {"file": "new.egg", "sha256": "4"}]
    assert difference(a, a) is None and difference(a, list(reversed(a))) is None
    assert difference(a, b) == "math.egg changed; new.egg loaded now but not recorded; old.egg not loaded now"


def test_apply_of_a_step_made_with_other_rules_is_an_error(mine, tmp_path):
    rec = json.loads(cli("engine.enumerate", mine / "scale.leir", "--rules", mine, "--strategy", "user",
                         "--json").stdout.splitlines()[0])
    manifest = load_rulebook([mine]).manifest()
    step = tmp_path / "step.json"
    step.write_text(json.dumps({**rec, "rules": manifest}))
    r = cli("engine.apply", mine / "scale.leir", "--step", step, "--rules", mine)
    assert r.returncode == 0 and r.stdout.strip() == SERIAL_LEIR, r.stderr
    r = cli("engine.apply", mine / "scale.leir", "--step", step)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "step.json:1:1: error: this step was made with other rule files" in r.stderr
    assert "(serial.egg not loaded now)" in r.stderr, r.stderr


def test_search_replay_with_other_rules_is_an_error(mine, tmp_path):
    from engine.leir.files import load_program
    manifest = load_rulebook(None).manifest()
    changed = [dict(m, sha256="0" * 64) if m["file"] == "math.egg" else m for m in manifest]
    traj = {"format": "leir-search-trajectory", "version": 1, "complete": True,
            "program": load_program(mine / "scale.leir").to_json(), "options": {"strategies": "paper"},
            "rules": changed, "best": {"steps": [], "leir": "", "speedup": 1.0}}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(traj, indent=1))
    r = cli("search.replay", path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "t.json: error: the trajectory was made with other rule files" in r.stderr and "math.egg changed" in r.stderr


@pytest.mark.slow
def test_a_user_strategy_makes_a_verified_row_that_checks_and_a_search_takes_it(mine, tmp_path):
    """The acceptance path: dataset.generate --strategies NAME writes a verified row that records
    the rule files; dataset.check passes with the same rules and exits 2 without them; a search
    with --strategies all takes the strategy, and its trajectory records the rules."""
    out = tmp_path / "out"
    r = cli("dataset.generate", mine / "scale.leir", "-o", out, "--rules", mine, "--strategies",
            "loop_serialization", "--no-plots")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]
    assert [row["step"]["strategy"] for row in rows] == ["loop_serialization"]
    assert rows[0]["rules"] == load_rulebook([mine]).manifest()
    assert "/" not in json.dumps(rows[0]["rules"]).replace("\\/", "")      # names only, never paths
    r = cli("dataset.check", out, "--sample", "0", "--rules", mine)
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("dataset.check", out, "--sample", "0")
    assert r.returncode == 2 and "serial.egg not loaded now" in r.stderr, r.stdout + r.stderr
    traj = tmp_path / "t.json"
    r = cli("search", mine / "scale.leir", "-o", traj, "--rules", mine, "--strategies", "all", "--policy", "random",
            "--budget", "2", "--trials", "1", "--repeat", "2", "--min-repeat-ms", "0.2", "--confirm", "1")
    assert r.returncode == 0, r.stderr
    rec = json.loads(traj.read_text())
    assert "loop_serialization" in rec["strategies"] and rec["rules"] == load_rulebook([mine]).manifest()
    r = cli("search.replay", traj)
    assert r.returncode == 2 and "serial.egg not loaded now" in r.stderr, r.stderr
