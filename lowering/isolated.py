"""``Verifier``: numerical verification and timing isolated in a worker process, which you can
leave running for a day (``lowering.verify`` is the one-shot, in-process form and the CLI).

Builds and runs happen in a worker process (``isolate=True``, the default): a segfault, an
out-of-memory kill or a hang past ``timeout`` seconds becomes a ``Verdict`` (or
``Measurement``) with reason ``crashed`` / ``timeout``, the worker is replaced on the next
call, and the caller never dies nor waits forever. Each worker keeps a bounded cache of builds
keyed modulo renaming (``lowering.run.build``), and llvm builds are shared by every process through
the on-disk cache (``lowering.build_cache``). Timings take a machine-wide lock, so two
measurements never overlap, whatever the number of workers or Verifiers.

    v = Verifier(target="llvm", trials=3, tolerance="strict", timeout=60)
    verdict = v.verify(original, candidate)          # .equal, .reason, .to_json()
    verdicts = v.verify_many(original, candidates)    # a state's candidates built in batches
    m = v.measure(candidate)                          # .median_ms, .spread_ms, .to_json()
    t = v.measure_schedule([a, b], [[0, 1, 0]] * 20)  # interleaved rounds (lowering.measure)
"""
from __future__ import annotations

import statistics
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Optional

from engine.leir.diagnostics import LeirError
from engine.plumbing.procs import WorkerFailed, WorkerProcess
from engine.plumbing.records import json_safe

from .measure.lock import TimingLock

# exactness of a rewrite (rule metadata) -> the tolerance that verifies it
TOLERANCE_FOR_EXACTNESS = {"bitwise": "exact", "reassociating": "strict"}

THREADS_ENV = "TVM_NUM_THREADS"     # the size of TVM's thread pool, read when a process starts it
BIND_ENV = "TVM_BIND_THREADS"       # 0: TVM leaves its threads unpinned (docs/measurement.md, threads)

REASONS = ("equal", "not equal", "build failed", "execution failed", "timeout", "crashed", "invalid input",
           "fast build differs")


def tolerance_for(exactness: str | None, default: str = "strict") -> str:
    """The tolerance mode a rewrite of this exactness must pass (``exact`` for bitwise rules)."""
    return TOLERANCE_FOR_EXACTNESS.get(exactness or "", default)


@dataclass
class Verdict:
    """The outcome of comparing a candidate with its original over several seeded trials."""

    equal: bool
    reason: str                     # one of REASONS
    message: Optional[str] = None   # what failed, for the reasons that are failures
    target: str = "llvm"
    tolerance: dict = field(default_factory=dict)
    trials: list = field(default_factory=list)     # per trial: seed, equal, per-output errors
    max_abs_err: Optional[float] = None
    max_rel_err: Optional[float] = None
    build: Optional[bool] = None
    exec: Optional[bool] = None
    seconds: float = 0.0
    builds: Optional[dict] = None   # compose: how each program was built (lowering.compose.METHODS)
    reference: Optional[dict] = None  # exact: the reference evaluator's verdict (lowering.bitwise.reference_verdict)
    fast: Optional[dict] = None     # timed build fast: its outputs against the exact build's (lowering.verify.compare_builds)

    def to_json(self) -> dict:
        return json_safe(asdict(self))

    @classmethod
    def from_json(cls, d: dict) -> "Verdict":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class Measurement:
    """Run time of one program: ``repeat`` measurements after ``warmup`` runs, each the mean of
    ``number`` runs; the median and the spread (interquartile range) in milliseconds."""

    ok: bool
    reason: str                     # "measured", "build failed", "execution failed", "timeout", "crashed"
    message: Optional[str] = None
    target: str = "llvm"
    median_ms: Optional[float] = None
    min_ms: Optional[float] = None
    mean_ms: Optional[float] = None
    spread_ms: Optional[float] = None
    times_ms: list = field(default_factory=list)
    warmup: int = 3
    number: int = 3
    repeat: int = 5
    seconds: float = 0.0
    build: str = "exact"            # the named build timed (lowering.builds)

    def to_json(self) -> dict:
        return json_safe(asdict(self))

    @classmethod
    def from_json(cls, d: dict) -> "Measurement":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


# --------------------------------------------------------------------------- the work itself


