"""docs/authoring.md runs as written: its files are written and its commands run, in order, in an empty
folder; then the same block is put in a copy of rules/ and used from there."""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

GUIDE = ROOT / "docs" / "authoring.md"
STRATEGY = "identity_elimination"


def guide_parts() -> tuple[dict[str, str], list[list[str]]]:
    """The files (path -> text) and the commands the guide gives, in order."""
    text = GUIDE.read_text()
    files, commands = {}, []
    for m in re.finditer(r"<!-- (file: (\S+)|run) -->\n```\w*\n(.*?)```", text, re.S):
        if m.group(2):
            files[m.group(2)] = m.group(3)
        else:
            commands += [shlex.split(line) for line in m.group(3).splitlines() if line.strip()]
    return files, commands


def run(cmd, cwd):
    assert cmd[:2] == ["python", "-m"], cmd
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable] + cmd[1:], cwd=cwd, capture_output=True, text=True, env=env)


@pytest.mark.long
def test_the_guide_runs_as_written(tmp_path):
    files, commands = guide_parts()
    assert set(files) == {"my_rules/simplify.egg", "scaled_copy.leir"}
    assert [c[2] for c in commands] == ["engine.lint", "engine.enumerate", "dataset.generate", "dataset.check",
                                        "search", "search.replay"]
    for name, body in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    out = {}
    for cmd in commands:
        r = run(cmd, tmp_path)
        assert r.returncode == 0, (cmd, r.stdout[-2000:], r.stderr[-3000:])
        out[cmd[2]] = r
    listed = [line for line in out["engine.enumerate"].stdout.splitlines() if line.startswith(STRATEGY)]
    assert sorted(line.split("\t")[1] for line in listed) == [
        f"{STRATEGY}/{v}" for v in ("double_negation", "minus_zero", "over_one", "times_one")]

    rows = [json.loads(line) for line in (tmp_path / "out/mine/rows.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and {r["step"]["strategy"] for r in rows} == {STRATEGY}
    for row in rows:                                     # the block's own sentence, its slots filled in
        assert "computes a value that one of its operations leaves unchanged; without it the equation becomes" \
            in row["cot"], row["cot"]
        assert not re.search(r"(?<![\^_])\{[a-z_.:]+\}", row["cot"]), row["cot"]      # no slot left unfilled
        assert row["rules"] and all(set(f) == {"file", "sha256"} for f in row["rules"])
        assert any(f["file"] == "simplify.egg" for f in row["rules"])
    traj = json.loads((tmp_path / "out/scaled_copy.json").read_text())
    assert traj["options"]["strategies"] == "all"
    assert any(f["file"] == "simplify.egg" for f in traj["rules"])

    # the rows name the rule files: without the user's folder, the check refuses them, naming the file
    r = run(["python", "-m", "dataset.check", "out/mine"], tmp_path)
    assert r.returncode == 2 and "simplify.egg" in r.stderr and "Traceback" not in r.stderr

    # a search restricted to the new strategy takes its steps
    r = run(["python", "-m", "search", "scaled_copy.leir", "-o", "out/only.json", "--rules", "my_rules",
             "--strategies", STRATEGY, "--policy", "random", "--budget", "3"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    traj = json.loads((tmp_path / "out/only.json").read_text())
    assert STRATEGY in traj["strategies"] and traj["summary"]["samples"] >= 1
    # the kernel search (the default) measured kernels rewritten by the strategy's steps, verified
    taken = [s for s in traj["samples"] if s["status"] == "accepted" and s["kernel_steps"]]
    assert taken and {k["strategy"] for s in taken for k in s["kernel_steps"]} == {STRATEGY}


def test_the_block_in_a_copy_of_the_rules_directory(tmp_path):
    files, _ = guide_parts()
    rules = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", rules)
    (rules / "simplify.egg").write_text(files["my_rules/simplify.egg"])
    (tmp_path / "scaled_copy.leir").write_text(files["scaled_copy.leir"])
    r = run(["python", "-m", "engine.lint", "rules"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    r = run(["python", "-m", "engine.enumerate", "scaled_copy.leir", "--rules", "rules", "--strategy", STRATEGY,
             "--json"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(r.stdout.splitlines()) == 4
    # a mistake in the block is a located error, exit 2
    (rules / "simplify.egg").write_text(files["my_rules/simplify.egg"].replace("{equation_after}", "{equation_aftr}"))
    r = run(["python", "-m", "engine.lint", "rules"], tmp_path)
    assert r.returncode == 2 and re.search(r"simplify\.egg:\d+:\d+: error: .*equation_aftr", r.stderr), r.stderr
