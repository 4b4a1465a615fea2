"""``--threads N`` (issue 41, item 3): the thread count a search's candidates run on. A Verifier given
``threads`` starts its workers with ``TVM_NUM_THREADS=N`` and ``TVM_BIND_THREADS=0`` (TVM's pool then
has N threads, as the worker itself reports), its Measurer labels every timing record with N, and
``python -m search --threads N`` stores N in the trajectory's options and its timing records; N < 1
is refused (exit 2, no traceback), a shared verifier of another count is refused, an older
trajectory (no ``threads``) reads as None and keeps its run identity."""
from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from engine import parse_program
from engine.leir.diagnostics import LeirError
from lowering import Verifier
from lowering.measure import Measurer, Protocol, machine_key, machine_label
from lowering.measure.machine import cpu_threads

from conftest import EXAMPLES, ROOT

PARENT = parse_program("input A f32[64, 64]\noutput C f32[64, 64]\n"
                       "L^{64}_{a=0}L^{64}_{b=0}[C^{f32,g}_{a,b}=A^{f32,g}_{a,b}*2.0+1.0;];\n", name="scale")
CHILD = parse_program("input A f32[64, 64]\noutput C f32[64, 64]\n"           # the loops swapped
                      "L^{64}_{b=0}L^{64}_{a=0}[C^{f32,g}_{a,b}=A^{f32,g}_{a,b}*2.0+1.0;];\n", name="scale")


def test_machine_label_names_the_threads_given():
    assert machine_label("llvm", 3)["threads"] == 3
    assert machine_label("llvm")["threads"] == cpu_threads()
    assert machine_key({"target": "llvm", "machine": machine_label("llvm", 3)}).endswith(", 3 threads")


def test_verifier_refuses_a_bad_thread_count():
    for bad in (0, -2, 1.5, True):
        with pytest.raises(LeirError, match="threads must be a whole number at least 1"):
            Verifier(threads=bad)
    with pytest.raises(LeirError, match="threads needs isolate=True"):
        Verifier(threads=2, isolate=False)


def test_verifier_threads_is_the_count_its_programs_run_on(monkeypatch):
    monkeypatch.setenv("TVM_NUM_THREADS", "1")
    assert Verifier(threads=2).threads == 2
    assert Verifier().threads == 1                     # not given: the environment's
    monkeypatch.delenv("TVM_NUM_THREADS")
    assert Verifier().threads == cpu_threads()


def test_a_worker_runs_on_the_threads_given_and_none_keeps_the_environment(monkeypatch):
    """What the worker's own TVM reports: its thread pool's size and the environment it read."""
    monkeypatch.setenv("TVM_NUM_THREADS", "1")
    monkeypatch.delenv("TVM_BIND_THREADS", raising=False)
    with Verifier(threads=2, timeout=120) as v:
        assert v.thread_pool() == {"pool": 2, "TVM_NUM_THREADS": "2", "TVM_BIND_THREADS": "0"}
    with Verifier(timeout=120) as v:                   # None: the worker inherits this process's environment
        assert v.thread_pool() == {"pool": 1, "TVM_NUM_THREADS": "1", "TVM_BIND_THREADS": None}


def test_measurer_labels_its_records_with_the_verifiers_threads(monkeypatch):
    monkeypatch.setenv("TVM_NUM_THREADS", "1")
    # a stand-in without ``threads`` (as tests use): this process's count, as before
    assert Measurer(SimpleNamespace(target="llvm")).machine["threads"] == 1
    with Verifier(threads=2, timeout=120) as v:
        m = Measurer(v, Protocol(rounds=6, look_every=0, min_ms=0.05, best_of=1))
        assert m.machine["threads"] == 2
        rec = m.compare_one(PARENT, CHILD)             # a real paired timing in a worker of 2 threads
        assert rec is not None and rec["machine"]["threads"] == 2 and rec["rounds"] == 6
        assert machine_key(rec).endswith(", 2 threads")
        assert v.thread_pool()["pool"] == 2