def _verify_now(original: dict, candidate: dict, opts: dict) -> dict:
    """Verdict (as JSON) of a candidate against its original, computed in this process."""
    from engine.leir.files import program_from_json

    from .verify import verify
    t0 = time.perf_counter()
    try:
        a, b = program_from_json(original), program_from_json(candidate)
    except LeirError as e:
        return Verdict(False, "invalid input", e.message, opts["target"]).to_json()
    try:
        r = verify(a, b, trials=opts["trials"], seed=opts["seed"], target=opts["target"],
                   tolerance=opts["tolerance"], arch=opts["arch"], compose=opts.get("compose", False),
                   timed_build=opts.get("timed_build", "exact"))
    except LeirError as e:
        return Verdict(False, "invalid input", e.message, opts["target"]).to_json()
    if r.error is not None:
        stage = r.error["stage"]
        reason = "build failed" if stage == "build" else "execution failed"
        msg = f"{r.error['program']}: {r.error['message']}"
    elif r.fast is not None and not r.fast["equal"]:
        from .fastcheck import FAST_DIFFERS
        reason, msg = FAST_DIFFERS, r.fast["message"]
    else:
        reason, msg = ("equal", None) if r.equal else ("not equal", _worst(r))
    v = Verdict(r.ok, reason, msg, r.target, r.tolerance, r.trials, r.max_abs_err, r.max_rel_err, r.build, r.exec,
                time.perf_counter() - t0, r.builds, r.reference, r.fast)
    return v.to_json()


def _worst(r) -> str:
    bad = []
    for t in r.trials:
        for name, c in t.get("outputs", {}).items():
            if not c["equal"]:
                bad.append(f"trial {t['trial']} {name}: {c['mismatches']} element(s) outside the bound, "
                           f"max abs err {c['max_abs_err']}")
    oracle = [(t, name, c) for t in (r.reference or {}).get("trials", [])
              for name, c in t["outputs"].items() if not c["equal"]]
    if oracle:     # the builds agreed: the compiler simplified what the programs compute differently
        t, name, c = oracle[0]
        bad.append(f"the builds agree, but the reference evaluator (no compiler) does not: trial {t['trial']} "
                   f"({t['inputs']} inputs) {name}: {c['mismatches']} element(s) not identical bit for bit, "
                   f"{c['first']} ({len({t['trial'] for t, _, _ in oracle})} of "
                   f"{len(r.reference['trials'])} trial(s) differ)")
    return "; ".join(bad[:3]) or "not equal"


def _against_now(program: dict, inputs: list, expected: list, opts: dict) -> dict:
    """Verdict of a program's outputs against given expected outputs, one trial per entry."""
    import numpy as np

    from engine.leir.files import program_from_json

    from .compose import build_composed, run_composed
    from .errors import LoweringError
    from .run import build, run_built
    from .verify import _FORMULAS, K_STRICT, compare, reduction_length
    make, run = (build_composed, run_composed) if opts.get("compose") else (build, run_built)
    t0 = time.perf_counter()
    prog = program_from_json(program)
    n = reduction_length(prog)
    mode = opts["tolerance"]
    tol = {"mode": mode, "formula": _FORMULAS[mode], "k": K_STRICT if mode == "strict" else None,
           "reduction_length": n}
    v = Verdict(False, "equal", None, opts["target"], tol)
    try:
        built = make(prog, opts["target"], opts["arch"])
    except LoweringError as e:
        v.reason, v.message, v.build = "build failed", e.message, False
        return v.to_json()
    v.build = True
    if opts.get("compose"):
        v.builds = {"program": built.method}
    worst_abs = worst_rel = 0.0
    equal = True
    for t, (ins, exp) in enumerate(zip(inputs, expected)):
        try:
            got = run(built, prog, {k: np.asarray(x) for k, x in ins.items()})
        except LoweringError as e:
            v.reason, v.message, v.exec = "execution failed", e.message, False
            return v.to_json()
        outs = {}
        ok = True
        for d in prog.outputs:
            c = compare(got[d.name], np.asarray(exp[d.name]).reshape(d.shape), d.dtype, n, mode)
            outs[d.name] = c.to_dict()
            ok &= c.equal
            worst_abs, worst_rel = max(worst_abs, c.max_abs_err), max(worst_rel, c.max_rel_err)
        v.trials.append({"trial": t, "equal": ok, "outputs": outs})
        equal &= ok
    v.exec, v.equal = True, bool(equal)
    v.reason = "equal" if equal else "not equal"
    v.max_abs_err, v.max_rel_err = worst_abs, worst_rel
    v.seconds = time.perf_counter() - t0
    return v.to_json()


