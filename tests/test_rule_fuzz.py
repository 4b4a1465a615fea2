"""Issue 29, bullet 6: rule files with mistakes put in (tests/rulefuzz.py: blocks of the shipped
rules with dropped parentheses, misspelt relations and directives, wrong arities, bad
templates, ...) never make a traceback, and every mistake is reported located
(file:line:col). The default run fuzzes a seeded sample; ``slow`` fuzzes 2,000 files."""
from __future__ import annotations

import re

import pytest

import rulefuzz
from engine.leir.cli import run_cli

LOCATED = re.compile(r"^\S.*:\d+:\d+: (error|warning): \S")


def test_the_mutants_are_deterministic_and_varied():
    assert [rulefuzz.mutant(s) for s in range(20)] == [rulefuzz.mutant(s) for s in range(20)]
    kinds = {w.split(" ")[0] for s in range(300) for w in rulefuzz.mutant(s)[1]}
    assert {"dropped", "extra", "relation", "directive", "an", "a"} <= kinds


def test_a_sample_of_mutants_is_reported_located_with_no_traceback():
    res = rulefuzz.run(40, start=0)
    assert res["failures"] == [] and res["files"] == 40 and res["with_errors"] >= 30


def test_the_lint_command_on_mutants_prints_only_located_lines(tmp_path, capsys):
    from engine.lint import main
    for seed in (3, 5, 11, 19):
        data, _, builtin = rulefuzz.mutant(seed)
        d = tmp_path / f"s{seed}"
        d.mkdir()
        (d / "x.egg").write_bytes(data)
        rc = run_cli(main, [str(d)] + ([] if builtin else ["--no-builtin-rules"]))
        err = capsys.readouterr().err
        assert rc == 2 and "Traceback" not in err
        lines = err.strip().splitlines()
        assert lines[-1].endswith("warning(s)") and lines[-2].startswith("checked ")
        assert all(LOCATED.match(l) for l in lines[:-2]), lines


@pytest.mark.slow
def test_2000_mutants_are_reported_located_with_no_traceback():
    res = rulefuzz.run(2000, start=1000)
    assert res["failures"] == [], res["failures"][:5]
    assert res["files"] == 2000
