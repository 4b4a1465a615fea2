"""Our program against torch eager at one thread count, timed in alternation, each side in its own process.

    python benchmarks/versus.py JOB.json        (what benchmarks/search.py runs, one process per count)
    python benchmarks/versus.py --serve ours|torch JOB.json     (a side process; run_job starts two)

A job names a workload (a bundled example, a library workload with its shapes, or a KernelBench file
under ``kernelbench``: its model called on its inputs, allocating its outputs), our program
(LEIR JSON), optionally the original it was derived from (timed too), the thread count and the build (``lowering.builds``; exact where it names none). TVM's thread pool takes its size when the process starts
(``TVM_NUM_THREADS``, which the caller sets; here it is checked), torch's from
``torch.set_num_threads``. Each round times, in an order that rotates from round to round, our
build (``lowering.run``), torch with preallocated outputs (``out=``, where the workload has that
form) and torch allocating its outputs; a time is the mean of back-to-back calls lasting at least
``min_ms``. The figures are the medians over the rounds (the minima are kept too), so a load spike
hits the three alike. Our builds run in one process (TVM's pool, no torch), torch in another, with a
pause before each timing: two thread pools in one process collide on a small machine (torch's
matmul at 2 threads took 15.5 ms instead of 0.063 beside TVM's pool; docs/measurement.md#threads).
Prints one JSON object.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(Path(__file__).resolve().parent))


def _calls(fn, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) * 1e3 / number


def _number(fn, min_ms: float) -> int:
    fn()
    one = max(_calls(fn, 1), 1e-4)
    return max(1, min(10000, int(min_ms / one) + 1))


class _Local:
    """A zero-argument callable timed in this process."""

    def __init__(self, fn):
        self.fn = fn

    def warm(self, n: int) -> None:
        for _ in range(n):
            self.fn()

    def number(self, min_ms: float) -> int:
        return _number(self.fn, min_ms)

    def time(self, number: int) -> float:
        return _calls(self.fn, number)


class _Remote:
    """A callable of a side process (``serve``), timed there: one JSON line asked, one answered."""

    def __init__(self, proc, name: str):
        self.proc, self.name = proc, name

    def _ask(self, **cmd) -> dict:
        self.proc.stdin.write(json.dumps({"name": self.name, **cmd}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the side process of {self.name} ended: {self.proc.stderr.read()[-500:]}")
        return json.loads(line)

    def warm(self, n: int) -> None:
        self._ask(op="warm", n=n)

    def number(self, min_ms: float) -> int:
        return int(self._ask(op="number", min_ms=min_ms)["number"])

    def time(self, number: int) -> float:
        return float(self._ask(op="time", number=number)["ms"])


def time_alternating(fns: dict, rounds: int = 9, min_ms: float = 5.0, warmup: int = 3, settle_s: float = 0.0) -> dict:
    """{name: {"median_ms", "min_ms", "times"}} of zero-argument callables (or ``_Local``/``_Remote``
    timers), timed in rotating order; ``settle_s``: a pause before each timing, so that a thread
    pool that spins after its last call has gone to sleep."""
    timers = {n: f if isinstance(f, (_Local, _Remote)) else _Local(f) for n, f in fns.items()}
    names = list(timers)
    for t in timers.values():
        t.warm(warmup)
    number = {n: timers[n].number(min_ms) for n in names}
    times = {n: [] for n in names}
    for r in range(rounds):
        for k in range(len(names)):
            n = names[(k + r) % len(names)]
            if settle_s:
                time.sleep(settle_s)
            times[n].append(timers[n].time(number[n]))
    return {n: {"median_ms": statistics.median(ts), "min_ms": min(ts), "times": ts, "number": number[n]}
            for n, ts in times.items()}


def _ours(program, named: str):
    """A zero-argument call of our build of ``program`` (the build called ``named``,
    ``lowering.builds``) on its seeded inputs."""
    from lowering.inputs import random_inputs
    from lowering.run import arguments, build, device_for
    built = build(program, "llvm", build=named)
    dev = device_for("llvm")
    args, outs = arguments(program, random_inputs(program, 0, 0), dev, built.scratch)
    fn = built.function
    return lambda: fn(*args, *outs)


def _torch(job, program):
    """(allocating call, preallocated call or None) of the job's torch computation."""
    import torch

    import torch_eager
    name = job["workload"]
    if job.get("kernelbench"):                    # a KernelBench file: its model on its inputs, allocating
        from dataset.translate.kernelbench import load
        got = load(ROOT / job["kernelbench"])
        fn, args, pfn, pargs = got.model.eval(), tuple(got.inputs), None, None
    elif name in torch_eager.EXAMPLES:
        fn, args = torch_eager.example_call(name, program)
        pfn, pargs = torch_eager.example_call_preallocated(name, program)
    else:
        fn, args = torch_eager.library_call(name, job.get("shapes") or {})
        got = torch_eager.library_call_preallocated(name, job.get("shapes") or {})
        pfn, pargs = got if got else (None, None)

    def wrap(f, a):
        def call():
            with torch.no_grad():
                f(*a)
        return call
    return wrap(fn, args), (wrap(pfn, pargs) if pfn else None)


