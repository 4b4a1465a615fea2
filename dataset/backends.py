"""Where a job's tasks run: ``local`` worker processes or Ray tasks. Both hand each finished
task's result to the driver (``on_result``), which alone commits it; neither writes anything.

``local``: N worker processes (``python -m dataset.worker``), each with its own rule engine
and Verifier, fed by N driver threads. A worker that dies (a segfault in native code, an
out-of-memory kill) is replaced and its task tried once more; a second death is the task's
result (a note), not the job's end. Workers die with the driver (``PR_SET_PDEATHSIG``).

``ray``: one Ray task per program (``max_retries`` on worker death; idempotent, since only
the driver commits), at most twice the cluster's CPUs in flight. Joins a running cluster with
``address`` (``ray start --head`` on one machine, ``ray start --address=HEAD:6379`` on the
others), or starts a local instance with ``workers`` CPUs.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable

RETRIES = 1


def crashed_result(spec: dict, message: str) -> dict:
    return {"index": spec["index"], "source": spec["source"], "status": "skipped",
            "note": {"reason": "worker crashed", "message": message}, "program": None, "origin": None, "key": None,
            "rows": [], "failures": [], "invalid": [],
            "counts": {"neighbours": 0, "sampled": 0, "verified": 0, "failed": 0}, "seconds": 0.0}


class LocalBackend:
    """``module``: the worker module (``python -m MODULE FD`` answering ``("run", options, spec)``);
    ``on_crash(spec, message)``: the result of a task whose worker died twice. Defaults: the
    dataset's; ``search.batch`` passes its own."""

    name = "local"

    def __init__(self, workers: int, log=None, module: str = "dataset.worker", on_crash=None):
        self.workers = max(1, int(workers))
        self.log = log
        self.module = module
        self.on_crash = on_crash or crashed_result
        self._started: list = []

    def run(self, tasks: list[tuple[str, dict]], options: dict, on_result: Callable[[str, dict], None]) -> None:
        from engine.leir.procs import WorkerFailed
        if not tasks:
            return
        n = min(self.workers, len(tasks))
        todo: queue.Queue = queue.Queue()
        for t in tasks:
            todo.put(t)
        done: queue.Queue = queue.Queue()
        # started here, in the main thread: the parent-death signal follows the thread that forked
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
                        status, payload = worker.call(("run", options, spec))
                    except WorkerFailed as e:
                        worker = spare.get()          # a replacement made by the main thread
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
        from engine.leir.procs import WorkerProcess
        w = WorkerProcess(self.module, (), stderr=self.log)
        self._started.append(w)
        return w


def _stop_all(workers: list, grace: float = 10.0) -> None:
    """End workers the polite way first: closing its socket ends a worker's serve loop, which
    closes its Verifier (and that process) before it exits; a kill for any still there after
    ``grace`` seconds."""
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
    """``remote``: the function a Ray task runs, ``remote(options, spec) -> result`` (default: a
    dataset task); ``on_crash`` as for ``LocalBackend``."""

    name = "ray"

    def __init__(self, workers: int, address: str | None = None, remote=None, on_crash=None):
        self.workers = max(1, int(workers))
        self.address = address
        self.remote = remote or run_remote
        self.on_crash = on_crash or crashed_result

    def run(self, tasks: list[tuple[str, dict]], options: dict, on_result: Callable[[str, dict], None]) -> None:
        try:
            import ray
        except ImportError:
            from engine.leir.diagnostics import LeirError
            raise LeirError("--backend ray needs Ray: pip install 'leir-engine[ray]'") from None
        started = False
        if not ray.is_initialized():
            if self.address:
                try:
                    ray.init(address=self.address, log_to_driver=False)
                except (ConnectionError, RuntimeError, ValueError) as e:
                    from engine.leir.diagnostics import LeirError
                    raise LeirError(f"cannot join the Ray cluster at '{self.address}': {str(e).splitlines()[0]} "
                                    "(start one with 'ray start --head')") from None
            else:       # a local instance; its workers import this checkout like the driver does
                import os
                from pathlib import Path
                root = str(Path(__file__).resolve().parent.parent)
                path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
                ray.init(num_cpus=self.workers, log_to_driver=False, include_dashboard=False,
                         runtime_env={"env_vars": {"PYTHONPATH": path}})
            started = True
        try:
            remote = ray.remote(max_retries=2, retry_exceptions=False)(self.remote)
            window = max(2, 2 * int(ray.cluster_resources().get("CPU", self.workers)))
            pending: dict = {}
            it = iter(tasks)
            for tid, spec in it:
                pending[remote.remote(options, spec)] = (tid, spec)
                if len(pending) >= window:
                    break
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                ref = ready[0]
                tid, spec = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.RayTaskError) as e:
                    result = self.on_crash(spec, str(e).splitlines()[0])
                on_result(tid, result)
                nxt = next(it, None)
                if nxt is not None:
                    pending[remote.remote(options, nxt[1])] = nxt
        finally:
            if started:
                ray.shutdown()


_RUNNERS: dict = {}


def run_remote(options: dict, spec: dict) -> dict:
    """A Ray task: one program through a Runner kept for the worker process's life."""
    import json

    from .task import Runner
    key = json.dumps(options, sort_keys=True)
    runner = _RUNNERS.get(key)
    if runner is None:
        runner = _RUNNERS[key] = Runner(options)
    return runner.run(spec)


BACKENDS = {"local": LocalBackend, "ray": RayBackend}
