"""A task past its time limit is stopped and reported, and the job goes on (engine.plumbing.jobs);
dataset.generate names it 'time limit' in its notes."""
import time

from engine.plumbing.jobs import TIME_LIMIT, LocalBackend

TASKS = '''
import time


def run_task(options, spec):
    time.sleep(spec["sleep"])
    return {"done": spec["name"]}
'''


def test_a_task_past_its_limit_is_stopped_and_the_job_goes_on(tmp_path, monkeypatch):
    (tmp_path / "sleepy_tasks.py").write_text(TASKS)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    results = {}
    crashed = []
    be = LocalBackend(1, "sleepy_tasks", lambda spec, msg: crashed.append((spec["name"], msg)) or {"limit": msg},
                      task_timeout=3.0)
    tasks = [("a", {"name": "a", "sleep": 0}), ("b", {"name": "b", "sleep": 60}), ("c", {"name": "c", "sleep": 0})]
    t0 = time.monotonic()
    be.run(tasks, {}, lambda tid, r: results.__setitem__(tid, r))
    assert time.monotonic() - t0 < 40                  # b was stopped, not waited for (nor tried twice)
    assert results["a"] == {"done": "a"} and results["c"] == {"done": "c"}
    assert [c[0] for c in crashed] == ["b"] and crashed[0][1].startswith(TIME_LIMIT)
    assert "3 s" in crashed[0][1]


def test_dataset_generate_notes_a_program_past_its_limit():
    from dataset.generate.task_module import crashed_result
    spec = {"index": 3, "source": "progs.jsonl:4"}
    assert crashed_result(spec, f"{TIME_LIMIT}: still running after 5 s")["note"]["reason"] == TIME_LIMIT
    assert crashed_result(spec, "the worker was killed by SIGKILL")["note"]["reason"] == "worker crashed"
