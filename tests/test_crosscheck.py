"""``python -m lowering.crosscheck``: one line per program, a summary, exit 0 / 1 / 2; without a
GPU it says so and checks what it can (CUDA build, static checks, nvcc)."""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, cuda_device_present

DATA = ROOT / "tests" / "data" / "issue14"
SMALL = """program small_norm
input  A f32[4, 64]
output D f32[4, 64]
B^{4}_{tx=0}L^{64}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+A^{f32,g}_{tx,a}**2;];
B^{4}_{tx=0}L^{64}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}/sqrt(E^{f32,g}_{tx});];
"""
LOCAL_TWICE = """program local_twice
input  A f32[4, 8]
output C f32[4, 8]
B^{4}_{tx=0}L^{8}_{a=0}[Y^{f32,l}_{a}=A^{f32,g}_{tx,a};];
B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=Y^{f32,l}_{a};];
"""


def run(*args):
    return subprocess.run([sys.executable, "-m", "lowering.crosscheck", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)


def test_issue_programs_agree_or_check_without_a_device(tmp_path):
    small = tmp_path / "small.leir"
    small.write_text(SMALL)
    r = run(small, DATA / "mse_f16.leir", DATA / "scan_over_threads.leir", "--json", "--no-nvcc")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    names = [p["program"] for p in out["programs"]]
    assert names == ["small_norm", "MSELoss_f16", "scan"] and out["summary"]["agree"]
    scan = out["programs"][2]["targets"]["cuda"]
    assert scan["serialised"] == [[1, "tx", "threads of threadIdx.x would race on 'C'"]]
    if not cuda_device_present():
        assert {p["status"] for p in out["programs"]} == {"checked"}
        assert "no CUDA device" in out["note"]
        assert all(p["targets"]["cuda"]["ok"] and p["targets"]["llvm"]["ran"] for p in out["programs"])
    else:
        assert {p["status"] for p in out["programs"]} == {"equal"}


def test_lines_and_summary(tmp_path):
    small = tmp_path / "small.leir"
    small.write_text(SMALL)
    r = run(small)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[1].startswith("small_norm") and "llvm ran" in lines[1]
    if not cuda_device_present():
        from lowering.cudacc import nvcc_path
        assert lines[0].startswith("targets llvm, cuda; no CUDA device on this machine")
        assert ("compiled to a cubin for sm_90 by nvcc" in lines[0]) == (nvcc_path() is not None)
        assert "cuda built" in lines[1] and lines[-1] == "crosscheck: 1 program(s): 1 checked - no disagreement"


def test_a_program_cuda_refuses_is_a_disagreement(tmp_path):
    f = tmp_path / "local.leir"
    f.write_text(LOCAL_TWICE)
    r = run(f, "--no-nvcc")
    assert r.returncode == 1, r.stdout + r.stderr
    line = r.stdout.strip().splitlines()[1]
    assert line.startswith("local_twice") and "failed" in line and "cuda build failed" in line
    assert "local buffer 'Y' is used by top-level statements 1, 2" in line
    assert r.stdout.strip().endswith("1 failed - DISAGREEMENT")


@pytest.mark.parametrize("args,message", [
    (["missing.leir"], "missing.leir"),
    (["{small}", "--targets", "llvm,gpu"], "--targets: expected a comma-separated list of llvm, cuda"),
    (["{small}", "--targets", "llvm,llvm"], "names a target twice"),
    (["{bad}"], "bad.leir:3:"),
])
def test_bad_input_exits_2_without_traceback(tmp_path, args, message):
    small, bad = tmp_path / "small.leir", tmp_path / "bad.leir"
    small.write_text(SMALL)
    bad.write_text("input  A f32[4]\noutput C f32[4]\nB^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}+;];\n")
    r = run(*[a.format(small=small, bad=bad) for a in args])
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_worker_that_does_not_answer_is_that_programs_failure(tmp_path):
    small = tmp_path / "small.leir"
    small.write_text(SMALL)
    r = run(small, "--targets", "llvm", "--timeout", "0.01")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "llvm timeout failed" in r.stdout and "1 failed" in r.stdout


class _FakePool:
    """Answers of workers on a machine with a device: cuda's outputs are llvm's, perturbed."""

    def __init__(self, scale):
        self.scale = scale

    def call(self, target, kind, *args):
        from lowering.crosscheck import HANDLERS
        if kind == "static":
            return HANDLERS["static"](args[0], args[1], False, 0, 0)
        res = HANDLERS["run"](*args[:1], "llvm", *args[2:])
        if target == "cuda" and res["ok"]:
            res["outputs"] = [{k: v * self.scale for k, v in o.items()} for o in res["outputs"]]
        return res


@pytest.mark.parametrize("scale,status", [(1.0, "equal"), (1.0 + 1e-7, "equal"), (1.01, "different")])
def test_outputs_are_compared_at_strict_tolerance(scale, status, tvm):
    from engine.leir.files import parse_leir_file
    from lowering.crosscheck import check_program
    p = parse_leir_file(SMALL, "small.leir")
    r = check_program(_FakePool(np.float32(scale)), p, ["llvm", "cuda"], {"cuda": True}, "sm_90", 0, 2, 1 << 26)
    assert r.status == status and (r.agrees == (status == "equal"))
    if status == "different":
        assert r.message.startswith("cuda differs from llvm: trial 0 output D:") and r.max_rel_err > 5e-3


def test_programs_over_the_point_limit_are_skipped(tvm):
    from engine.leir.files import load_program
    from lowering.crosscheck import check_program
    r = check_program(None, load_program(DATA / "l2norm.leir"), ["llvm", "cuda"], {"cuda": False}, "sm_90", 0, 1,
                      1000)
    assert r.status == "skipped" and r.agrees and "524304 loop iterations, above --max-points 1000" == r.message


def test_cuda_tir_run_serially_on_llvm_is_what_llvm_computes(tvm):
    """The no-device check: the all-reduce, reordered and serialised loops and half precision
    of the CUDA lowering compute, thread after thread, what the llvm lowering computes."""
    from engine.leir.files import load_program
    from lowering.crosscheck import _emulate, compare_runs, serial_cuda_text
    from lowering.inputs import random_inputs
    from lowering.run import run_program
    assert serial_cuda_text('for tx in T.thread_binding(64, thread="threadIdx.x"):') == "for tx in range(64):"
    for name in ("triplet_margin_loss", "scan_over_threads", "maxpool1d_f16"):
        p = load_program(DATA / f"{name}.leir")
        llvm = [run_program(p, random_inputs(p, 0, t)) for t in range(2)]
        eq, _, _, where = compare_runs(p, llvm, _emulate(p, 0, 2))
        assert eq, (name, where)
