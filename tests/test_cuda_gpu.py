"""Issue 14 acceptance on a machine with a CUDA device (``gpu``: skipped where there is none).

* ``python -m lowering.crosscheck`` over the public corpus (every program up to 2^26 loop
  iterations): every program gives on cuda what it gives on llvm, at strict tolerance;
* a seeded sample of at least 400 neighbours of those programs, stratified by strategy: each
  verifies equal to its original on cuda (``Verifier(target="cuda")``, the tolerance its
  exactness demands), and crosscheck finds llvm and cuda agreeing on it.
"""
import json
import subprocess
import sys

import pytest

from conftest import CORPUS, ROOT, corpus_records
from neighbour_sample import corpus_programs, stratified_neighbours

pytestmark = pytest.mark.gpu
MAX_POINTS = 1 << 26


def _crosscheck(path, tmp_path):
    log = tmp_path / "workers.log"
    r = subprocess.run([sys.executable, "-m", "lowering.crosscheck", str(path), "--json", "--log", str(log)],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    out = json.loads(r.stdout)
    bad = [(p["program"], p["status"], p["message"]) for p in out["programs"] if not p["agrees"]]
    return r, out, bad


def _sample():
    from lowering.crosscheck import points
    small = tuple(p for p in corpus_programs() if points(p) <= MAX_POINTS)
    return stratified_neighbours(small, 24)


def test_corpus_agrees_on_llvm_and_cuda(tmp_path):
    if not corpus_records():
        pytest.skip("corpus not available")
    r, out, bad = _crosscheck(CORPUS, tmp_path)
    assert out["device"]["cuda"] and bad == [] and r.returncode == 0
    assert out["summary"]["equal"] >= 45          # every program up to 2^26 iterations ran on both


def test_400_stratified_neighbours_verify_equal_on_cuda(tmp_path):
    from lowering import Verifier
    if not corpus_records():
        pytest.skip("corpus not available")
    sample = _sample()
    assert len(sample) >= 400 and len({s.strategy for _, s in sample}) >= 25
    bad = []
    with Verifier(target="cuda", trials=3, timeout=600, log=str(tmp_path / "verifier.log")) as v:
        for p, s in sample:
            verdict = v.verify_step(p, s)
            if not verdict.equal:
                bad.append((s.strategy, s.rule, p.name, verdict.reason, verdict.message))
    assert bad == []


def test_400_stratified_neighbours_agree_on_llvm_and_cuda(tmp_path):
    if not corpus_records():
        pytest.skip("corpus not available")
    path = tmp_path / "neighbours.jsonl"
    with path.open("w") as f:
        for i, (p, s) in enumerate(_sample()):
            rec = s.program.to_json()
            rec["name"] = f"{p.name}.{i}.{s.strategy}"
            f.write(json.dumps(rec) + "\n")
    r, out, bad = _crosscheck(path, tmp_path)
    assert bad == [] and r.returncode == 0 and out["summary"]["programs"] >= 400
