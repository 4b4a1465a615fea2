"""Where a job's tasks run: ``local`` worker processes or Ray tasks. Both hand each finished
task's result to the driver (``on_result``), which alone commits it; neither writes anything.

A job names its *task module*: a module with ``run_task(options, spec) -> result`` (keeping
whatever it likes across the tasks of one process: rule engines, Verifiers) and, optionally,
``close()`` (called when the process stops serving). The same function runs in both backends,
so a task gives the same result wherever it ran.

``local``: N worker processes (``python -m engine.plumbing.jobs FD TASK_MODULE``), fed by N
driver threads. A worker that dies (a segfault in native code, an out-of-memory kill) is
replaced and its task tried once more; a second death is the task's result (``on_crash``), not
the job's end. A task still running after ``task_timeout`` seconds has its worker killed and
replaced; ``on_crash(spec, message)`` gives its result (the message says the limit), with no second
try: the job goes on. Workers end with the driver (``procs``).

``ray``: one Ray task per task (``max_retries`` on worker death; idempotent, since only the
driver commits), at most twice the cluster's CPUs in flight. Joins a running cluster with
``address`` (``ray start --head`` on one machine, ``ray start --address=HEAD:6379`` on the
others), or starts a local instance with ``workers`` CPUs. With a ``task_timeout`` at most one
task per CPU is in flight and a task's clock starts when it is submitted; one past the limit is
cancelled (its worker killed) and ``on_crash`` gives its result.
"""
from __future__ import annotations

import importlib
import queue
import sys
import threading
from collections.abc import Callable

RETRIES = 1

OnCrash = Callable[[dict, str], object]          # (spec, message) -> the result of a task whose worker died
TIME_LIMIT = "time limit"                       # how a task stopped by its time limit's message begins


def _limit_message(seconds: float) -> str:
    return f"{TIME_LIMIT}: still running after {seconds:g} s (stopped; the job went on)"


class LocalBackend:
    """``task_module``: see the module's docstring; ``on_crash(spec, message)``: the result of a
    task whose worker died twice; ``log``: a file the workers' stderr is appended to."""

    name = "local"

    def __init__(self, workers: int, task_module: str, on_crash: OnCrash, log=None,
                 task_timeout: float | None = None):
        self.workers = max(1, int(workers))
        self.task_module = task_module
        self.on_crash = on_crash
        self.log = log
        self.task_timeout = task_timeout or None
        self._started: list = []

    def run(self, tasks: list[tuple[str, dict]], options, on_result: Callable[[str, object], None]) -> None:
        from engine.plumbing.procs import WorkerFailed
        if not tasks:
            return
        n = min(self.workers, len(tasks))
        todo: queue.Queue = queue.Queue()
        for t in tasks:
            todo.put(t)
        done: queue.Queue = queue.Queue()
        procs = [self._start() for _ in range(n)]
        spare: queue.Queue = queue.Queue()

        def loop(k: int) -> None:
            worker = procs[k]
            while True:
                try:
                    tid, spec = todo.get_nowait()
                except queue.Empty:
                    return
                result = None
                for attempt in range(RETRIES + 1):
                    try:
                        status, payload = worker.call(("run", options, spec), timeout=self.task_timeout)
                    except WorkerFailed as e:
                        worker = spare.get()          # a replacement made by the main thread
                        if e.reason == "timeout":
                            result = self.on_crash(spec, _limit_message(self.task_timeout))
                            break
                        if attempt == RETRIES:
                            result = self.on_crash(spec, e.message)
                        continue
                    if status == "ok":
                        result = payload
                    else:
                        result = self.on_crash(spec, str(payload))
                    break
                done.put((tid, result))

        threads = [threading.Thread(target=loop, args=(k,), daemon=True) for k in range(n)]
        for t in threads:
            spare.put(self._start())
            t.start()
        try:
            remaining = len(tasks)
            while remaining:
                try:
                    tid, result = done.get(timeout=0.5)
                except queue.Empty:
                    while spare.qsize() < n:      # keep a replacement ready for each thread
                        spare.put(self._start())
                    continue
                remaining -= 1
                on_result(tid, result)
                while spare.qsize() < n:
                    spare.put(self._start())
        finally:
            _stop_all(self._started)

    def _start(self):
        from engine.plumbing.procs import WorkerProcess
        w = WorkerProcess("engine.plumbing.jobs", (self.task_module,), stderr=self.log)
        self._started.append(w)
        return w


def _stop_all(workers: list, grace: float = 10.0) -> None:
    """End workers the polite way first: closing its socket ends a worker's serve loop, which
    closes its task module (Verifiers and their processes) before it exits; a kill for any
    still there after ``grace`` seconds."""
    import subprocess
    import time
    for w in workers:
        try:
            w.conn.close()
        except OSError:
            pass
    end = time.monotonic() + grace
    for w in workers:
        try:
            w.proc.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            w.kill()


