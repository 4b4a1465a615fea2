"""The schema is the folder rules/leir/ (term schema, relations files, helper library), loaded in
the fixed order of ``SCHEMA_FILES``. A rules folder of the layout before the split, with one
leir.egg (a copy of rules/ made then, a job's recorded rule files), still loads as a complete
rules directory, and a result recorded with the single leir.egg that was split still checks."""
import shutil
import subprocess

import pytest
from conftest import ROOT

from engine.leir.diagnostics import LeirError
from engine.rewrite.rulebook import load_rulebook
from engine.rewrite.rule_sources import (RULES_DIR, SCHEMA_DIR, SCHEMA_FILES, SPLIT_SCHEMAS, RuleSources, difference,
                                    digest, unbundle)
from engine.rewrite.sexp import read_sexps, sexp_text


def _schema_text() -> str:
    """The schema files' texts, concatenated in load order: one valid single-file schema."""
    return "".join((RULES_DIR / SCHEMA_DIR / f).read_text() for f in SCHEMA_FILES)


def test_the_schema_loads_first_in_its_fixed_order():
    book = load_rulebook()
    assert book.schema_files == [RULES_DIR / SCHEMA_DIR / f for f in SCHEMA_FILES]
    assert [m["file"] for m in book.manifest()[:len(SCHEMA_FILES)]] == [f"leir/{f}" for f in SCHEMA_FILES]
    assert all(f.parent == RULES_DIR for f in book.strategy_files) and book.strategy_files
    # one job each: the datatypes in terms.egg, the compute ruleset's rules in helpers.egg only
    for f in book.schema_files:
        heads = {form.head for form in book.forms(f)}
        assert ("datatype*" in heads) == (f.name == "terms.egg"), f
        compute = [form for form in book.forms(f) if form.is_list and "compute" in sexp_text(form).split()]
        assert bool(compute) == (f.name == "helpers.egg"), f


def test_a_folder_with_a_single_leir_egg_is_a_complete_rules_directory(tmp_path):
    (tmp_path / "leir.egg").write_text(_schema_text())
    shutil.copy(RULES_DIR / "operator.egg", tmp_path / "operator.egg")
    book = load_rulebook(tmp_path)
    assert book.problems == []
    assert [m["file"] for m in book.manifest()] == ["leir.egg", "operator.egg"]
    assert {s.file for s in book.strategies} == {str(tmp_path / "operator.egg")}


@pytest.mark.parametrize("change,message", [
    (lambda d: (d / SCHEMA_DIR / "helpers.egg").unlink(), "the schema folder lacks helpers.egg"),
    (lambda d: (d / SCHEMA_DIR / "mine.egg").write_text(""), "mine.egg is not a schema file"),
    (lambda d: (d / "leir.egg").write_text(_schema_text()), "holds two schemas"),
])
def test_a_broken_schema_folder_is_a_clear_error(tmp_path, change, message):
    shutil.copytree(RULES_DIR / SCHEMA_DIR, tmp_path / SCHEMA_DIR)
    change(tmp_path)
    with pytest.raises(LeirError, match=message):
        RuleSources((str(tmp_path),)).files()


def test_bundles_of_both_layouts_unbundle_to_the_same_rules(tmp_path):
    new = RuleSources().bundle()
    n = len(SCHEMA_FILES)
    assert [name for name, _ in new[0][:n]] == [f"leir/{f}" for f in SCHEMA_FILES]
    assert all("/" not in name for name, _ in new[0][n:]) and new[0][n:]     # the built-in strategy files
    back = load_rulebook(unbundle(new, tmp_path / "new"))
    assert [(m["file"], m["sha256"]) for m in back.manifest()] == \
        [(m["file"], m["sha256"]) for m in load_rulebook().manifest()]
    old = [[["leir.egg", _schema_text()]] + new[0][n:]] + new[1:]     # what a job recorded before the split
    assert [m["file"] for m in load_rulebook(unbundle(old, tmp_path / "old")).manifest()][0] == "leir.egg"
    with pytest.raises(LeirError, match="not a rule file"):
        unbundle([[["../escape.egg", ""]]], tmp_path / "bad")


def test_a_record_of_the_split_leir_egg_names_the_files_it_was_split_into():
    (old, files), = SPLIT_SCHEMAS.items()
    current = [{"file": n, "sha256": h} for n, h in files.items()] + [{"file": "math.egg", "sha256": "m"}]
    recorded = [{"file": "leir.egg", "sha256": old}, {"file": "math.egg", "sha256": "m"}]
    assert difference(recorded, current) is None
    changed = [dict(e, sha256="x") if e["file"] == "leir/values.egg" else e for e in current]
    assert difference(recorded, changed) == "leir/values.egg changed"
    other = [{"file": "leir.egg", "sha256": "0" * 64}, {"file": "math.egg", "sha256": "m"}]
    assert difference(other, current).startswith("leir.egg not loaded now; leir/helpers.egg loaded now")


def test_the_split_record_is_true_to_the_file_it_names():
    """SPLIT_SCHEMAS' leir.egg is main's at f008ae2, and while the schema files are the ones it
    names, they hold that file's forms exactly (moved between files, none changed)."""
    (old, files), = SPLIT_SCHEMAS.items()
    got = subprocess.run(["git", "show", "f008ae2:rules/leir.egg"], cwd=ROOT, capture_output=True, text=True)
    if got.returncode != 0:
        pytest.skip("this checkout lacks the git history of rules/leir.egg")
    assert digest(got.stdout) == old
    now = {f"leir/{f}": digest((RULES_DIR / SCHEMA_DIR / f).read_text()) for f in SCHEMA_FILES}
    if now != files:
        pytest.skip("the schema changed since the split: SPLIT_SCHEMAS names the files as they were then")
    forms = sorted(sexp_text(f) for f in read_sexps(got.stdout))
    assert forms == sorted(sexp_text(f) for f in read_sexps(_schema_text()))


def test_rulediff_compares_the_schema_whatever_its_layout(tmp_path, capsys):
    """A copy of rules/ whose schema is one leir.egg loads the same program as rules/ itself."""
    from engine.rewrite.rulediff import main
    old = tmp_path / "old"
    old.mkdir()
    (old / "leir.egg").write_text(_schema_text())
    for f in RULES_DIR.glob("*.egg"):
        shutil.copy(f, old / f.name)
    assert main([str(old), str(RULES_DIR)]) == 0
    assert capsys.readouterr().out.strip().endswith("0 form(s) differ")
    (old / "leir.egg").write_text(_schema_text().replace("(relation FirstUse (Item String))", ""))
    assert main([str(old), str(RULES_DIR)]) == 1
    assert "leir/ (relation FirstUse (Item String))" in capsys.readouterr().out
