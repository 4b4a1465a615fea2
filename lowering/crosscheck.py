"""``python -m lowering.crosscheck FILES... [--targets llvm,cuda] [--json]``: does a program
compute the same thing on every target?

Each program is built and run on every target named, on the same seeded inputs
(``lowering.inputs``, ``--trials`` of them), and each target's outputs are compared with the
first target's under the strict tolerance (``lowering.verify``). One line per program, then a
summary; exit status 0 when every program agrees, 1 on any disagreement or failure, 2 on bad
input. Builds and runs happen in worker processes (``engine.plumbing.procs``), one per target: a
crash or a hang past ``--timeout`` is that program's failure, never the end of the run.

Without a CUDA device, cuda cannot run: the run says so and checks what it can for each
program: the CUDA build, the static checks of the generated code (``lowering.kernelcheck``),
with nvcc on PATH compiling the CUDA source to a cubin for ``--arch`` (which runs ptxas), and
the CUDA TIR run with its threads one after the other on llvm, compared with llvm (the
kernels' arithmetic, all-reduces and half-precision handling, without the concurrency the
static checks cover).
The static checks and the nvcc compile are also done when a device exists; a finding is a
failure. Programs with more than ``--max-points`` loop iterations in total are skipped.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Optional

from engine.leir.diagnostics import LeirError

DEFAULT_MAX_POINTS = 1 << 26
STATUSES = ("equal", "different", "failed", "static check failed", "checked", "skipped")


# --------------------------------------------------------------------------- worker side


def _device() -> dict:
    """This machine's CUDA device, as the worker process sees it."""
    import tvm
    dev = tvm.cuda(0)
    if not tvm.runtime.enabled("cuda") or not dev.exist:
        return {"cuda": False}
    major, _, minor = str(dev.compute_version).partition(".")
    return {"cuda": True, "name": str(dev.device_name), "arch": f"sm_{major}{minor}"}


def _run(program: dict, target: str, arch: str, seed: int, trials: int) -> dict:
    """Build and run one program: its outputs per trial, or what failed."""
    from engine.leir.files import program_from_json

    from .errors import LoweringError
    from .inputs import random_inputs
    from .run import build, run_built
    p = program_from_json(program)
    t0 = time.perf_counter()
    try:
        built = build(p, target, arch)
    except LoweringError as e:
        return {"ok": False, "stage": "build", "message": e.message}
    outs = []
    for t in range(trials):
        try:
            outs.append(run_built(built, p, random_inputs(p, seed, t)))
        except LoweringError as e:
            return {"ok": False, "stage": "exec", "message": e.message}
    return {"ok": True, "outputs": outs, "seconds": time.perf_counter() - t0,
            "serialised": [list(x) for x in built.notes]}


_BINDING = re.compile(r'T\.thread_binding\((\d+), thread="[a-zA-Z]+\.[xyz]"\)')


def serial_cuda_text(text: str) -> str:
    """The CUDA TVMScript with every thread and block binding made a serial loop: what the
    kernels compute when their threads run one after the other (lowering.md 9.5)."""
    return _BINDING.sub(r"range(\1)", text)


def _emulate(p, seed: int, trials: int):
    """Outputs of ``p``'s CUDA TIR run serially on llvm, per trial."""
    from .inputs import random_inputs
    from .run import Built, compile_tir, run_built
    from .tir import from_tvmscript, lower_module
    low = lower_module(p, "cuda")
    ex = compile_tir(from_tvmscript(serial_cuda_text(low.text)), "llvm")
    built = Built(low.text, ex, "llvm", True, low.scratch, low.notes)
    return [run_built(built, p, random_inputs(p, seed, t)) for t in range(trials)]


