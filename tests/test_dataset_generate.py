"""The generation job end to end (python -m dataset.generate, python -m dataset.check) on a few
tiny programs: every row verified, replayable and true to its trace; byte-identical output
whatever the number of workers or the backend; a job killed with SIGKILL at random moments and
resumed gives exactly the uninterrupted output; bad sources are notes; every config loads with
``datasets``."""
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

from engine.leir.diagnostics import LeirError

from dataset.check import checker
from dataset.generate import driver
from lowering import measure as timing

PROGRAMS = {
    "softmax.leir": """program softmax
input  A f32[4, 16]
output C f32[4, 16]
B^{4}_{tx=0}L^{16}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];
B^{4}_{tx=0}L^{16}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];
B^{4}_{tx=0}L^{16}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];
""",
    "matmul.leir": """program matmul
input  A f32[8, 8]
input  C f32[8, 8]
output D f32[8, 8]
B^{8}_{tx=0}L^{8}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];
""",
    "hinge.leir": """program hinge
input  A f32[16, 2]
input  C f32[16, 2]
output E f32[16, 2]
B^{16}_{tx=0}L^{2}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*C^{f32,g}_{tx,a};];
B^{16}_{tx=0}L^{2}_{a=0}[E^{f32,g}_{tx,a}=max(1-D^{f32,g}_{tx,a},0);];
""",
    "broken.leir": "program broken\ninput A f32[4]\noutput C f32[4]\nL^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a]\n",
}
JSONL = [
    {"name": "sigmoid", "inputs": [{"name": "A", "dtype": "f32", "shape": [4, 8]}],
     "outputs": [{"name": "C", "dtype": "f32", "shape": [4, 8]}],
     "leir": "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=1/(1+exp(-A^{f32,g}_{tx,a}));];"},
    {"name": "bad", "inputs": [], "outputs": [{"name": "C", "dtype": "f32", "shape": [4]}],
     "leir": "L^{4}_{a=0}[C^{f32,g}_{a}=Q^{f32,g}_{a};];"},
]
ARGS = ["--per-program", "4", "--seed", "3", "--test-fraction", "0.3", "--timeout", "120"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sources")
    for name, text in PROGRAMS.items():
        (d / name).write_text(text)
    (d / "more.jsonl").write_text("".join(json.dumps(r) + "\n" for r in JSONL))
    return d


def run_generate(sources: Path, out: Path, *extra: str) -> None:
    assert driver.main([str(sources), "-o", str(out), *ARGS, *extra]) == 0


REFERENCE_SECONDS: list[float] = []


@pytest.fixture(scope="module")
def reference(sources, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reference")
    t0 = time.perf_counter()
    run_generate(sources, out, "--workers", "1")
    REFERENCE_SECONDS.append(time.perf_counter() - t0)
    return out


def outputs(out: Path) -> dict[str, bytes]:
    """Every output file's bytes; stats.json without its measured throughput section."""
    files = {}
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out)
        if p.is_file() and rel.parts[0] != ".journal":
            data = p.read_bytes()
            if rel.name == "stats.json":
                stats = json.loads(data)
                stats.pop("throughput")
                data = json.dumps(stats, sort_keys=True).encode()
            files[str(rel)] = data
    return files


def lines(out: Path, name: str) -> list[dict]:
    """A file's records; a training file's from its split files, train then test."""
    from dataset.assembly.file_schema import SPLIT_FILES
    paths = [out / s / name for s in ("train", "test")] if name in SPLIT_FILES else [out / name]
    return [json.loads(l) for p in paths for l in p.read_text().splitlines()]


def test_rows_are_verified_and_the_checker_agrees(reference):
    rows = lines(reference, "rows.jsonl")
    assert len(rows) >= 12
    assert {r["program"]["name"] for r in rows} == {"softmax", "matmul", "hinge", "sigmoid"}
    assert all(r["verification"]["equal"] and len(r["verification"]["trials"]) == 3 for r in rows)
    assert all(r["verification"]["tolerance"]["mode"] == ("exact" if r["step"]["exactness"] == "bitwise"
                                                          else "strict") for r in rows)
    per_program = {}
    for r in rows:
        per_program.setdefault(r["program"]["name"], set()).add(r["step"]["strategy"])
    assert all(len(s) >= 3 for s in per_program.values())            # the sample is spread over strategies
    assert {r["split"] for r in rows} == {"train", "test"}
    from engine.rewrite.rulebook import load_rulebook
    assert all(r["rules"] == load_rulebook().manifest() for r in rows)      # the rule files, names and hashes
    assert json.loads((reference / "stats.json").read_text())["job"]["rules"] == rows[0]["rules"]
    report = checker.check(reference, sample=3, progress=False)
    assert report.problems == []
    assert report.counts["replayed"] == report.counts["traces"] == len(rows)
    assert report.counts["re-verified"] == 3


def test_bad_sources_are_notes_not_the_end_of_the_job(reference):
    notes = lines(reference, "skipped.jsonl")
    by_source = {n["source"].rsplit("/", 1)[-1]: n for n in notes}
    assert set(by_source) == {"broken.leir", "more.jsonl:2"}
    assert by_source["broken.leir"]["reason"] == "bad source"
    assert "broken.leir:4:" in by_source["broken.leir"]["message"]
    assert "more.jsonl:2:" in by_source["more.jsonl:2"]["message"]
    stats = json.loads((reference / "stats.json").read_text())
    assert stats["sources"]["skipped"] == {"bad source": 2}
    # the card's figures add up: every source is a program or left out with its reason
    src = stats["sources"]
    assert src["programs"] + sum(src["skipped"].values()) == src["tasks"] == 6
    assert f"programs: {src['programs']} of 6 sources (left out: 2 bad source)" in (reference / "README.md").read_text()


def test_a_source_that_does_not_exist_or_holds_no_program_is_exit_2(sources, tmp_path, capsys):
    from engine.leir.cli import run_cli
    assert run_cli(driver.main, [str(tmp_path / "nope.leir"), "-o", str(tmp_path / "o")]) == 2
    assert "nope.leir: error: no such file or folder" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    only_bad = tmp_path / "bad"
    only_bad.mkdir()
    (only_bad / "broken.leir").write_text(PROGRAMS["broken.leir"])
    assert run_cli(driver.main, [str(only_bad), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "error: no program to generate from: bad/broken.leir:4:" in err and not (tmp_path / "o").exists()


def test_a_folder_reads_only_program_files(tmp_path):
    """The quick start's `dataset.generate examples` reads the examples and the corpus's programs,
    not examples/corpus/reference_coverage.jsonl (records of strategies, not programs)."""
    from dataset.generate.program_sources import job_sources, resolve_sources
    specs, notes = resolve_sources([str(ROOT / "examples")], None, "default", "f32", 1, 0)
    assert notes == [] and len(specs) == 5 + 99
    assert not any("reference_coverage" in sp["source"] for sp in specs)
    assert all(sp["source"].startswith("examples/") for sp in specs)
    assert job_sources([str(ROOT / "examples")])[0]["name"] == "examples"


def test_check_refuses_a_dataset_without_rows_unless_told(tmp_path, capsys):
    from engine.leir.cli import run_cli
    src = tmp_path / "src"
    src.mkdir()
    (src / "matmul.leir").write_text(PROGRAMS["matmul.leir"])
    out = tmp_path / "out"
    assert driver.main([str(src), "-o", str(out), "--max-points", "2", "--no-plots"]) == 0   # too big: no row
    capsys.readouterr()
    assert run_cli(checker.main, [str(out), "--sample", "0"]) == 1
    printed = capsys.readouterr().out
    assert "rows.jsonl: no rows: the dataset is empty (0 program(s) of 1 source(s); left out: 1 too big" in printed
    assert "--allow-empty" in printed
    assert run_cli(checker.main, [str(out), "--sample", "0", "--allow-empty"]) == 0


def test_chat_files_and_stats(reference):
    single = lines(reference, "single.jsonl")
    assert single and all(c["messages"][0]["content"].startswith("Give the following IR of ") for c in single)
    for c in single:
        think, answer = c["messages"][1]["content"][7:].split("</think><answer>")
        label = json.loads(answer[:-len("</answer>")])
        assert set(label) == {"transformed_IR", "applied_strategies"} and think.startswith("The strategy ")
    multi = lines(reference, "multi.jsonl")
    assert multi
    for c in multi:
        label = json.loads(c["messages"][1]["content"].split("<answer>")[1][:-len("</answer>")])
        assert len(label) >= 2 and f"at least {len(label)} different" in c["messages"][0]["content"]
    stats = json.loads((reference / "stats.json").read_text())
    assert stats["rows"] == len(lines(reference, "rows.jsonl"))
    assert stats["bucket_mix"]["paper"] == {"difficult": 87.32, "medium": 12.17, "easy": 0.51}
    assert set(stats["filter"]) == {"single", "multi", "one_per_strategy"} and stats["throughput"]["verified_rows_per_worker_minute"] > 0
    assert stats["filter"]["one_per_strategy"] is False and stats["mix"] is None
    assert sorted(p.name for p in (reference / "plots").glob("*.png")) == \
        ["bucket_mix.png", "strategy_counts.png", "text_lengths.png"]


def test_every_config_loads_with_datasets(reference, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    datasets.disable_progress_bars()
    stats = json.loads((reference / "stats.json").read_text())
    for config, splits in stats["files"]["parquet"].items():
        ds = datasets.load_dataset(str(reference), config, cache_dir=str(tmp_path / "hf"))
        assert {k: len(v) for k, v in ds.items()} == splits
    for name in ("rows", "failures", "skipped", "train/single", "test/single", "train/multi", "test/multi",
                 "train/single_trl", "test/single_trl", "train/multi_trl", "test/multi_trl"):
        path = reference / f"{name}.jsonl"
        if path.stat().st_size:
            ds = datasets.load_dataset("json", data_files=str(path), cache_dir=str(tmp_path / "hf"))
            assert len(ds["train"]) == len(path.read_text().splitlines())


def test_sigkill_at_random_moments_then_resume_gives_the_uninterrupted_output(sources, reference, tmp_path):
    """Also the worker-count test: the killed and resumed job runs 2 workers, the reference 1.

    First kill: at a random moment within the reference run's duration (often before any task
    finished); second kill: a random moment after the journal holds a task (mid-job, some work
    committed, some in flight). Then the same command runs to the end."""
    rng = random.Random(11)
    cmd = [sys.executable, "-m", "dataset.generate", str(sources), "-o", str(tmp_path), *ARGS, "--workers", "2"]
    tasks = tmp_path / ".journal" / "tasks"
    kills = []
    for attempt in range(2):
        proc = subprocess.Popen(cmd, env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if attempt == 0:
            deadline = time.monotonic() + rng.uniform(0.2, 0.8) * REFERENCE_SECONDS[0]
        else:
            before = len(list(tasks.glob("*.json"))) if tasks.exists() else 0
            while proc.poll() is None and (len(list(tasks.glob("*.json"))) if tasks.exists() else 0) <= before:
                time.sleep(0.05)
            deadline = time.monotonic() + rng.uniform(0.0, 1.0)
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills.append(len(list(tasks.glob("*.json"))) if tasks.exists() else 0)
    assert kills, "the job finished before it could be killed"
    done = subprocess.run(cmd, env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert not list(tasks.glob(".*"))                       # no temporary journal file left behind
    assert outputs(tmp_path) == outputs(reference)


def test_a_tampered_dataset_fails_the_check(reference, tmp_path):
    import shutil
    out = tmp_path / "copy"
    shutil.copytree(reference, out)
    rows = lines(out, "rows.jsonl")
    i = next(k for k, r in enumerate(rows) if "a split by a factor of" in r["cot"] or "`" in r["cot"])
    rows[i]["cot"] = rows[i]["cot"].replace("`", "`X", 1)
    rows[i + 1]["transformed"] = rows[i]["transformed"]
    (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = subprocess.run([sys.executable, "-m", "dataset.check", str(out), "--sample", "0", "--json"], env=ENV,
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    whats = " | ".join(p["what"] for p in report["problems"])
    assert "chain-of-thought" in whats and "Engine.apply gives a different program" in whats
    assert "differ from rows.jsonl" in whats                # the Parquet copy no longer matches


def test_no_output_file_names_a_path_of_the_machine(sources, reference):
    """The sources were given by absolute path (pytest's temporary folder): no output file, the
    journal, Parquet copies and card included, holds it, /tmp or the home folder; a source is named
    relative to its argument, with the sha256 of its file."""
    import hashlib
    needles = [str(sources).encode(), b"/tmp/", str(Path.home()).rstrip("/").encode() + b"/"]
    files = [p for p in sorted(reference.rglob("*")) if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files) and any(".journal" in p.parts for p in files)
    for p in files:
        data = p.read_bytes()
        assert not [n for n in needles if n in data], p.relative_to(reference)
    rows = lines(reference, "rows.jsonl")
    for r in rows:
        name = r["origin"]["source"].split(":")[0]
        assert name.startswith(sources.name + "/"), name
        assert r["origin"]["sha256"] == hashlib.sha256((sources.parent / name).read_bytes()).hexdigest()
    job = json.loads((reference / "stats.json").read_text())["job"]
    assert [s["name"] for s in job["sources"]] == [sources.name] and len(job["sources"][0]["sha256"]) == 64
    assert {n["source"] for n in lines(reference, "skipped.jsonl")} == {f"{sources.name}/broken.leir",
                                                                        f"{sources.name}/more.jsonl:2"}


def test_chat_files_are_split_by_split_and_the_card_names_both(reference):
    import yaml
    from dataset.assembly.file_schema import SPLIT_FILES
    rows = {r["id"]: r for r in lines(reference, "rows.jsonl")}
    types = {}
    for name in ("single.jsonl", "multi.jsonl", "single_trl.jsonl", "multi_trl.jsonl"):
        assert name in SPLIT_FILES and not (reference / name).exists()
        for split in ("train", "test"):
            recs = [json.loads(l) for l in (reference / split / name).read_text().splitlines()]
            assert all(r["split"] == split for r in recs), (split, name)
            if name == "single.jsonl":
                assert recs
                types[split] = {rows[c["id"]]["program"]["name"] for c in recs}
    assert types["train"].isdisjoint(types["test"])
    text = (reference / "README.md").read_text()
    front = yaml.safe_load(text.split("---\n")[1])
    single = next(c for c in front["configs"] if c["config_name"] == "single")
    assert single["data_files"] == [{"split": "train", "path": "data/single/train.parquet"},
                                    {"split": "test", "path": "data/single/test.parquet"}]
    assert "`train/single.jsonl`" in text and "`step.params` is JSON text" in text


def test_chat_rows_carry_their_facts_and_promise_bitwise_outputs_only_when_verified_exactly(reference):
    rows = {r["id"]: r for r in lines(reference, "rows.jsonl")}
    seen = set()
    for c in lines(reference, "single.jsonl") + lines(reference, "single_trl.jsonl"):
        r = rows[c["id"]]
        assert (c["strategy"], c["bucket"], c["exactness"], c["numerical_risk"], c["speedup"], c["verdict"]) == \
            (r["step"]["strategy"], r["difficulty"]["bucket"], r["step"]["exactness"], r["numerical_risk"], None, None)
        prompt = (c.get("messages") or c.get("prompt"))[0]["content"]
        exact = r["step"]["exactness"] == "bitwise" and r["verification"]["tolerance"]["mode"] == "exact"
        assert ("(bitwise identical)" in prompt) == exact
        assert ("numerically equivalent within the stated tolerance" in prompt) == (not exact)
        seen.add(exact)
    assert seen == {True, False}
    for c in lines(reference, "multi.jsonl"):
        items = json.loads(c["messages"][1]["content"].split("<answer>")[1][:-len("</answer>")])
        assert c["strategy"] == [it["applied_strategies"][0] for it in items]
        assert len(c["bucket"]) == len(items) and c["numerical_risk"] == any(x != "bitwise" for x in c["exactness"])


def test_a_rows_step_is_step_to_json_and_engine_apply_takes_it_as_it_is(reference, tmp_path, capsys):
    from engine import Engine
    from engine.apply import main as apply_main
    from engine.leir.files import program_from_json
    rows = lines(reference, "rows.jsonl")
    r = next(r for r in rows if r["step"]["params"])
    assert isinstance(r["step"]["params"], dict) and r["step"]["leir"] == r["transformed"]
    steps = Engine(strategies="paper").enumerate(program_from_json(r["program"]))
    assert next(s for s in steps if s.key == r["step"]["key"]).to_json() == r["step"]
    (tmp_path / "step.json").write_text(json.dumps(r["step"]))
    (tmp_path / "program.json").write_text(json.dumps(r["program"]))
    capsys.readouterr()
    assert apply_main([str(tmp_path / "program.json"), "--step", str(tmp_path / "step.json")]) == 0
    assert capsys.readouterr().out.strip() == r["transformed"]


def test_the_paper_mix_and_one_per_strategy_from_the_journal(sources, reference, tmp_path, capsys):
    """Assembly options: the copied job's tasks are all in its journal, so only assembly runs."""
    import shutil

    from dataset.assembly.mix import MIXES, WITHIN
    out = tmp_path / "mixed"
    shutil.copytree(reference, out)
    capsys.readouterr()
    run_generate(sources, out, "--mix", "paper", "--one-per-strategy")
    assert "mix paper:" in capsys.readouterr().err
    assert (out / "rows.jsonl").read_bytes() == (reference / "rows.jsonl").read_bytes()     # the archive is whole
    stats = json.loads((out / "stats.json").read_text())
    assert stats["filter"]["one_per_strategy"] and stats["mix"]["name"] == "paper"
    assert set(stats["mix"]["splits"]) == {"train", "test"}
    for rep in stats["mix"]["splits"].values():
        assert rep["target"] == MIXES["paper"]
        far = [k for g in ("buckets", "kinds") for k, want in rep["target"][g].items()
               if abs(rep["achieved"][g][k] - want) > WITHIN]
        assert rep["within"] == (not far) and bool(rep["short"]) == bool(far)
    rows = {r["id"]: r for r in lines(out, "rows.jsonl")}
    single = lines(out, "single.jsonl")
    assert single and len(single) < len(lines(reference, "single.jsonl"))
    pairs = [(rows[c["id"]]["program"]["leir"], c["strategy"]) for c in single]
    assert len(pairs) == len(set(pairs))                           # one variant per (program, strategy)
    assert "## Mix" in (out / "README.md").read_text()
    assert checker.check(out, sample=0, progress=False).problems == []
    moved = (out / "test" / "single.jsonl").read_text().splitlines()[:1]      # a test row in the train file
    with open(out / "train" / "single.jsonl", "a") as f:
        f.write(moved[0] + "\n")
    whats = " | ".join(w for _, w in checker.check(out, sample=0, progress=False).problems)
    assert "row(s) of another split in the train file" in whats


def test_user_errors_exit_2_with_a_message(sources, reference, tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "dataset.generate", *args], env=ENV, cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    p = run(str(sources), "-o", str(tmp_path / "a"), "--per-program", "0")
    assert p.returncode == 2 and "--per-program must be positive" in p.stderr and "Traceback" not in p.stderr
    p = run(str(sources), "-o", str(tmp_path / "b"), "--strategies", "loop_splitt")
    assert p.returncode == 2 and "unknown strategy or strategy set 'loop_splitt'" in p.stderr
    p = run(str(sources), "-o", str(reference), *ARGS[:2], "--seed", "4")     # another job's folder
    assert p.returncode == 2 and "they differ in: seed" in p.stderr
    p = subprocess.run([sys.executable, "-m", "dataset.check", str(tmp_path)], env=ENV, cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "no generated dataset" in p.stderr


def test_time_labels_rows_with_interleaved_timings_that_check_rederives(sources, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "matmul.leir").write_text(PROGRAMS["matmul.leir"])
    out = tmp_path / "out"
    assert driver.main([str(src), "-o", str(out), "--per-program", "4", "--time", "--seed", "1", "--rounds", "6",
                          "--noise-floor", "0.05"]) == 0
    rows = lines(out, "rows.jsonl")
    machine = timing.machine_label("llvm")
    assert rows and all(r["timing"]["machine"] == machine and r["timing"]["target"] == "llvm" and
                        r["timing"]["rounds"] == 6 and len(r["timing"]["samples"]["candidate"]) == 6 and
                        r["timing"]["noise_floor"] == 0.05 and r["timing"]["confidence"] == 0.95 and
                        r["timing"]["verdict"] == timing.verdict_of(r["timing"]) for r in rows)
    assert not (out / "preferences.jsonl").exists()          # pairs are in split folders only
    for split in ("train", "test"):
        if (out / split / "preferences.jsonl").exists():
            for p in lines(out, f"{split}/preferences.jsonl"):
                assert p["split"] == split and (p["chosen_verdict"], p["rejected_verdict"]) in \
                    {("faster", "slower"), ("faster", "tie")} and p["chosen_speedup"] > p["rejected_speedup"]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["timing"]["machines"] == [{"target": "llvm", "machine": machine, "rows": len(rows)}]
    assert sum(stats["timing"]["verdicts"].values()) == len(rows)
    assert f"CPU {machine['cpu']}" in (out / "README.md").read_text()
    assert (out / "plots" / "speedups.png").exists()
    assert checker.check(out, sample=0, progress=False).problems == []
    # a tampered verdict, or a row timed on another machine, is found and located
    t = rows[1]["timing"]
    rows[1]["timing"] = {**t, "verdict": next(v for v in timing.VERDICTS if v != t["verdict"])}
    rows[2]["timing"] = {**rows[2]["timing"], "machine": {**machine, "cpu": "another CPU"}}
    (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    problems = checker.check(out, sample=0, progress=False).problems
    where = f"rows.jsonl:2 ({rows[1]['id']}, {rows[1]['step']['strategy']})"
    assert (where, f"timing verdict is {rows[1]['timing']['verdict']}, its samples give {t['verdict']}") in problems
    assert any(w == "rows.jsonl" and "timings of 2 machines or targets" in m for w, m in problems)


@pytest.mark.long
def test_one_statement_changes_are_timed_by_their_kernels_with_statement_builds(tmp_path):
    """With ``--statement-builds`` programs are verified as their slot kernels and a one-statement
    change is timed by its kernel (records of method ``statements``, re-derived by the checker); the
    default gives the same rows, every one built and timed whole, and its checker refuses a
    statement-level timing."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "softmax.leir").write_text(PROGRAMS["softmax.leir"])
    opts = ["--per-program", "4", "--time", "--seed", "1", "--rounds", "6",
            "--strategies", "loop_split,loop_reorder,online_softmax,operator_fusion"]
    out, whole = tmp_path / "out", tmp_path / "whole"
    assert driver.main([str(src), "-o", str(out), *opts, "--statement-builds"]) == 0
    assert driver.main([str(src), "-o", str(whole), *opts]) == 0
    rows, wrows = lines(out, "rows.jsonl"), lines(whole, "rows.jsonl")
    assert [r["id"] for r in rows] == [r["id"] for r in wrows]
    by = [r for r in rows if r["timing"] and r["timing"]["method"] == "statements"]
    assert by and all(timing.record_problems(r["timing"]) == [] and r["step"]["strategy"] != "online_softmax"
                      for r in by)
    stats, wstats = (json.loads((o / "stats.json").read_text()) for o in (out, whole))
    assert stats["builds"].get("composed", 0) > 0 and stats["timing"]["methods"]["statements"] == len(by)
    assert wstats["builds"] == {} and set(wstats["timing"]["methods"]) == {"sequential"}
    assert checker.check(out, sample=0, progress=False).problems == []
    assert checker.check(whole, sample=0, progress=False).problems == []
    k = next(i for i, r in enumerate(wrows) if r["timing"])
    wrows[k]["timing"] = by[0]["timing"]
    (whole / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in wrows))
    assert any("statement-level timing in a job run without --statement-builds" in m
               for _, m in checker.check(whole, sample=0, progress=False).problems)


def test_timing_options_need_time_and_enough_rounds(tmp_path):
    for extra, message in ((["--rounds", "10"], "--rounds sets how --time measures: use it with --time"),
                           (["--time", "--rounds", "5"], "--rounds 5 cannot give a 0.95 confidence interval"),
                           (["--time", "--confidence", "1"], "--confidence must be in [0.5, 1)")):
        with pytest.raises(LeirError, match=re.escape(message)):       # run_cli: "error: ...", exit 2
            driver.main([str(tmp_path), "-o", str(tmp_path / "o"), *extra])


@pytest.mark.long
def test_ray_backend_gives_the_local_output(sources, reference, tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    try:
        run_generate(sources, tmp_path, "--backend", "ray", "--workers", "2")
    finally:
        ray.shutdown()
    assert outputs(tmp_path) == outputs(reference)


KERNELBENCH = '''import torch
import torch.nn as nn

batch_size = 4
dim = 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''


@pytest.mark.long
def test_workloads_kernelbench_files_and_cuda_source(tmp_path):
    src = tmp_path / "kb"
    src.mkdir()
    (src / "scaled_relu.py").write_text(KERNELBENCH)
    (src / "broken.py").write_text("import torch\nclass Model(:\n")
    out = tmp_path / "out"
    assert driver.main([str(src), "--workloads", "Softsign", "--shapes", "test", "-o", str(out),
                          "--per-program", "2", "--target", "cuda"]) == 0
    rows = lines(out, "rows.jsonl")
    names = {r["program"]["name"] for r in rows}
    assert names == {"scaled_relu", "Softsign"}
    wl = next(r for r in rows if r["program"]["name"] == "Softsign")
    assert wl["origin"]["kind"] == "workload" and json.loads(wl["origin"]["shapes"]) == {"B": 4, "D": 64}
    assert all(r["tir"]["target"] == "cuda" and "__global__" in r["cuda"]["original"]
               and "__global__" in r["cuda"]["transformed"] for r in rows)
    assert all(r["verification"]["target"] == "llvm" for r in rows)         # no CUDA device here: the CPU
    notes = lines(out, "skipped.jsonl")
    assert [n["reason"] for n in notes] == ["bad source"] and "broken.py:2" in notes[0]["message"]
    assert checker.check(out, sample=0, progress=False).problems == []


def test_a_step_that_does_not_replay_is_a_failure_not_a_row(monkeypatch):
    """Engine.apply finds a step by (rule, site, params); a step it cannot find again (parameters
    that do not identify it) is a rule bug in failures.jsonl, not a row nobody could replay."""
    from dataset.generate.task import Runner
    from engine import Engine, parse_program
    program = parse_program(PROGRAMS["matmul.leir"], "matmul.leir")
    real = Engine.apply

    def apply(self, prog, step):
        got = real(self, prog, step)
        rule = step["rule"] if isinstance(step, dict) else step.rule
        return prog if rule.startswith("loop_unrolling") else got       # pretend unrolling replays wrongly
    monkeypatch.setattr(Engine, "apply", apply)
    runner = Runner({"seed": 0, "per_program": 6, "strategies": ["loop_unrolling", "loop_split"], "trials": 3,
                     "timeout": 120})
    try:
        res = runner.run({"index": 0, "source": "matmul.leir", "kind": "program", "program": program.to_json()})
    finally:
        runner.close()
    assert res["rows"] and all(r["step"]["strategy"] == "loop_split" for r in res["rows"])
    fails = res["failures"]
    assert fails and {f["stage"] for f in fails} == {"replay"} and all(f["verdict"] is None for f in fails)
    assert {f["step"]["strategy"] for f in fails} == {"loop_unrolling"}


def test_a_program_that_does_not_lower_is_skipped_with_its_reason(monkeypatch):
    from dataset.generate.task import Runner
    from engine import parse_program
    from lowering import Verdict, Verifier
    program = parse_program(PROGRAMS["matmul.leir"], "matmul.leir")
    monkeypatch.setattr(Verifier, "verify", lambda self, a, b, tolerance=None: Verdict(
        False, "build failed", "original: TVM could not build the program for llvm: (simulated)", "llvm"))
    runner = Runner({"seed": 0, "per_program": 2, "strategies": "paper", "trials": 3, "timeout": 60})
    try:
        res = runner.run({"index": 0, "source": "matmul.leir", "kind": "program", "program": program.to_json()})
    finally:
        runner.close()
    assert res["status"] == "skipped" and res["rows"] == [] and res["failures"] == []
    assert res["note"]["reason"] == "does not lower"
    assert res["note"]["message"].startswith("matmul: build failed: original: TVM could not build")