def test_a_shared_verifier_of_another_thread_count_is_refused(monkeypatch):
    from search.candidate_eval import CandidateEvaluator
    monkeypatch.setenv("TVM_NUM_THREADS", "1")
    with pytest.raises(LeirError, match=r"runs programs on 2 thread\(s\), the search on 1 \(--threads\)"):
        CandidateEvaluator(PARENT, "llvm", verifier=Verifier(threads=2), threads=1)
    with pytest.raises(LeirError, match=r"on 2 thread\(s\), the search on 1 \(--threads not given"):
        CandidateEvaluator(PARENT, "llvm", verifier=Verifier(threads=2))
    ev = CandidateEvaluator(PARENT, "llvm", verifier=Verifier(threads=2), threads=2)
    assert ev.measurer.machine["threads"] == 2


def test_search_options_threads():
    from search.options import SearchOptions
    from search.run_database import run_id
    assert SearchOptions.from_json({}).threads is None                     # an older trajectory
    assert SearchOptions.from_json({"threads": 2}).validate().threads == 2
    for bad in (0, -1):
        with pytest.raises(LeirError, match=f"--threads must be a whole number at least 1, got {bad}"):
            SearchOptions(threads=bad).validate()
    # a run recorded before --threads existed keeps its identity; a thread count is part of it
    old = {k: v for k, v in SearchOptions().to_json().items() if k != "threads"}
    assert run_id({}, SearchOptions().to_json()) == run_id({}, old)
    assert run_id({}, SearchOptions(threads=1).to_json()) != run_id({}, old)
    # so does one from before builds were named (it timed the exact build); a fast run is another run
    older = {k: v for k, v in old.items() if k != "build"}
    assert run_id({}, SearchOptions(build="exact").to_json()) == run_id({}, older)
    assert run_id({}, SearchOptions().to_json()) != run_id({}, older)


def test_batch_workers_share_a_verifier_per_thread_count():
    from search import batch_worker
    from search.options import SearchOptions
    try:
        one, none = batch_worker._verifier(SearchOptions(threads=1)), batch_worker._verifier(SearchOptions())
        assert one is not none and one.threads == 1 and none.threads == cpu_threads()
        assert batch_worker._verifier(SearchOptions(threads=1)) is one
    finally:
        batch_worker.close()


def test_search_command_line_runs_on_the_threads_given(tmp_path):
    out = tmp_path / "t.json"
    p = subprocess.run([sys.executable, "-m", "search", str(EXAMPLES / "softmax.leir"), "-o", str(out),
                        "--algorithm", "greedy", "--policy", "random", "--budget", "1", "--threads", "1"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    record = json.loads(out.read_text())
    assert record["options"]["threads"] == 1
    labels = []

    def walk(x):
        if isinstance(x, dict):
            if isinstance(x.get("machine"), dict) and "cores" in x["machine"]:
                labels.append(x["machine"])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(record)
    assert all(m["threads"] == 1 for m in labels), labels


def test_search_command_line_refuses_threads_below_one(tmp_path):
    p = subprocess.run([sys.executable, "-m", "search", str(EXAMPLES / "softmax.leir"), "-o", str(tmp_path / "t.json"),
                        "--threads", "0"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "--threads must be a whole number at least 1, got 0" in p.stderr
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("env", [{}, {"TVM_NUM_THREADS": "1"}, {"OMP_NUM_THREADS": "1"}, {"TVM_NUM_THREADS": "64"}])
def test_the_label_says_the_threads_tvm_runs_when_not_told(monkeypatch, env):
    """``cpu_threads`` agrees with the pool a worker's own TVM sizes: on x86 with neither variable set,
    half the CPUs (TVM takes the other half for hyper-threads), never more than the CPUs."""
    for name in ("TVM_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with Verifier(timeout=120) as v:
        assert v.thread_pool()["pool"] == cpu_threads() == v.threads
