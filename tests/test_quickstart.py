"""The README's main job, as a user runs it: enumerate, emit neighbour programs, verify one on TVM."""
import json
import subprocess
import sys

from conftest import EXAMPLES, ROOT


def run(*args):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


def test_enumerate_emit_and_verify_online_softmax(tmp_path):
    out = tmp_path / "online.jsonl"
    r = run("engine.enumerate", str(EXAMPLES / "softmax.leir"), "--strategy", "online_softmax",
            "--emit-jsonl", str(out))
    assert r.returncode == 0, r.stderr
    recs = [json.loads(l) for l in out.read_text().splitlines()]
    assert len(recs) == 1 and recs[0]["provenance"]["strategy"] == "online_softmax"
    assert recs[0]["name"] == "softmax.0.online_softmax"
    assert "#" not in json.dumps(recs[0]["provenance"])        # fresh names are resolved
    assert list(tmp_path.iterdir()) == [out]                   # atomic write leaves no temporary behind
    v = run("lowering.verify", str(EXAMPLES / "softmax.leir"), str(out), "--json")
    assert v.returncode == 0, v.stdout + v.stderr
    res = json.loads(v.stdout)
    assert (res["diff"], res["build"], res["exec"], res["equal"]) == (True, True, True, True)


def test_enumerate_limit_lists_provenance_and_canonical_text():
    r = run("engine.enumerate", str(EXAMPLES / "matmul.leir"), "--limit", "3", "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(l) for l in r.stdout.splitlines()]
    assert len(rows) == 3
    for row in rows:
        assert {"strategy", "category", "rule", "site", "params", "leir"} <= set(row)
        assert row["leir"].startswith(("B^", "L^", "P^", "U^", "V^"))