def _static(program: dict, arch: str, compile_source: bool, seed: int = 0, trials: int = 0) -> dict:
    """CUDA build, static checks of the generated code and (optionally) an nvcc compile."""
    from engine.leir.files import program_from_json

    import tvm

    from .cudacc import compile_offline, cuda_target, nvcc_path
    from .errors import LoweringError
    from .kernelcheck import check_module, pipeline_module
    from .tir import first_line, lower_module, pass_config, prim_func
    p = program_from_json(program)
    t0 = time.perf_counter()
    try:
        low = lower_module(p, "cuda")
        f = prim_func(low)
        try:
            with tvm.transform.PassContext(config=pass_config("cuda")):
                mod = tvm.tirx.build(f, target=cuda_target(arch))
        except Exception as e:
            raise LoweringError(f"TVM could not build the program for cuda: {first_line(e)}", stage="build") from None
        findings = [str(x) for x in check_module(pipeline_module(f, arch))]
    except LoweringError as e:
        return {"ok": False, "stage": "build", "message": e.message}
    res = {"ok": True, "findings": findings, "serialised": [list(x) for x in low.notes], "compiled": None}
    if compile_source and nvcc_path() is not None:
        try:
            compile_offline(mod.imports[0].inspect_source(), arch, "cubin")
            res["compiled"] = True
        except LoweringError as e:
            res.update(ok=False, stage="nvcc", message=e.message, compiled=False)
    if trials and res["ok"]:
        try:
            res["emulated"] = _emulate(p, seed, trials)
        except LoweringError as e:
            res.update(ok=False, stage="emulation", message=e.message)
    res["seconds"] = time.perf_counter() - t0
    return res


HANDLERS = {"device": _device, "run": _run, "static": _static}


# --------------------------------------------------------------------------- one program


@dataclass
class Result:
    """What crosscheck found for one program."""

    program: str
    status: str                       # one of STATUSES
    points: int = 0
    message: Optional[str] = None
    targets: dict = field(default_factory=dict)   # target -> {ok, stage, message, seconds, ...}
    max_abs_err: Optional[float] = None
    max_rel_err: Optional[float] = None

    @property
    def agrees(self) -> bool:
        return self.status in ("equal", "checked", "skipped")

    def line(self) -> str:
        head = f"{self.program:<44} {self.status:<20}"
        parts = []
        for t, r in self.targets.items():
            if r.get("ok"):
                extra = f" {r['seconds']:.2f}s" if "seconds" in r else ""
                what = "ran" if "outputs" in r or r.get("ran") else "built"
                parts.append(f"{t} {what}{extra}")
            else:
                parts.append(f"{t} {r.get('stage', 'failed')} failed")
        if self.max_abs_err is not None:
            parts.append(f"max abs err {self.max_abs_err:.3g}, rel {self.max_rel_err:.3g}")
        if self.message:
            parts.append(self.message)
        return head + " " + "; ".join(parts)

    def to_json(self) -> dict:
        d = asdict(self)
        d["agrees"] = self.agrees
        return json.loads(json.dumps(d, default=str))


def points(program) -> int:
    """Total loop iterations of a program (every equation's iteration space)."""
    return sum(math.prod(l.extent for l in ei.loops) for ei in program.info.equations)


def compare_runs(program, reference: list, other: list) -> tuple[bool, float, float, str]:
    """(equal, max abs err, max rel err, worst output) of two targets' outputs per trial."""
    from .verify import compare, reduction_length
    n = reduction_length(program)
    equal, worst_abs, worst_rel, where = True, 0.0, 0.0, ""
    for t, (a, b) in enumerate(zip(reference, other)):
        for d in program.outputs:
            c = compare(b[d.name], a[d.name], d.dtype, n, "strict")
            if not c.equal and equal:
                where = f"trial {t} output {d.name}: {c.mismatches} element(s) outside the bound"
            equal &= c.equal
            worst_abs, worst_rel = max(worst_abs, c.max_abs_err), max(worst_rel, c.max_rel_err)
    return equal, worst_abs, worst_rel, where


# --------------------------------------------------------------------------- the run


