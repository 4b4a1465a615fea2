"""The project's real rules/ directory: lint-clean, and every strategy of the spec present once."""
import subprocess
import sys

from conftest import ROOT
from engine.rewrite.lint import lint
from engine.rewrite.rulebook import SPEC_STRATEGIES, load_rulebook

META_KEYS = ("category", "difficulty", "K", "P", "S", "inverse", "exactness", "description")


def test_real_rules_directory_lints_clean():
    rep = lint(ROOT / "rules")
    assert [l for l in rep.lines() if ": error: " in l] == []
    r = subprocess.run([sys.executable, "-m", "engine.lint", "rules/"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_spec_strategy_has_exactly_one_block_with_full_metadata():
    book = load_rulebook(ROOT / "rules")
    names = [s.name for s in book.strategies]
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(SPEC_STRATEGIES)          # the paper's 43 plus dead_code_elimination
    assert len(SPEC_STRATEGIES) == 44
    for s in book.strategies:
        assert all(s.meta.get(k) for k in META_KEYS), (s.name, s.meta)
        assert (s.category, s.meta["difficulty"]) == SPEC_STRATEGIES[s.name], s.name
        assert s.exactness in ("bitwise", "reassociating"), s.name
        assert s.meta["inverse"] == "none" or s.meta["inverse"] in SPEC_STRATEGIES, s.name
        assert s.rules, f"{s.name} has no rules"
