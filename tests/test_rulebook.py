"""The project's real rules/ directory: lint-clean, and the paper's 43 strategies (plus the
extra one) present once each, with the paper's category and bucket and their origin."""
import subprocess
import sys

from conftest import ROOT
from engine.rewrite.lint import lint
from engine.rewrite.meta import BENEFITS
from engine.rewrite.rulebook import load_rulebook
from paper_strategies import EXTRA_STRATEGIES, PAPER_STRATEGIES


def test_real_rules_directory_lints_clean():
    rep = lint(ROOT / "rules")
    assert [l for l in rep.lines() if ": error: " in l] == []
    assert not [l for l in rep.lines() if "@benefit" in l]          # every built-in block says its benefit
    r = subprocess.run([sys.executable, "-m", "engine.lint", "rules/"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_papers_43_blocks_match_the_paper():
    assert len(PAPER_STRATEGIES) == 43
    book = load_rulebook(ROOT / "rules")
    assert book.problems == []
    names = [s.name for s in book.strategies]
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(PAPER_STRATEGIES | EXTRA_STRATEGIES)
    table = PAPER_STRATEGIES | EXTRA_STRATEGIES
    for s in book.strategies:
        m = s.metadata
        assert m is not None and m.name == s.name
        assert (m.category, m.difficulty) == table[s.name], s.name
        assert m.origin == ("paper" if s.name in PAPER_STRATEGIES else "extra"), s.name
        assert m.exactness in ("bitwise", "reassociating"), s.name
        assert m.inverse == "none" or m.inverse in table, s.name
        assert m.benefit and set(m.benefit) <= set(BENEFITS), s.name
        assert m.description and s.rules, s.name
        assert m.score() == s.score()


def test_paper_and_extra_sets_follow_origin():
    from engine.rewrite.engine import resolve_strategies
    book = load_rulebook(ROOT / "rules")
    assert set(resolve_strategies(book, "paper")[0]) == set(PAPER_STRATEGIES)
    assert sorted(resolve_strategies(book, "extra")[0]) == sorted(EXTRA_STRATEGIES)
    assert resolve_strategies(book, "user")[0] == []
    assert len(resolve_strategies(book, "all")[0]) == 43 + len(EXTRA_STRATEGIES)
    assert resolve_strategies(book, "paper,extra")[0] == resolve_strategies(book, ["paper", "extra"])[0]