def side_fns(job: dict, side: str) -> dict:
    """The callables of one side of a job: "ours" (our builds; TVM's pool, no torch) or "torch"."""
    from engine.leir.files import program_from_json
    threads = int(job["threads"])
    program = program_from_json(job["program"])
    if side == "ours":
        have = os.environ.get("TVM_NUM_THREADS")
        if have != str(threads):
            raise RuntimeError(f"TVM_NUM_THREADS is {have!r}, the job asks for {threads} threads")
        named = job.get("build", "exact")         # jobs written before builds were named timed the exact one
        fns = {"ours": _ours(program, named)}
        if job.get("original"):                   # the program the search started from, timed alike
            fns["original"] = _ours(program_from_json(job["original"]), named)
        return fns
    import torch
    torch.set_num_threads(threads)
    alloc, pre = _torch(job, program)
    return {**({"torch": pre} if pre is not None else {}), "torch_alloc": alloc}


def serve(job: dict, side: str) -> None:
    """A side process: its callables built and warm, then one JSON answer per JSON line asked."""
    timers = {n: _Local(f) for n, f in side_fns(job, side).items()}
    print(json.dumps({"ready": list(timers)}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        t = timers[cmd["name"]]
        if cmd["op"] == "warm":
            t.warm(int(cmd["n"]))
            out = {}
        elif cmd["op"] == "number":
            out = {"number": t.number(float(cmd["min_ms"]))}
        else:
            out = {"ms": t.time(int(cmd["number"]))}
        print(json.dumps(out), flush=True)


def run_job(job: dict) -> dict:
    """Ours and torch timed in alternation, each side in a process of its own (two thread pools in
    one process collide on a small machine: docs/measurement.md#threads), with ``settle_ms`` (default
    20) of pause before each timing so that the other side's pool has stopped spinning."""
    import subprocess
    import tempfile
    threads = int(job["threads"])
    with tempfile.TemporaryDirectory() as tmp:
        jf = Path(tmp) / "job.json"
        jf.write_text(json.dumps(job))
        procs, fns = [], {}
        try:
            for side in ("ours", "torch"):
                p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve", side, str(jf)],
                                     cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
                procs.append(p)
                ready = p.stdout.readline()
                if not ready:
                    raise RuntimeError(f"the {side} side did not start: {p.stderr.read()[-500:]}")
                fns.update({n: _Remote(p, n) for n in json.loads(ready)["ready"]})
            res = time_alternating(fns, rounds=job.get("rounds", 9), min_ms=job.get("min_ms", 5.0),
                                   settle_s=job.get("settle_ms", 20.0) / 1e3)
        finally:
            for p in procs:
                if p.stdin:
                    p.stdin.close()
                p.wait(timeout=60)
    return {"workload": job["workload"], "threads": threads, "build": job.get("build", "exact"),
            "processes": "separate", **{k: v for k, v in res.items()}}


def in_process(job: dict) -> dict:
    """``run_job`` in a fresh process whose TVM pool has the job's thread count."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        jf = Path(tmp) / "job.json"
        jf.write_text(json.dumps(job))
        # unbound: TVM's pool pinned to cores and torch's OpenMP pool in one process collide (torch's
        # 128x256x192 matmul at 2 threads took 15.5 ms, not 0.063; docs/measurement.md)
        env = dict(os.environ, TVM_NUM_THREADS=str(job["threads"]), TVM_BIND_THREADS="0")
        r = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(jf)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=1800)
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if r.returncode != 0 or not lines:
        tail = (r.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"{job['workload']} at {job['threads']} threads: versus.py exit {r.returncode}: {tail}")
    return json.loads(lines[-1])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 3 and argv[0] == "--serve" and argv[1] in ("ours", "torch"):
        serve(json.loads(Path(argv[2]).read_text()), argv[1])
        return 0
    if len(argv) != 1:
        print("usage: python benchmarks/versus.py JOB.json", file=sys.stderr)
        return 2
    print(json.dumps(run_job(json.loads(Path(argv[0]).read_text()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
