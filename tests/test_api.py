"""The public API (engine.Engine, Step, the readers) and `python -m engine.apply`, as a user
drives them: named strategy sets, step records, exact replay, clear errors for steps that do not
apply, parallel listing, statistics, and the README's example run as written."""
import json
import re
import subprocess
import sys

import pytest

import engine
from conftest import EXAMPLES, ROOT
from engine import Engine, LeirError, Step, StepError, load_program, load_programs, parse_program

SOFTMAX = EXAMPLES / "softmax.leir"


def run(*args, **kw):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def eng():
    return Engine()


@pytest.fixture(scope="module")
def softmax():
    return load_program(SOFTMAX)


@pytest.fixture(scope="module")
def steps(eng, softmax):
    return eng.enumerate(softmax)


def test_the_face_is_lazy_and_complete():
    code = ("import sys, engine, lowering; assert 'egglog' not in sys.modules and 'tvm' not in sys.modules; "
            "engine.load_program; assert 'egglog' not in sys.modules; print(sorted(engine.__all__))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for name in ("Engine", "Step", "StepError", "LeirError", "Program", "load_program", "load_programs",
                 "parse_program", "renaming_key"):
        assert name in engine.__all__ and getattr(engine, name) is not None
    with pytest.raises(AttributeError):
        _ = engine.nothing_here


def test_readme_api_example_runs_as_written(tmp_path):
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"## Python API.*?```python\n(.*?)```", readme, re.S)
    assert m, "the README has a '## Python API' section with a python example"
    script = tmp_path / "example.py"
    script.write_text(m.group(1))
    r = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def test_named_strategy_sets():
    book_all = Engine().strategies
    assert len(book_all) == 46 and {"dead_code_elimination", "reduction_vectorization", "register_blocking"} <= set(book_all)
    paper = Engine(strategies="paper").strategies
    assert len(paper) == 43 and "dead_code_elimination" not in paper
    assert set(Engine(strategies="memory").strategies) == {
        "cache_read_write", "layout_transformation", "set_storage_scope", "set_storage_layout", "precompute_indices"}
    assert Engine(strategies=["loop_split", "graph"]).strategies[-1] == "loop_split"
    with pytest.raises(LeirError, match="unknown strategy or strategy set 'nope'"):
        Engine(strategies="nope")


def test_bitwise_set_lists_only_exact_rules(softmax):
    bw = Engine(strategies="bitwise").enumerate(softmax)
    everything = Engine().enumerate(softmax)
    assert bw and all(s.exactness == "bitwise" for s in bw)
    assert len(bw) < len(everything)
    assert {s.key for s in bw} == {s.key for s in everything if s.exactness == "bitwise"}


def test_steps_are_frozen_records_that_round_trip(steps, softmax):
    s = steps[0]
    with pytest.raises(AttributeError):          # dataclasses.FrozenInstanceError
        s.rule = "x"
    with pytest.raises(TypeError):
        s.params["x"] = 1
    rec = s.to_json()
    assert {"strategy", "category", "rule", "site", "params", "exactness", "key", "leir"} <= set(rec)
    back = Step.from_json(json.loads(json.dumps(rec)), base=softmax)
    assert back == s and back.key == s.key and back.leir == s.leir
    assert back.program.to_leir() == s.program.to_leir()
    assert len(s.key) == 16 and all(c in "0123456789abcdef" for c in s.key)


def test_apply_replays_every_listed_step_byte_for_byte(eng, softmax, steps):
    for s in steps:
        assert eng.apply(softmax, s).to_leir() == s.leir
        assert eng.apply(softmax, s.to_json()).to_leir() == s.leir


def test_apply_says_what_did_not_match(eng, softmax, steps):
    split = next(s for s in steps if s.rule == "loop_split")
    with pytest.raises(StepError, match=r"rule 'loop_split' at site \[9\] does not apply: the rule matches at site"):
        eng.apply(softmax, {"rule": "loop_split", "site": [9], "params": {}})
    bad = dict(split.choice, factor=3)
    with pytest.raises(StepError, match="does not apply with parameters .*factor=3"):
        eng.apply(softmax, {"rule": "loop_split", "site": list(split.site), "params": bad})
    with pytest.raises(StepError, match="no strategy has a rule named 'nonsense'"):
        eng.apply(softmax, {"rule": "nonsense", "site": [0]})
    with pytest.raises(LeirError, match="'site' must be a list"):
        eng.apply(softmax, {"rule": "loop_split", "site": "0"})
    op = Engine(strategies="operator")
    with pytest.raises(StepError, match="which this engine does not load"):
        op.apply(softmax, next(s for s in steps if s.category == "math"))