class RayBackend:
    """``task_module`` and ``on_crash`` as for ``LocalBackend``; ``address``: a running cluster
    to join (default: start a local instance with ``workers`` CPUs)."""

    name = "ray"

    def __init__(self, workers: int, task_module: str, on_crash: OnCrash, address: str | None = None,
                 task_timeout: float | None = None):
        self.workers = max(1, int(workers))
        self.task_module = task_module
        self.on_crash = on_crash
        self.address = address
        self.task_timeout = task_timeout or None

    def run(self, tasks: list[tuple[str, dict]], options, on_result: Callable[[str, object], None]) -> None:
        from engine.leir.diagnostics import LeirError
        try:
            import ray
        except ImportError:
            raise LeirError("--backend ray needs Ray: pip install 'leir-engine[ray]'") from None
        started = False
        if not ray.is_initialized():
            if self.address:
                try:
                    ray.init(address=self.address, log_to_driver=False)
                except (ConnectionError, RuntimeError, ValueError) as e:
                    raise LeirError(f"cannot join the Ray cluster at '{self.address}': {str(e).splitlines()[0]} "
                                    "(start one with 'ray start --head')") from None
            else:       # a local instance; its workers import this checkout like the driver does
                import os
                from pathlib import Path
                root = str(Path(__file__).resolve().parents[2])
                path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
                ray.init(num_cpus=self.workers, log_to_driver=False, include_dashboard=False,
                         runtime_env={"env_vars": {"PYTHONPATH": path}})
            started = True
        try:
            import time
            remote = ray.remote(max_retries=2, retry_exceptions=False)(run_in_ray)
            cpus = int(ray.cluster_resources().get("CPU", self.workers))
            window = max(1, cpus) if self.task_timeout else max(2, 2 * cpus)
            pending: dict = {}
            started: dict = {}

            def submit(tid, spec):
                ref = remote.remote(self.task_module, options, spec)
                pending[ref], started[ref] = (tid, spec), time.monotonic()

            it = iter(tasks)
            for tid, spec in it:
                submit(tid, spec)
                if len(pending) >= window:
                    break
            while pending:
                wait = None
                if self.task_timeout:
                    wait = max(0.0, min(started.values()) + self.task_timeout - time.monotonic())
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=wait)
                if ready:
                    ref = ready[0]
                    tid, spec = pending.pop(ref)
                    started.pop(ref)
                    try:
                        result = ray.get(ref)
                    except (ray.exceptions.WorkerCrashedError, ray.exceptions.RayTaskError) as e:
                        result = self.on_crash(spec, str(e).splitlines()[0])
                else:                                   # the oldest task is past its limit
                    ref = min(started, key=started.get)
                    ray.cancel(ref, force=True)
                    tid, spec = pending.pop(ref)
                    started.pop(ref)
                    result = self.on_crash(spec, _limit_message(self.task_timeout))
                on_result(tid, result)
                nxt = next(it, None)
                if nxt is not None:
                    submit(*nxt)
        finally:
            if started:
                ray.shutdown()


def backend(kind: str, workers: int, task_module: str, on_crash: OnCrash, *, address: str | None = None,
            log=None, task_timeout: float | None = None):
    """The backend a job's ``--backend``/``--workers``/``--address`` name (``log``: local only;
    ``task_timeout``: seconds a task may run, None for no limit)."""
    if kind == "ray":
        return RayBackend(workers, task_module, on_crash, address, task_timeout=task_timeout)
    return LocalBackend(workers, task_module, on_crash, log=log, task_timeout=task_timeout)


def run_in_ray(task_module: str, options, spec: dict):
    """A Ray task: ``run_task`` of the task module (imported once per Ray worker process)."""
    return importlib.import_module(task_module).run_task(options, spec)


def serve_tasks(argv: list[str]) -> None:
    """The local worker: answer ``("run", options, spec)`` with ``("ok", run_task(options, spec))``
    until the driver goes away, then ``close()`` the task module."""
    from engine.plumbing.procs import serve
    fd, task_module = argv[0], argv[1]
    loaded: list = []

    def prepare() -> None:          # imports: paid at start-up, outside any task's time
        loaded.append(importlib.import_module(task_module))

    def handle(request):
        kind, options, spec = request
        if kind != "run":
            return ("error", f"unknown request {kind!r}")
        return ("ok", loaded[0].run_task(options, spec))

    try:
        serve(handle, [fd], prepare=prepare)
    finally:
        close = getattr(loaded[0], "close", None) if loaded else None
        if close is not None:
            close()


if __name__ == "__main__":
    serve_tasks(sys.argv[1:])