class _Pool:
    """One worker process per target, replaced after a crash or a timeout."""

    def __init__(self, timeout: Optional[float], log=None):
        self.timeout, self.log = timeout, log
        self.workers: dict = {}

    def call(self, target: str, kind: str, *args):
        from engine.plumbing.procs import WorkerFailed, WorkerProcess
        w = self.workers.get(target)
        if w is None or not w.alive():
            w = self.workers[target] = WorkerProcess("lowering.tvm_worker", (0, 16), stderr=self.log)
        try:
            status, payload = w.call((kind, args), self.timeout)
        except WorkerFailed as e:
            self.workers.pop(target, None)
            return {"ok": False, "stage": e.reason, "message": e.message}
        if status != "ok":
            return {"ok": False, "stage": "crashed", "message": str(payload)}
        return payload

    def close(self):
        for w in self.workers.values():
            w.kill()
        self.workers.clear()


def check_program(pool: _Pool, program, targets: list[str], device: dict, arch: str, seed: int,
                  trials: int, max_points: int, compile_source: bool = True) -> Result:
    n = points(program)
    res = Result(program.name, "equal", n)
    if n > max_points:
        res.status, res.message = "skipped", f"{n} loop iterations, above --max-points {max_points}"
        return res
    record = program.to_json()
    answers: dict = {}
    static = {}

    def work(t):   # one worker per target, the targets at once
        if t != "cuda" or device.get("cuda"):
            answers[t] = pool.call(t, "run", record, t, arch, seed, trials)
        if t == "cuda":   # without a device, cuda's TIR also runs serially on llvm
            emulate = trials if not device.get("cuda") and "llvm" in targets else 0
            static.update(pool.call(t, "static", record, arch, compile_source, seed, emulate))
    threads = [threading.Thread(target=work, args=(t,)) for t in targets]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in targets:
        if t in answers:
            r = dict(answers[t])
            r.pop("outputs", None)
            if answers[t].get("ok"):
                r["ran"] = True
            res.targets[t] = r
        elif t == "cuda":
            res.targets[t] = {k: v for k, v in static.items() if k not in ("findings", "emulated")}
    failed = [t for t in targets if not res.targets[t].get("ok")]
    if failed:
        res.status = "failed"
        bad = res.targets[failed[0]]
        res.message = f"{failed[0]}: {bad.get('message')}"
        return res
    if static and not static.get("ok") and "cuda" in answers:
        res.status, res.message = "static check failed", f"cuda {static.get('stage')}: {static.get('message')}"
        return res
    if static.get("ok") and static["findings"]:
        res.status = "static check failed"
        res.message = "; ".join(static["findings"][:3])
        return res
    ran = [t for t in targets if t in answers]
    if "emulated" in static and "llvm" in answers:
        eq, a, r, where = compare_runs(program, answers["llvm"]["outputs"], static["emulated"])
        res.max_abs_err, res.max_rel_err = a, r
        if not eq:
            res.status = "different"
            res.message = f"cuda's TIR run serially on llvm differs from llvm: {where}"
            return res
    if len(ran) < 2:
        res.status = "checked" if "cuda" in targets and not device.get("cuda") else "equal"
        if res.status == "equal" and len(targets) == 1:
            res.status = "checked"
        return res
    ref = answers[ran[0]]["outputs"]
    worst_abs = worst_rel = 0.0
    for t in ran[1:]:
        eq, a, r, where = compare_runs(program, ref, answers[t]["outputs"])
        worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, r)
        if not eq:
            res.status = "different"
            res.message = f"{t} differs from {ran[0]}: {where}"
    res.max_abs_err, res.max_rel_err = worst_abs, worst_rel
    return res


def summary(results: list[Result]) -> dict:
    counts = {s: sum(r.status == s for r in results) for s in STATUSES}
    return {"programs": len(results), **counts, "agree": all(r.agrees for r in results)}


