"""The house's floors (docs: README's tour): ``engine`` -> ``lowering`` -> ``search`` -> ``dataset``;
a package imports only its own floor and those below it, function-level imports included, and the
project's modules import one another without a cycle. Read from the source with ``ast``: nothing
is imported or run. benchmarks/ and tests/ may import anything; the package never imports them."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FLOORS = ("engine", "lowering", "search", "dataset")          # from the ground up
ABOVE_ALL = ("benchmarks", "tests")
# dataset/'s stages from the ground up: its own top-level modules (journal, progress, timing),
# translate and workloads supply programs to all; text a row says, then assembly, generation
# (which calls the assembly), checking, evaluation, training (docs/architecture.md)
DATASET_STAGES = ("", "text", "assembly", "generate", "check", "evaluate", "train")
DATASET_SHARED = ("translate", "workloads")



def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, Path]:
    return {_module_name(f): f for top in FLOORS for f in sorted((ROOT / top).rglob("*.py"))}


def imports_of(path: Path, modules=()) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, at any depth: ``import a.b``, ``from a.b import
    c`` (a.b.c when that is one of ``modules``, else a.b), relative imports resolved, and
    ``importlib.import_module("a.b")``."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            out += [(node.lineno, m) for m in subs] if len(subs) == len(node.names) else [(node.lineno, base)]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value))
    return out


def floor_violations(sources: dict[str, Path]) -> list[str]:
    """``file:line: FLOOR imports MODULE`` for each import of a higher floor (or of benchmarks or
    tests)."""
    bad = []
    for name, path in sources.items():
        own = FLOORS.index(name.split(".")[0])
        rel = path.relative_to(ROOT).as_posix()
        for line, mod in imports_of(path):
            top = mod.split(".")[0]
            if top in ABOVE_ALL or (top in FLOORS and FLOORS.index(top) > own):
                bad.append(f"{rel}:{line}: {FLOORS[own]} imports {mod}")
    return bad


def _dataset_stage(module: str) -> int | None:
    """The stage of a ``dataset`` module (its sub-package), None for a shared one."""
    parts = module.split(".")
    sub = parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in DATASET_STAGES + DATASET_SHARED) else ""
    return None if sub in DATASET_SHARED else DATASET_STAGES.index(sub)


def dataset_stage_violations(sources: dict[str, Path]) -> list[str]:
    """``file:line: STAGE imports MODULE`` for each import, inside ``dataset``, of a later stage;
    ``translate`` and ``workloads`` import no stage, and every stage may import them."""
    bad = []
    for name, path in sources.items():
        if name.split(".")[0] != "dataset":
            continue
        own = _dataset_stage(name)
        rel = path.relative_to(ROOT).as_posix()
        for line, mod in imports_of(path, sources):
            if mod.split(".")[0] != "dataset" or mod == "dataset":
                continue
            theirs = _dataset_stage(mod)
            if theirs is not None and (own is None or theirs > own):
                bad.append(f"{rel}:{line}: dataset.{DATASET_STAGES[own] if own is not None else name.split('.')[1]} "
                           f"imports {mod}")
    return bad


def import_cycles(sources: dict[str, Path]) -> list[list[str]]:
    """The strongly connected components (more than one module) of the import graph among the
    project's modules, package faces (``__init__``) included, function-level imports too."""
    graph = {n: sorted({m for _, m in imports_of(p, sources) if m in sources and m != n})
             for n, p in sources.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph[w])))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


@pytest.fixture(scope="module")
def sources() -> dict[str, Path]:
    return _sources()


def test_no_package_imports_a_floor_above_its_own(sources):
    assert floor_violations(sources) == []


def test_dataset_stages_import_only_earlier_stages(sources):
    assert {n.split(".")[1] for n in sources if n.count(".") > 1 and n.startswith("dataset.")} <= set(
        DATASET_STAGES + DATASET_SHARED), "a dataset sub-package with no place in DATASET_STAGES"
    assert dataset_stage_violations(sources) == []


def test_no_import_cycles(sources):
    assert import_cycles(sources) == []


def test_the_checks_can_fail(tmp_path, monkeypatch):
    """An engine module importing lowering (at function level) and two modules importing each
    other are caught, with the line of the import."""
    import sys
    for top in FLOORS:
        (tmp_path / top).mkdir()
        (tmp_path / top / "__init__.py").write_text("")
    (tmp_path / "engine" / "a.py").write_text("import json\n\ndef f():\n    from lowering import verifier\n")
    (tmp_path / "lowering" / "verifier.py").write_text("from . import run\n")
    (tmp_path / "lowering" / "run.py").write_text("import importlib\nimportlib.import_module('lowering.verifier')\n")
    (tmp_path / "dataset" / "b.py").write_text("from search import x\nfrom tests import conftest\n")
    for sub in ("text", "check", "translate"):
        (tmp_path / "dataset" / sub).mkdir()
        (tmp_path / "dataset" / sub / "__init__.py").write_text("")
    (tmp_path / "dataset" / "check" / "claims.py").write_text("from ..text import cot\n")
    (tmp_path / "dataset" / "text" / "cot.py").write_text("def f():\n    from ..check.claims import g\n")
    (tmp_path / "dataset" / "translate" / "graph.py").write_text("from dataset.text import cot\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    src = _sources()
    assert sorted(floor_violations(src)) == ["dataset/b.py:2: dataset imports tests", "engine/a.py:4: engine imports lowering"]
    assert sorted(import_cycles(src)) == [["dataset.check.claims", "dataset.text.cot"], ["lowering.run", "lowering.verifier"]]
    assert sorted(dataset_stage_violations(src)) == ["dataset/text/cot.py:2: dataset.text imports dataset.check.claims",
                                                     "dataset/translate/graph.py:1: dataset.translate imports dataset.text.cot"]
