"""Shared helpers of the rule tests: restricted engines, small programs, stratified samples,
and the numerical check every sampled neighbour must pass."""
from __future__ import annotations

from pathlib import Path

from engine.leir.ast import TensorDecl
from engine.rewrite.enumerator import Enumerator
from engine.leir.parser import parse_body
from engine.leir.program import make_program
from engine.rewrite.rulebook import load_rulebook


def copy_schema(dest):
    """The project's schema (the folder rules/leir/) copied into the folder ``dest``, which
    becomes a complete rules directory; returns the copy's schema folder."""
    import shutil
    from engine.rewrite.rule_sources import RULES_DIR, SCHEMA_DIR
    return Path(shutil.copytree(RULES_DIR / SCHEMA_DIR, Path(dest) / SCHEMA_DIR, dirs_exist_ok=True))


def operator_rules_dir(tmp_path_factory):
    """A rules directory holding only the schema and rules/operator.egg (an engine loaded
    from a directory of the user's choosing, as ``--rules DIR`` does)."""
    import shutil
    from engine.rewrite.rulebook import RULES_DIR
    d = tmp_path_factory.mktemp("oprules")
    copy_schema(d)
    shutil.copy(RULES_DIR / "operator.egg", d / "operator.egg")
    return d


def rule_file_dir(tmp_path, text: str):
    """``tmp_path`` as a rules directory: the project's schema (rules/leir/) and ``text`` as x.egg."""
    copy_schema(tmp_path)
    (tmp_path / "x.egg").write_text(text)
    return tmp_path


def engine_for(rule_file: str) -> Enumerator:
    """An engine that loads only the strategies of one rule file (plus the schema)."""
    names = [s.name for s in load_rulebook().strategies if s.file.endswith(rule_file)]
    return Enumerator(strategies=names)


def prog(body: str, inputs: dict, outputs: dict, name: str = "t"):
    """A checked program from LEIR text; tensors as {name: shape} (f32) or {name: (dtype, shape)}."""
    def decl(d):
        out = []
        for n, v in d.items():
            dtype, shape = v if len(v) == 2 and isinstance(v[0], str) else ("f32", v)
            out.append(TensorDecl(n, dtype, tuple(shape)))
        return tuple(out)
    return make_program(name, decl(inputs), decl(outputs), parse_body(body))


def prog_f32(text, inputs, outputs, name="t"):
    """A checked f32 program from LEIR text and (name, shape) pairs."""
    return make_program(name, [TensorDecl(n, "f32", tuple(s)) for n, s in inputs],
                        [TensorDecl(n, "f32", tuple(s)) for n, s in outputs], parse_body(text))


def stratified(groups: dict, per_group: int) -> list:
    """Every ``step``-th item of each group (groups in sorted order): deterministic and spread."""
    out = []
    for key in sorted(groups):
        items = groups[key]
        step = max(1, len(items) // per_group)
        out += [(key, q, nb) for q, nb in items[::step][:per_group]]
    return out


def assert_all_equal(pairs) -> None:
    """Each (label, program, neighbour) verifies Equal on 3 trials; lists every failure."""
    from lowering.verify import verify
    bad = []
    for label, q, nb in pairs:
        r = verify(q, nb.program, trials=3)
        if not r.equal:
            bad.append((label, q.name, nb.leir, r.error))
    assert bad == []
