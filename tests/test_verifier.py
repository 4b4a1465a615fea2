"""lowering.Verifier as a long job uses it: verdicts and measurements as JSON, the exactness of a
rule choosing its tolerance, and a worker that hangs or dies giving a verdict instead of taking
the caller down or making it wait forever."""
import os
from pathlib import Path
import signal
import threading
import time

import pytest

from engine import Engine, load_program, parse_program
from conftest import EXAMPLES
from lowering import Measurement, Verdict, Verifier, tolerance_for


def _decl(name, shape, dtype="f32"):
    return {"name": name, "dtype": dtype, "shape": list(shape)}


def small(rhs="A^{f32,g}_{a}*2", name="s"):
    return parse_program(f"L^{{8}}_{{a=0}}[C^{{f32,g}}_{{a}}={rhs};];", name=name,
                         inputs=[_decl("A", [8])], outputs=[_decl("C", [8])])


def slow(order="c,d"):
    """A program that runs for minutes (6.4e10 multiply-adds)."""
    c, d = order.split(",")
    return parse_program(f"L^{{4000}}_{{a=0}}L^{{4000}}_{{c=0}}L^{{4000}}_{{d=0}}"
                         f"[C^{{f32,g}}_{{a}}=C^{{f32,g}}_{{a}}+A^{{f32,g}}_{{{c}}}*A^{{f32,g}}_{{{d}}};];",
                         inputs=[_decl("A", [4000])], outputs=[_decl("C", [4000])])


@pytest.fixture(scope="module")
def verifier():
    with Verifier(timeout=120) as v:
        yield v


def test_equal_and_not_equal_verdicts(verifier):
    v = verifier.verify(small(), small("A^{f32,g}_{a}+A^{f32,g}_{a}"))
    assert (v.equal, v.reason, v.build, v.exec) == (True, "equal", True, True)
    assert len(v.trials) == 3 and all(t["equal"] for t in v.trials)
    assert v.to_json()["tolerance"]["mode"] == "strict"
    w = verifier.verify(small(), small("A^{f32,g}_{a}*3"))
    assert (w.equal, w.reason) == (False, "not equal") and "outside the bound" in w.message
    assert Verdict.from_json(w.to_json()) == w


def test_invalid_inputs_and_build_failures_are_verdicts(verifier):
    other = parse_program("L^{8}_{a=0}[D^{f32,g}_{a}=A^{f32,g}_{a};];", inputs=[_decl("A", [8])],
                          outputs=[_decl("D", [8])])
    v = verifier.verify(small(), other)
    assert (v.equal, v.reason) == (False, "invalid input") and "same known tensors" in v.message


def test_exactness_decides_the_tolerance(verifier):
    assert tolerance_for("bitwise") == "exact" and tolerance_for("reassociating") == "strict"
    p = load_program(EXAMPLES / "softmax.leir")
    steps = Engine(strategies=["loop_split", "online_softmax"]).enumerate(p)
    split = next(s for s in steps if s.strategy == "loop_split")
    online = next(s for s in steps if s.strategy == "online_softmax")
    a, b = verifier.verify_step(p, split), verifier.verify_step(p, online)
    assert a.equal and a.tolerance["mode"] == "exact"
    assert b.equal and b.tolerance["mode"] == "strict"


def test_measure_reports_median_and_spread(verifier):
    m = verifier.measure(small())
    assert m.ok and m.reason == "measured" and len(m.times_ms) == 5
    assert m.min_ms <= m.median_ms and m.spread_ms >= 0
    assert Measurement.from_json(m.to_json()) == m


def test_a_hang_becomes_a_timeout_verdict_soon_after_the_deadline():
    with Verifier(timeout=2) as v:
        v.verify(small(), small())                     # the worker is up: start-up is not part of a timeout
        t0 = time.perf_counter()
        verdict = v.verify(slow(), slow("d,c"))
        took = time.perf_counter() - t0
        assert (verdict.equal, verdict.reason) == (False, "timeout")
        assert 2 <= took < 12, took
        assert v.verify(small(), small()).equal        # a fresh worker takes over
        m = v.measure(slow())
        assert (m.ok, m.reason) == (False, "timeout")


def test_a_worker_killed_by_a_signal_becomes_a_crashed_verdict():
    with Verifier(timeout=120) as v:
        assert v.verify(small(), small()).equal
        pid = v._idle[0].proc.pid
        threading.Timer(2.0, lambda: os.kill(pid, signal.SIGKILL)).start()
        verdict = v.verify(slow(), slow("d,c"))
        assert (verdict.equal, verdict.reason) == (False, "crashed") and "SIGKILL" in verdict.message
        assert v.verify(small(), small()).equal
        assert v.counts == {"equal": 2, "crashed": 1}


def test_in_process_verifier_gives_the_same_verdicts():
    v = Verifier(isolate=False)
    a = v.verify(small(), small("A^{f32,g}_{a}+A^{f32,g}_{a}"))
    assert a.equal and a.reason == "equal"
    with pytest.raises(ValueError, match="needs isolate=True"):
        Verifier(isolate=False, timeout=1)


def test_a_worker_dies_with_its_caller(tmp_path):
    """kill -9 of the process that owns a Verifier ends its busy worker too (within seconds)."""
    import subprocess
    import sys
    script = tmp_path / "owner.py"
    script.write_text(
        "import sys, time\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from test_verifier import slow, small\n"
        "from lowering import Verifier\n"
        "v = Verifier()\n"
        "v.verify(small(), small())\n"
        "print(v._idle[0].proc.pid, flush=True)\n"
        "v.verify(slow(), slow('d,c'))\n")
    owner = subprocess.Popen([sys.executable, str(script), str(Path(__file__).parent)], stdout=subprocess.PIPE,
                             text=True)
    worker = int(owner.stdout.readline())
    time.sleep(1.0)
    owner.kill()
    owner.wait()
    deadline = time.time() + 10
    while time.time() < deadline and _alive(worker):
        time.sleep(0.2)
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
