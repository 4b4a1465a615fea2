"""The README's main job, as a user runs it: the quick-start command itself (less the set-up), then
enumerate, emit neighbour programs, verify one on TVM."""
import json
import os
import re
import shlex
import subprocess
import sys

import pytest
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


def quick_start_commands(smaller: dict | None = None) -> list[list[str]]:
    """The README's quick-start command, split at '&&', without the set-up (venv, pip);
    ``smaller``: option -> value replacing the README's (a quicker run of the same commands)."""
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"## Quick start.*?```bash\n(.*?)\n```", readme, re.S)
    assert m, "the README has a '## Quick start' section with a bash block"
    steps = [shlex.split(part) for part in m.group(1).split("&&")]
    assert steps[0][:3] == ["python3", "-m", "venv"] and "pip" in steps[1][0]
    assert all(st[0] == ".venv/bin/python" for st in steps[2:]), steps
    out = [[sys.executable] + st[1:] for st in steps[2:]]
    for option, value in (smaller or {}).items():
        hits = [(cmd, i) for cmd in out for i, a in enumerate(cmd[:-1]) if a == option]
        assert hits, f"the quick start no longer passes {option}"
        for cmd, i in hits:
            cmd[i + 1] = value
    return out


def run_quick_start(tmp_path, examples: list, smaller: dict | None = None):
    """Every command of the quick start succeeds from a directory holding ``examples`` (under
    examples/: paths linked by their names, or name -> text written there), and leaves what the
    README says it leaves: a checked dataset, a trajectory that replays, its plot. Returns the
    trajectory."""
    if examples == [EXAMPLES]:
        (tmp_path / "examples").symlink_to(EXAMPLES)
    else:
        (tmp_path / "examples").mkdir()
        for f in examples:
            if isinstance(f, tuple):
                (tmp_path / "examples" / f[0]).write_text(f[1])
            else:
                (tmp_path / "examples" / f.name).symlink_to(f)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for cmd in quick_start_commands(smaller):
        r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env)
        assert r.returncode == 0, (cmd, r.stdout[-2000:], r.stderr[-2000:])
    out = tmp_path / "out"
    rows = [json.loads(line) for line in (out / "examples" / "rows.jsonl").read_text().splitlines()]
    assert {r["program"]["name"] for r in rows} >= {"softmax", "matmul"}
    traj = json.loads((out / "matmul.json").read_text())
    assert traj["options"]["algorithm"] == "kernels"
    assert traj["summary"]["kernels"]["composed"] is not None
    assert traj["best"]["speedup"] > 0 and (out / "matmul.png").stat().st_size > 0
    return traj


# examples/softmax.leir and examples/matmul.leir at small shapes (same statements): the quick start's
# commands name these files; at these sizes building, verifying and timing take a fraction of the time
SMALL_EXAMPLES = [
    ("softmax.leir", """program softmax
input  A f32[4, 64]
output C f32[4, 64]

B^{4}_{tx=0}L^{64}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];
B^{4}_{tx=0}L^{64}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];
B^{4}_{tx=0}L^{64}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];
"""),
    ("matmul.leir", """program matmul
input  A f32[16, 32]
input  C f32[32, 24]
output D f32[16, 24]

B^{16}_{tx=0}L^{24}_{a=0}L^{32}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];
"""),
]


def test_small_examples_are_the_bundled_ones_at_smaller_shapes():
    """The stand-ins keep the bundled examples' statements (only extents and shapes differ)."""
    def shape_free(text):
        body = [l for l in text.splitlines() if l.strip() and not l.startswith("#")]
        return [re.sub(r"\d+", "N", l) for l in body]
    for name, text in SMALL_EXAMPLES:
        assert shape_free(text) == shape_free((EXAMPLES / name).read_text()), name


def test_readme_quick_start_commands_run_on_two_examples(tmp_path):
    """The quick start's commands as written, on the softmax and matmul examples alone at small shapes,
    with 2 rows a program and a search budget of 4 (the README's run on the bundled examples, the
    corpus included, is the long test below)."""
    traj = run_quick_start(tmp_path, SMALL_EXAMPLES, {"--per-program": "2", "--budget": "4"})
    assert traj["options"]["budget"] == 4 and traj["summary"]["samples"] <= 4


@pytest.mark.long
def test_readme_quick_start_runs_as_written(tmp_path):
    """The README's quick start exactly: every bundled example and the corpus below examples/."""
    traj = run_quick_start(tmp_path, [EXAMPLES])
    assert traj["summary"]["samples"] <= 16