def _measure_now(program: dict, opts: dict) -> dict:
    from engine.leir.files import program_from_json

    from .errors import LoweringError
    from .fastcheck import FAST_DIFFERS, FastMismatch, timed_build
    from .inputs import random_inputs
    from .run import time_built
    t0 = time.perf_counter()
    m = Measurement(False, "measured", None, opts["target"], warmup=opts["warmup"], number=opts["number"],
                    repeat=opts["repeat"], build=opts.get("timed_build", "exact"))
    try:
        prog = program_from_json(program)
        built = timed_build(prog, opts["target"], opts["arch"], m.build, opts["seed"])
    except FastMismatch as e:
        m.reason, m.message = FAST_DIFFERS, e.message
        return m.to_json()
    except LeirError as e:
        m.reason, m.message = "build failed", e.message
        return m.to_json()
    inputs = random_inputs(prog, opts["seed"], 0)
    try:
        with TimingLock(opts["target"]):
            times = time_built(built, prog, inputs, warmup=opts["warmup"], number=opts["number"],
                               repeat=opts["repeat"])
    except LoweringError as e:
        m.reason, m.message = "execution failed", e.message
        return m.to_json()
    q = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
    m.ok, m.times_ms = True, times
    m.median_ms, m.min_ms, m.mean_ms = statistics.median(times), min(times), statistics.fmean(times)
    m.spread_ms = q[2] - q[0]
    m.seconds = time.perf_counter() - t0
    return m.to_json()


def _schedule_now(programs: list, schedule: list, opts: dict) -> dict:
    from .measure.rounds import measure_schedule_now
    return measure_schedule_now(programs, schedule, opts)


def _build_now(program: dict, opts: dict) -> dict:
    """Whether the program builds (``lowering.run.build``), computed in this process."""
    from engine.leir.files import program_from_json

    from .run import build
    t0 = time.perf_counter()
    try:
        built = build(program_from_json(program), opts["target"], opts["arch"])
    except LeirError as e:
        return {"ok": False, "reason": "build failed", "message": e.message, "seconds": time.perf_counter() - t0}
    return {"ok": True, "reason": "built", "message": None, "vectorized": built.vectorized,
            "seconds": time.perf_counter() - t0}


def _prebuild_now(programs: list, opts: dict) -> dict:
    """Build programs in batches (``lowering.batch_build``) into this worker's caches, so that the
    requests that follow find them built: {"built", "failed", "seconds"}. ``opts["compose"]``: the
    programs' slot kernels, which is what a composed verification builds."""
    from engine.leir.files import program_from_json

    from .batch_build import build_many
    from .errors import LoweringError
    t0 = time.perf_counter()
    todo = []
    for rec in programs:
        try:
            prog = program_from_json(rec)
        except LeirError:
            continue
        todo += _kernels_of(prog) if opts.get("compose") else [prog]
    results = build_many(todo, opts["target"], opts["arch"], opts.get("batch_size") or 1)
    failed = sum(isinstance(r, LoweringError) for r in results)
    return {"built": len(results) - failed, "failed": failed, "seconds": time.perf_counter() - t0}


def _kernels_of(program) -> list:
    """What a composed build of ``program`` compiles: its slot kernels, or itself when it has one slot."""
    from engine.leir.slots import split
    try:
        slots = split(program)
    except LeirError:
        return [program]
    return [s.kernel for s in slots] if len(slots) > 1 else [program]


def _paired_now(programs: list, opts: dict) -> dict:
    from .measure.rounds import measure_paired_now
    return measure_paired_now(programs, opts)


def _alone_now(programs: list, rounds: int, opts: dict) -> dict:
    from .measure.profile import measure_alone_now
    return measure_alone_now(programs, rounds, opts)