def test_replay_of_a_trajectory(eng, softmax):
    first = next(s for s in eng.enumerate(softmax) if s.strategy == "loop_split")
    second = next(s for s in eng.enumerate(first.program) if s.strategy == "loop_unrolling")
    out = eng.replay(softmax, [first.to_json(), second])
    assert [p.to_leir() for p in out] == [first.leir, second.leir]
    with pytest.raises(StepError, match="step 2"):
        eng.replay(softmax, [first, first])


def test_enumerate_many_is_the_same_in_worker_processes(eng):
    progs = load_programs(EXAMPLES)
    one = eng.enumerate_many(progs[:3])
    two = eng.enumerate_many(progs[:3], workers=2)
    assert [[s.to_json() for s in a] for a in one] == [[s.to_json() for s in b] for b in two]
    assert two[1][0].program.to_leir() == one[1][0].leir


def test_stats_count_what_the_rules_did(softmax):
    e = Engine(strategies=["loop_split", "loop_unrolling"])
    got = e.enumerate(softmax)
    st = e.stats()
    assert st["programs"] == 1 and st["steps"] == len(got) and st["invalid"] == []
    assert st["rules"]["loop_split"]["steps"] == sum(s.rule == "loop_split" for s in got)
    assert st["rules"]["loop_split"]["matches"] >= st["rules"]["loop_split"]["steps"]
    assert st["rules"]["loop_split"]["programs"] == 1
    assert st["phase_seconds"]["step"] > 0


def test_parse_program_reads_every_form(softmax):
    text = SOFTMAX.read_text()
    assert parse_program(text).to_leir() == softmax.to_leir()
    assert parse_program(json.dumps(softmax.to_json())).to_leir() == softmax.to_leir()
    outputs = [{"name": d.name, "dtype": d.dtype, "shape": list(d.shape)} for d in softmax.outputs]
    body = parse_program(softmax.to_leir(), name="s", inputs=softmax.inputs, outputs=outputs)
    assert body.to_leir() == softmax.to_leir() and body.name == "s"
    with pytest.raises(LeirError, match=r"<input>:1:\d+: error"):
        parse_program("B^{4}_{tx=0}[C^{f32,g}_{tx}=;];", inputs=[], outputs=[{"name": "C", "dtype": "f32", "shape": [4]}])


def test_load_programs_of_a_folder():
    progs = load_programs(EXAMPLES)
    assert [p.name for p in progs] == [f.stem for f in sorted(EXAMPLES.glob("*.leir"))]
    with pytest.raises(LeirError, match="no program files"):
        load_programs(ROOT / "rules")


# --------------------------------------------------------------------------- python -m engine.apply


def test_apply_cli_one_step_and_a_trajectory(tmp_path, eng, softmax, steps):
    split = next(s for s in steps if s.rule == "loop_split")
    (tmp_path / "step.json").write_text(json.dumps(split.to_json()))
    r = run("engine.apply", str(SOFTMAX), "--step", str(tmp_path / "step.json"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == split.leir
    second = next(s for s in eng.enumerate(split.program) if s.rule == "loop_unrolling")
    (tmp_path / "traj.jsonl").write_text(json.dumps(split.to_json()) + "\n" + json.dumps(second.to_json()) + "\n")
    r = run("engine.apply", str(SOFTMAX), "--steps", str(tmp_path / "traj.jsonl"), "--json",
            "-o", str(tmp_path / "out.leir"))
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["leir"] == second.leir and rec["key"] == second.key
    assert load_program(tmp_path / "out.leir").to_leir() == second.leir


def test_apply_cli_step_that_does_not_apply_is_a_located_error(tmp_path):
    (tmp_path / "traj.jsonl").write_text(
        '{"rule": "loop_split", "site": [0], "params": {"loop": "a", "factor": 2, "outer": 512}}\n'
        '{"rule": "loop_split", "site": [7], "params": {}}\n')
    r = run("engine.apply", str(SOFTMAX), "--steps", str(tmp_path / "traj.jsonl"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert re.match(r".*traj\.jsonl:2:1: error: rule 'loop_split' at site \[7\] does not apply", r.stderr)
    (tmp_path / "bad.json").write_text("{not json")
    r = run("engine.apply", str(SOFTMAX), "--step", str(tmp_path / "bad.json"))
    assert r.returncode == 2 and "bad.json:1:2: error: invalid JSON" in r.stderr


def test_apply_cli_reads_hostile_step_files_cleanly(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 5000 + "]" * 5000)
    (tmp_path / "huge.jsonl").write_text('{"rule": "loop_split", "site": [' + "9" * 5000 + '], "params": {}}\n')
    for name, flag in (("deep.json", "--step"), ("huge.jsonl", "--steps")):
        r = run("engine.apply", str(SOFTMAX), flag, str(tmp_path / name))
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert f"{name}:1:" in r.stderr and ": error: " in r.stderr
