"""The installed distribution carries every package and the rule files (a wheel, not only a checkout)."""
import tomllib

from conftest import ROOT


def _setuptools():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_python_package_of_the_tree_is_installed():
    listed = set(_setuptools()["packages"])
    found = {str(p.parent.relative_to(ROOT)).replace("/", ".")
             for top in ("engine", "lowering", "dataset", "search") for p in (ROOT / top).rglob("__init__.py")}
    assert found, "no packages found"
    assert found <= listed, f"packages missing from pyproject.toml: {sorted(found - listed)}"


def test_rule_files_ship_as_package_data_of_engine_rules():
    st = _setuptools()
    assert st["package-dir"]["engine.rules"] == "rules"
    assert "engine.rules" in st["packages"]
    assert {"*.egg", "leir/*.egg"} <= set(st["package-data"]["engine.rules"])
    from engine.rewrite.rule_sources import SCHEMA_DIR, SCHEMA_FILES
    assert all((ROOT / "rules" / SCHEMA_DIR / f).is_file() for f in SCHEMA_FILES)
    assert sorted(p.name for p in (ROOT / "rules" / SCHEMA_DIR).iterdir()) == sorted(SCHEMA_FILES)


def test_the_source_tree_finds_its_rules():
    from engine.rewrite.rulebook import RULES_DIR
    assert RULES_DIR == ROOT / "rules"