def _threads_now() -> dict:
    """What this process's programs run on: the size of TVM's thread pool (``runtime.NumThreads``)
    and the environment TVM read it from."""
    import os

    import tvm
    return {"pool": int(tvm.get_global_func("runtime.NumThreads")()),
            "TVM_NUM_THREADS": os.environ.get(THREADS_ENV), "TVM_BIND_THREADS": os.environ.get(BIND_ENV)}


HANDLERS = {"build": _build_now, "prebuild": _prebuild_now, "verify": _verify_now, "against": _against_now,
            "measure": _measure_now, "schedule": _schedule_now, "paired": _paired_now, "alone": _alone_now,
            "threads": _threads_now}


class Verifier:
    """Verification and timing on one target.

    ``target`` "llvm" or "cuda"; ``trials`` seeded trials per verification; ``tolerance``
    "strict" (dtype-aware bound), "exact" (bitwise) or "reference" (the Step-TP reference's
    loose rule); ``timeout`` seconds per request (None: no limit); ``isolate``: build and run
    in worker processes (the default; required for ``timeout``); ``workers``: how many, for
    callers that verify from several threads; ``memory_mib``: address-space limit of a worker;
    ``cache_size``: compiled programs kept per worker; ``warmup``/``number``/``repeat``: the
    timing protocol of ``measure``; ``log``: a file the workers' diagnostics (TVM's warnings, a
    crash's stack) are appended to instead of this process's stderr; ``compose``: ``verify`` and
    ``verify_against`` run programs as their slot kernels (``lowering.compose``: the same outputs
    bit for bit, a kernel built once for all the programs that share it); ``builds`` counts how
    the programs were built (composed, single: one statement, fallback: a slot did not build
    alone, so the whole program was); ``build_cache``: the on-disk cache of llvm builds its workers
    share with every process (``lowering.build_cache``): a folder, False (off) or None (as
    ``$LEIR_BUILD_CACHE`` says; default ``~/.cache/leir-engine/builds``); ``batch_size``: how many
    programs ``verify_many`` and ``prebuild`` compile as one module (1: one at a time);
    ``timed_build``: the named build timings run (``lowering.builds``): ``exact`` (the default, as
    verification) or ``fast`` (FMA, AVX-512), whose outputs each verification then also checks
    against the exact build's at the strict tolerance (a mismatch: reason "fast build differs"), as
    every timing does before it times a fast build (``lowering.fastcheck``); ``threads``: the size of
    TVM's thread pool in every worker it starts (``TVM_NUM_THREADS``, with ``TVM_BIND_THREADS=0``:
    threads not pinned to cores; docs/measurement.md), None: the environment's, as this process's
    (``threads`` then says ``lowering.measure.machine.cpu_threads()``)."""

    def __init__(self, target: str = "llvm", trials: int = 3, tolerance: str = "strict",
                 timeout: Optional[float] = None, *, seed: int = 0, isolate: bool = True, workers: int = 1,
                 memory_mib: Optional[int] = None, cache_size: int = 128, arch: str = "sm_90",
                 warmup: int = 3, number: int = 3, repeat: int = 5, log=None, compose: bool = False,
                 build_cache=None, batch_size: int = 8, timed_build: str = "exact",
                 threads: Optional[int] = None):
        from . import build_cache as disk_cache
        from .builds import build_named
        from .tir import TARGETS
        from .verify import MODES
        if target not in TARGETS:
            raise LeirError(f"unknown target '{target}' (expected {' or '.join(TARGETS)})")
        if tolerance not in MODES:
            raise LeirError(f"unknown tolerance '{tolerance}' (expected {', '.join(MODES)})")
        if trials < 1:
            raise LeirError("trials must be at least 1")
        if timeout is not None and not isolate:
            raise ValueError("a timeout needs isolate=True (the work must run in a worker process)")
        if batch_size < 1:
            raise LeirError(f"batch_size must be at least 1, got {batch_size}")
        if threads is not None:
            if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
                raise LeirError(f"threads must be a whole number at least 1, got {threads!r}")
            if not isolate:
                raise LeirError("threads needs isolate=True: the thread count is set in the environment of the "
                                "worker processes, TVM's thread pool of this process is started already")
        self._threads = threads
        self.timed_build = build_named(timed_build, "timed build").name
        folder, bound = disk_cache.settings(build_cache)
        self.build_cache = (str(folder) if folder is not None else "off", bound / 2 ** 20)
        if not isolate and build_cache is not None:
            disk_cache.configure(*self.build_cache)
        self.batch_size = int(batch_size)
        self.target, self.trials, self.tolerance, self.timeout = target, trials, tolerance, timeout
        self.seed, self.isolate, self.arch = seed, isolate, arch
        self.memory_mib, self.cache_size = memory_mib, cache_size
        self.warmup, self.number, self.repeat = warmup, number, repeat
        self.log = log
        self.compose = bool(compose)
        self.builds: dict[str, int] = {}
        self.batches: dict[str, int] = {}    # prebuild requests, programs built and failed, batches given up
        self._idle: list[WorkerProcess] = []
        self._slots = threading.Semaphore(max(1, workers))
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    @property
    def threads(self) -> int:
        """The thread count its CPU programs run on: the one given, else the environment's
        (``lowering.measure.machine.cpu_threads``)."""
        from .measure.machine import cpu_threads
        return self._threads if self._threads is not None else cpu_threads()

    # ------------------------------------------------------------------ public

    def verify(self, original, candidate, tolerance: Optional[str] = None) -> Verdict:
        """Build both programs, run them on the same seeded inputs ``trials`` times and compare
        every output under ``tolerance`` (default: the Verifier's)."""
        from .verify import check_same_interface
        try:
            check_same_interface(original, candidate)
        except LeirError as e:
            return self._count(Verdict(False, "invalid input", e.message, self.target))
        with self._session() as call:
            return self._verify_with(call, original, candidate, tolerance)

    def _verify_with(self, call, original, candidate, tolerance: Optional[str]) -> Verdict:
        opts = self._opts(tolerance)
        out = call("verify", (original.to_json(), candidate.to_json(), opts))
        if isinstance(out, dict):
            return self._count(Verdict.from_json(out))
        reason, msg = out
        return self._count(Verdict(False, reason, msg, self.target, _tolerance_record(opts)))

    def build(self, program) -> dict:
        """Whether ``program`` builds on the target: {"ok", "reason" (built, build failed, timeout,
        crashed), "message"}; a build that crashes the worker is a "crashed" answer."""
        out = self._run("build", (program.to_json(), self._opts(None)))
        if isinstance(out, dict):
            return out
        reason, msg = out
        return {"ok": False, "reason": reason, "message": msg}

    def verify_many(self, original, candidates: list, tolerances=None) -> list[Verdict]:
        """``verify`` of each candidate against ``original`` (``tolerances``: one mode, or one per
        candidate; None: the Verifier's), their builds batched: ``batch_size`` candidates at a
        time are compiled as one module in one worker (``prebuild``), then verified there one
        request each, with ``timeout`` each. A batch that crashes or outlasts its time (``timeout``
        per program) is given up, and its candidates are built one by one, so one bad candidate
        costs only its own verdict."""
        from .verify import check_same_interface
        tols = list(tolerances) if isinstance(tolerances, (list, tuple)) else [tolerances] * len(candidates)
        if len(tols) != len(candidates):
            raise ValueError(f"{len(tols)} tolerances for {len(candidates)} candidates")
        out: list = [None] * len(candidates)
        todo = []
        for i, c in enumerate(candidates):
            try:
                check_same_interface(original, c)
                todo.append(i)
            except LeirError as e:
                out[i] = self._count(Verdict(False, "invalid input", e.message, self.target))
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start:start + self.batch_size]
            with self._session() as call:
                if self.batch_size > 1 and len(chunk) > 1:      # one module: the chunk and the original
                    self._prebuild(call, [original, *(candidates[i] for i in chunk)], len(chunk) + 1)
                for i in chunk:
                    out[i] = self._verify_with(call, original, candidates[i], tols[i])
        return out

    def prebuild(self, programs: list) -> dict:
        """Build ``programs`` in batches of ``batch_size`` (``lowering.batch_build``) in a worker, so
        that later requests find them built: in that worker's cache, and on llvm in the on-disk
        cache every worker reads. {"built", "failed", "seconds"}, or {"reason", "message"} when the
        worker crashed or timed out (nothing is lost: each program is built again when asked for)."""
        with self._session() as call:
            return self._prebuild(call, programs, self.batch_size)

    def _prebuild(self, call, programs: list, batch_size: int) -> dict:
        opts = self._opts(None) | {"batch_size": batch_size}
        timeout = None if self.timeout is None else self.timeout * len(programs)
        out = call("prebuild", ([p.to_json() for p in programs], opts), timeout)
        self.batches["requests"] = self.batches.get("requests", 0) + 1
        if isinstance(out, dict):
            self.batches["built"] = self.batches.get("built", 0) + out["built"]
            self.batches["failed"] = self.batches.get("failed", 0) + out["failed"]
            return out
        self.batches["given up"] = self.batches.get("given up", 0) + 1
        return {"reason": out[0], "message": out[1]}

    def verify_step(self, original, step) -> Verdict:
        """``verify`` of a step's result at the tolerance its exactness demands."""
        return self.verify(original, step.program, tolerance_for(step.exactness, self.tolerance))

    def verify_against(self, program, inputs: list, expected: list, tolerance: Optional[str] = None) -> Verdict:
        """Run ``program`` on each ``inputs[t]`` (name -> array) and compare its outputs with
        ``expected[t]`` (name -> array), e.g. an independent reference such as torch."""
        opts = self._opts(tolerance)
        out = self._run("against", (program.to_json(), inputs, expected, opts))
        if isinstance(out, dict):
            return self._count(Verdict.from_json(out))
        reason, msg = out
        return self._count(Verdict(False, reason, msg, self.target, _tolerance_record(opts)))

    def measure(self, program, build: Optional[str] = None) -> Measurement:
        """Median run time over ``repeat`` measurements after ``warmup`` runs (``build``: the named
        build timed; None: ``timed_build``; so for every ``measure_*``)."""
        opts = self._opts(None, build)
        out = self._run("measure", (program.to_json(), opts))
        if isinstance(out, dict):
            return Measurement.from_json(out)
        reason, msg = out
        return Measurement(False, reason, msg, self.target, warmup=self.warmup, number=self.number,
                           repeat=self.repeat, build=opts["timed_build"])

    def measure_schedule(self, programs: list, schedule: list[list[int]], min_ms: float = 0.5,
                         best_of: int = 5, build: Optional[str] = None) -> dict:
        """Interleaved timings (``lowering.measure.rounds``): ``programs`` (one interface) built and warmed
        in one worker, then measured in the order of ``schedule`` (per round, indices into
        ``programs``) under one hold of the timing lock. {"ok", "reason", "message", "failed",
        "number", "times": ms per round per entry, "seconds"}."""
        opts = self._opts(None, build) | {"min_ms": float(min_ms), "best_of": int(best_of)}
        out = self._run("schedule", ([p.to_json() for p in programs], schedule, opts))
        if isinstance(out, dict):
            return out
        reason, msg = out
        return {"ok": False, "reason": reason, "message": msg, "failed": None, "number": None, "times": [],
                "seconds": 0.0}

    def measure_paired(self, programs: list, protocol, sum_model: Optional[dict] = None,
                       build: Optional[str] = None) -> dict:
        """A parent (``programs[0]``) against candidates in interleaved rounds under the sequential
        rule of ``protocol`` (a ``lowering.measure.Protocol``), built and warmed once in one worker,
        under one hold of the timing lock (``lowering.measure.rounds.measure_paired_now``). {"ok",
        "reason", "message", "failed", "number", "samples": per candidate {"parent", "candidate"},
        "rounds", "seconds"}. ``sum_model`` ({"kernel_ms", "slot"}): the programs are slot kernels,
        decided on their program's speedup (``lowering.measure.summodel``)."""
        opts = self._opts(None, build) | {"protocol": protocol.to_json(), "sum_model": sum_model}
        out = self._run("paired", ([p.to_json() for p in programs], opts))
        if isinstance(out, dict):
            return out
        reason, msg = out
        return {"ok": False, "reason": reason, "message": msg, "failed": None, "number": None, "samples": [],
                "seconds": 0.0}

    def measure_alone(self, programs: list, rounds: int, min_ms: float = 0.5, best_of: int = 5,
                      build: Optional[str] = None) -> dict:
        """Programs of any interfaces each timed alone (its own inputs and runs per mean), one
        measurement of each per round, under one hold of the timing lock
        (``lowering.measure.profile``). {"ok", "reason", "message", "failed", "runs", "times": ms
        per round per program, "seconds"}."""
        opts = self._opts(None, build) | {"min_ms": float(min_ms), "best_of": int(best_of)}
        out = self._run("alone", ([p.to_json() for p in programs], int(rounds), opts))
        if isinstance(out, dict):
            return out
        reason, msg = out
        return {"ok": False, "reason": reason, "message": msg, "failed": None, "runs": [], "times": [],
                "seconds": 0.0}

    def thread_pool(self) -> dict:
        """What a worker's programs run on, as the worker reports it: {"pool": the size of TVM's
        thread pool, "TVM_NUM_THREADS", "TVM_BIND_THREADS": its environment's values (None: unset)},
        or {"reason", "message"} when the worker crashed or timed out."""
        out = self._run("threads", ())
        if isinstance(out, dict):
            return out
        return {"reason": out[0], "message": out[1]}

    def close(self) -> None:
        """Stop the worker processes."""
        with self._lock:
            for w in self._idle:
                w.kill()
            self._idle.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ------------------------------------------------------------------ plumbing

    def _opts(self, tolerance: Optional[str], build: Optional[str] = None) -> dict:
        from .builds import build_named
        from .verify import MODES
        tol = tolerance or self.tolerance
        if tol not in MODES:
            raise LeirError(f"unknown tolerance '{tol}' (expected {', '.join(MODES)})")
        return {"target": self.target, "trials": self.trials, "tolerance": tol, "seed": self.seed,
                "arch": self.arch, "warmup": self.warmup, "number": self.number, "repeat": self.repeat,
                "compose": self.compose, "timed_build": build_named(build or self.timed_build, "timed build").name}

    def _count(self, v: Verdict) -> Verdict:
        self.counts[v.reason] = self.counts.get(v.reason, 0) + 1
        for method in (v.builds or {}).values():
            self.builds[method] = self.builds.get(method, 0) + 1
        return v

    def _run(self, kind: str, args: tuple):
        """The handler's JSON answer, or (reason, message) when the worker failed."""
        with self._session() as call:
            return call(kind, args)

    @contextmanager
    def _session(self):
        """``call(kind, args, timeout=the Verifier's)`` for a series of requests served by one
        worker (what one request built, the next finds in its cache); a worker that crashes or
        times out is replaced at the next request."""
        if not self.isolate:
            yield _local
            return
        held: list = []

        def call(kind: str, args: tuple, timeout=self.timeout):
            if not held or not held[0].alive():
                held[:] = [self._worker()]
            try:
                status, payload = held[0].call((kind, args), timeout)
            except WorkerFailed as e:     # timeout or crash: that worker is gone
                held.clear()
                return (e.reason, e.message)
            if status == "ok":
                return payload
            return ("crashed", payload if status == "oom" else f"internal error: {payload}")

        with self._slots:
            try:
                yield call
            except BaseException:         # interrupted, perhaps mid-request: that worker is not reused
                for w in held:
                    w.kill()
                raise
            if held:
                with self._lock:
                    self._idle.append(held[0])

    def _worker(self) -> WorkerProcess:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None or not worker.alive():
            worker = WorkerProcess("lowering.tvm_worker", (self.memory_mib or 0, self.cache_size, *self.build_cache),
                                   env=self._worker_env(), stderr=self.log)
        return worker

    def _worker_env(self) -> Optional[dict]:
        """A worker's environment: this process's (None), or a copy of it with ``threads`` set."""
        if self._threads is None:
            return None
        import os
        return {**os.environ, THREADS_ENV: str(self._threads), BIND_ENV: "0"}


def _local(kind: str, args: tuple, timeout=None):
    """A request served in this process (``isolate=False``)."""
    try:
        return HANDLERS[kind](*args)
    except MemoryError:
        return ("crashed", "out of memory")


def _tolerance_record(opts: dict) -> dict:
    from .verify import _FORMULAS, K_STRICT
    mode = opts["tolerance"]
    return {"mode": mode, "formula": _FORMULAS[mode], "k": K_STRICT if mode == "strict" else None}