def _targets(text: str) -> list[str]:
    from .tir import TARGETS
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in names if t not in TARGETS]
    if bad or not names:
        raise LeirError(f"--targets: expected a comma-separated list of {', '.join(TARGETS)}, got '{text}'")
    if len(set(names)) != len(names):
        raise LeirError(f"--targets: '{text}' names a target twice")
    return names


def main(argv=None) -> int:
    from engine.leir.cli import run_cli

    def _main(argv):
        ap = argparse.ArgumentParser(prog="python -m lowering.crosscheck",
                                     description="Build and run programs on several targets and compare their outputs.")
        ap.add_argument("files", nargs="+", help=".leir, .json or .jsonl files (or folders of them)")
        ap.add_argument("--targets", default="llvm,cuda", help="comma-separated targets; the first is the "
                                                               "reference (default llvm,cuda)")
        ap.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
        ap.add_argument("--trials", type=int, default=1, help="seeded input sets per program (default 1)")
        ap.add_argument("--seed", type=int, default=0)
        ap.add_argument("--arch", help="CUDA architecture (default: the device's, else sm_90)")
        ap.add_argument("--timeout", type=float, default=600.0, help="seconds per program and target")
        ap.add_argument("--max-points", type=int, default=DEFAULT_MAX_POINTS,
                        help=f"skip programs with more loop iterations (default {DEFAULT_MAX_POINTS})")
        ap.add_argument("--log", help="append the workers' diagnostics (TVM warnings) to this file")
        ap.add_argument("--no-nvcc", action="store_true", help="do not compile the CUDA source with nvcc")
        from engine.leir.cli import say_defaults
        a = say_defaults(ap).parse_args(argv)
        targets = _targets(a.targets)
        if a.trials < 1:
            raise LeirError("--trials must be at least 1")
        from engine.leir.files import load_programs
        programs = [p for f in a.files for p in load_programs(f)]
        pool = _Pool(a.timeout, a.log or _devnull())
        try:
            device = pool.call("cuda", "device") if "cuda" in targets else {"cuda": False}
            if not device.get("ok", True) and "cuda" not in device:
                device = {"cuda": False}
            arch = a.arch or device.get("arch") or "sm_90"
            note = _device_note(targets, device, arch, not a.no_nvcc)
            if not a.json:
                print(note, flush=True)
            results = []
            for p in programs:
                r = check_program(pool, p, targets, device, arch, a.seed, a.trials, a.max_points, not a.no_nvcc)
                results.append(r)
                if not a.json:
                    print(r.line(), flush=True)
        finally:
            pool.close()
        s = summary(results)
        if a.json:
            print(json.dumps({"targets": targets, "device": device, "arch": arch, "note": note,
                              "programs": [r.to_json() for r in results], "summary": s}, sort_keys=True))
        else:
            print(f"crosscheck: {s['programs']} program(s): " + ", ".join(
                f"{s[k]} {k}" for k in STATUSES if s[k]) + (" - no disagreement" if s["agree"] else " - DISAGREEMENT"))
        return 0 if s["agree"] else 1

    return run_cli(_main, argv)


def _devnull():
    import os
    return os.devnull


def _device_note(targets, device, arch, nvcc: bool) -> str:
    if "cuda" not in targets:
        return f"targets {', '.join(targets)}"
    if device.get("cuda"):
        return f"targets {', '.join(targets)}; cuda runs on {device['name']} ({arch})"
    from .cudacc import nvcc_path
    what = ["built", "statically checked"]
    if nvcc and nvcc_path():
        what.append(f"compiled to a cubin for {arch} by nvcc")
    if "llvm" in targets:
        what.append("run with their threads one after the other on llvm and compared with llvm")
    return (f"targets {', '.join(targets)}; no CUDA device on this machine: cuda programs are not run on a GPU; "
            f"they are {', '.join(what[:-1])} and {what[-1]}")


if __name__ == "__main__":
    sys.exit(main())
