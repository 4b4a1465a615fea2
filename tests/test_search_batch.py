"""``python -m search.batch``: 2 tiny programs x 2 policies (random, measure) at a tiny budget,
locally; a rerun skips finished runs and continues an interrupted one from its trajectory;
``search.report`` prints the paper's Table 3 columns; the plan of a larger batch (programs x
algorithms x policies x seeds) and its file names; user errors exit 2."""
import json
import os
import subprocess
import sys
from pathlib import Path

from test_search_llm import tiny_program

ROOT = Path(__file__).resolve().parent.parent
SCALE = "L^{8}_{a=0}L^{16}_{b=0}[C^{f32,g}_{a,b}=A^{f32,g}_{a,b}*2.0+K^{f32,g}_{b};];"
FAST = ["--trials", "2", "--repeat", "3", "--min-repeat-ms", "0.2", "--confirm", "1", "--screen", "2"]


def _cli(*args, timeout=600):
    return subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


def programs(tmp_path) -> Path:
    from engine import parse_program
    scale = parse_program(SCALE, name="tiny_scale", inputs=[{"name": "A", "dtype": "f32", "shape": [8, 16]},
                                                            {"name": "K", "dtype": "f32", "shape": [16]}],
                          outputs=[{"name": "C", "dtype": "f32", "shape": [8, 16]}])
    path = tmp_path / "progs.jsonl"
    path.write_text("".join(json.dumps(p.to_json()) + "\n" for p in (tiny_program(), scale)))
    return path


def test_batch_plans_every_program_algorithm_policy_and_seed(tmp_path):
    """The cross product in order, each run's file named by program, algorithm, policy and seed (the
    runs themselves: the next test, at one seed)."""
    from search import batch
    progs = programs(tmp_path)
    a = batch.parser().parse_args([str(progs), "-o", str(tmp_path / "runs"), "--algorithms", "greedy,mcts",
                                   "--policies", "random,measure", "--seeds", "0,1", "--budget", "2"])
    runs = batch.plan(a)
    assert [r["id"] for r in runs] == [f"{prog}/{alg}.{pol}.s{seed}" for prog in ("tiny_softmax", "tiny_scale")
                                       for alg in ("greedy", "mcts") for pol in ("random", "measure")
                                       for seed in (0, 1)]
    for r in runs:
        assert r["path"] == tmp_path / "runs" / "runs" / f"{r['id']}.json"
        assert r["program"]["name"] == r["id"].split("/")[0]
        o = r["options"]
        assert f"{o['algorithm']}.{o['policy']}.s{o['seed']}" == r["id"].split("/")[1] and o["budget"] == 2


def test_batch_runs_resumes_and_reports(tmp_path):
    progs, out = programs(tmp_path), tmp_path / "runs"
    r = _cli("-m", "search.batch", progs, "-o", out, "--policies", "random,measure", "--seeds", "1",
             "--budget", "2", "--workers", "2", *FAST)
    assert r.returncode == 0, r.stderr
    assert "4 runs: 0 done, 0 to resume, 4 to start" in r.stderr
    files = sorted(p.relative_to(out / "runs").as_posix() for p in (out / "runs").rglob("*.json"))
    assert files == [f"{prog}/greedy.{pol}.s1.json" for prog in ("tiny_scale", "tiny_softmax")
                     for pol in ("measure", "random")]
    recs = {f: json.loads((out / "runs" / f).read_text()) for f in files}
    for f, rec in recs.items():
        assert rec["complete"] and rec["summary"]["samples"] <= 2
        assert f.split("/")[0] == rec["program"]["name"]
        assert f"greedy.{rec['options']['policy']}.s{rec['options']['seed']}" in f
    assert all(run["status"] == "done" for run in json.loads((out / "batch.json").read_text())["runs"])

    # interrupt one run after its first sample (what a kill leaves: an incomplete trajectory),
    # remove another; the rerun keeps the 2 others untouched
    part = out / "runs" / "tiny_softmax" / "greedy.measure.s1.json"
    rec = json.loads(part.read_text())
    first = rec["samples"][0]
    rec.update(complete=False, best={}, samples=rec["samples"][:1])
    part.write_text(json.dumps(rec))
    (out / "runs" / "tiny_scale" / "greedy.random.s1.json").unlink()
    kept = {f: (out / "runs" / f).read_bytes() for f in files if "softmax/greedy.measure.s1" not in f
            and "scale/greedy.random.s1" not in f}
    assert len(kept) == 2
    r = _cli("-m", "search.batch", progs, "-o", out, "--policies", "random,measure", "--seeds", "1",
             "--budget", "2", *FAST)
    assert r.returncode == 0, r.stderr
    assert "4 runs: 2 done, 1 to resume, 1 to start" in r.stderr
    assert all((out / "runs" / f).read_bytes() == b for f, b in kept.items())
    resumed = json.loads(part.read_text())
    assert resumed["complete"] and resumed["original"] == rec["original"]
    assert resumed["samples"][0]["outcome"] == first["outcome"]          # reused, not measured again
    assert (out / "runs" / "tiny_scale" / "greedy.random.s1.json").exists()

    r = _cli("-m", "search.report", out, "--paper")
    assert r.returncode == 0, r.stderr
    assert "| algorithm | policy | runs | avg #samples | max #samples | avg speedup | median speedup | max speedup " \
           "| search efficiency |" in r.stdout
    assert "| greedy | measure | 2 |" in r.stdout and "| greedy | random | 2 |" in r.stdout
    assert "avg #strategies" in r.stdout and "| MCTS | 17.41 | 21 |" in r.stdout
    full = _cli("-m", "search.report", out, "--full")
    assert "eff_ratio_of_avgs" in full.stdout


def test_batch_user_errors_exit_2(tmp_path):
    progs = programs(tmp_path)
    for args, text in ((["--policies", "magic"], "unknown policy 'magic' in --policies"),
                       (["--seeds", "a"], "--seeds must be a comma list of integers"),
                       (["--budget", "0"], "--budget must be a positive"),
                       (["--address", "auto"], "--address joins a Ray cluster")):
        r = _cli("-m", "search.batch", progs, "-o", tmp_path / "o", *args)
        assert r.returncode == 2 and text in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = _cli("-m", "search.batch", tmp_path / "missing.jsonl", "-o", tmp_path / "o")
    assert r.returncode == 2 and "missing.jsonl" in r.stderr and "Traceback" not in r.stderr
