"""engine.saturate / engine.equiv: bounded reachability with rule paths and stop reasons."""
import json
import subprocess
import sys

import pytest

from engine.leir.ast import TensorDecl
from engine.rewrite.enumerator import Enumerator
from engine.leir.parser import parse_body
from engine.leir.program import make_program
from engine.rewrite.saturate import Limits, explore
from tests.conftest import ROOT
from rulekit import operator_rules_dir

A = ("B^{4}_{tx=0}L^{6}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];")
KNOWN = {"inputs": [{"name": "A", "dtype": "f32", "shape": [4, 8]}, {"name": "C", "dtype": "f32", "shape": [8, 6]}],
         "outputs": [{"name": "D", "dtype": "f32", "shape": [4, 6]}]}


@pytest.fixture(scope="module")
def eng(tmp_path_factory):
    d = operator_rules_dir(tmp_path_factory)
    return Enumerator(d), d


def prog(text):
    return make_program("t", [TensorDecl("A", "f32", (4, 8)), TensorDecl("C", "f32", (8, 6))],
                        [TensorDecl("D", "f32", (4, 6))], parse_body(text))


def test_two_step_path(eng):
    e, _ = eng
    a = prog(A)
    split = e.enumerate(a, ["loop_split"]).neighbours[0]
    target = e.enumerate(split.program, ["loop_unrolling"]).neighbours[0]
    ex = explore(e, a, Limits(iterations=2), target=target.leir, strategies=["loop_split", "loop_unrolling"])
    assert ex.stop_reason == "found"
    assert [p.strategy for p in ex.path(ex.found)] == ["loop_split", "loop_unrolling"]


def test_unreachable_and_limits(eng):
    e, _ = eng
    a = prog(A)
    other = "B^{4}_{tx=0}L^{6}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+C^{f32,g}_{c,a}*A^{f32,g}_{tx,c};];"
    ex = explore(e, a, Limits(iterations=1), target=other)
    assert ex.found is None and ex.stop_reason == "iterations" and ex.nodes > 10
    ex = explore(e, a, Limits(iterations=3, nodes=50), target=other)
    assert ex.stop_reason == "nodes" and ex.nodes == 50
    ex = explore(e, a, Limits(iterations=3, time_s=0.0), target=other)
    assert ex.stop_reason == "time"


def _write(tmp_path, name, leir):
    f = tmp_path / name
    f.write_text(json.dumps(dict(KNOWN, name="t", leir=leir)))
    return f


def test_cli(eng, tmp_path):
    e, d = eng
    a = prog(A)
    split = e.enumerate(a, ["loop_split"]).neighbours[0]
    fa, fb = _write(tmp_path, "a.json", A), _write(tmp_path, "b.json", split.leir)
    r = subprocess.run([sys.executable, "-m", "engine.equiv", str(fb), str(fa), "--steps", "1", "--rules", str(d)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("reachable in 1 step(s)") and "loop_fusion" in r.stdout
    r = subprocess.run([sys.executable, "-m", "engine.equiv", str(fa), str(fa), "--steps", "0", "--rules", str(d)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0 and "reachable in 0 step(s)" in r.stdout
    fc = _write(tmp_path, "c.json", A.replace("A^{f32,g}_{tx,c}*C^{f32,g}_{c,a}", "C^{f32,g}_{c,a}*A^{f32,g}_{tx,c}"))
    r = subprocess.run([sys.executable, "-m", "engine.equiv", str(fa), str(fc), "--steps", "1", "--rules", str(d)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 1 and "not reachable within 1 step(s)" in r.stdout
    r = subprocess.run([sys.executable, "-m", "engine.equiv", str(fa), str(tmp_path / "nope.json")],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
