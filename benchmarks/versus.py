"""Our program against torch eager at one thread count, timed in alternation in one process.

    python benchmarks/versus.py JOB.json        (what benchmarks/search.py runs, one process per count)

A job names a workload (a bundled example, a library workload with its shapes, or a KernelBench file
under ``kernelbench``: its model called on its inputs, allocating its outputs), our program
(LEIR JSON), optionally the original it was derived from (timed too), the thread count and the build (``lowering.builds``; exact where it names none). TVM's thread pool takes its size when the process starts
(``TVM_NUM_THREADS``, which the caller sets; here it is checked), torch's from
``torch.set_num_threads``. Each round times, in an order that rotates from round to round, our
build (``lowering.run``), torch with preallocated outputs (``out=``, where the workload has that
form) and torch allocating its outputs; a time is the mean of back-to-back calls lasting at least
``min_ms``. The figures are the medians over the rounds (the minima are kept too), so a load spike
hits the three alike. Prints one JSON object.
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


def time_alternating(fns: dict, rounds: int = 9, min_ms: float = 5.0, warmup: int = 3) -> dict:
    """{name: {"median_ms", "min_ms", "times"}} of zero-argument callables, timed in rotating order."""
    names = list(fns)
    for f in fns.values():
        for _ in range(warmup):
            f()
    number = {n: _number(fns[n], min_ms) for n in names}
    times = {n: [] for n in names}
    for r in range(rounds):
        for k in range(len(names)):
            n = names[(k + r) % len(names)]
            times[n].append(_calls(fns[n], number[n]))
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


def run_job(job: dict) -> dict:
    import torch

    from engine.leir.files import program_from_json
    threads = int(job["threads"])
    have = os.environ.get("TVM_NUM_THREADS")
    if have != str(threads):
        raise RuntimeError(f"TVM_NUM_THREADS is {have!r}, the job asks for {threads} threads")
    torch.set_num_threads(threads)
    program = program_from_json(job["program"])
    named = job.get("build", "exact")             # jobs written before builds were named timed the exact one
    fns = {"ours": _ours(program, named)}
    if job.get("original"):                       # the program the search started from, timed alike
        fns["original"] = _ours(program_from_json(job["original"]), named)
    alloc, pre = _torch(job, program)
    if pre is not None:
        fns["torch"] = pre
    fns["torch_alloc"] = alloc
    res = time_alternating(fns, rounds=job.get("rounds", 9), min_ms=job.get("min_ms", 5.0))
    return {"workload": job["workload"], "threads": threads, "build": named, **{k: v for k, v in res.items()}}


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
    if len(argv) != 1:
        print("usage: python benchmarks/versus.py JOB.json", file=sys.stderr)
        return 2
    print(json.dumps(run_job(json.loads(Path(argv[0]).read_text()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
