"""``Engine.enumerate_many`` over worker processes: each worker (``python -m
engine.rewrite.enumerate_worker``) loads the rules once and lists the steps of the programs it
is sent; the steps come back as their JSON records and build their program on first use."""
from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor


def enumerate_in_processes(engine, programs: list, workers: int, strategies=None) -> list[list]:
    from engine.plumbing.procs import WorkerFailed, WorkerProcess
    from engine.rewrite.steps import Step
    spec = list(engine.strategies) + (["bitwise"] if engine.bitwise_only else [])
    config = json.dumps({"rules": engine.rule_sources.to_json(), "manifest": engine.rule_manifest,
                         "strategies": spec})
    local = threading.local()
    procs: list = []

    def one(p):
        w = getattr(local, "worker", None)
        if w is None:
            w = local.worker = WorkerProcess("engine.rewrite.enumerate_worker", (config,))
            procs.append(w)
        try:
            status, payload = w.call((p.to_json(), strategies))
        except WorkerFailed as e:
            local.worker = None
            raise RuntimeError(f"enumerating {p.name}: {e.message}") from None
        if status != "ok":
            raise RuntimeError(f"enumerating {p.name}: {payload}")
        return payload

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(one, programs))
    finally:
        for w in procs:
            w.kill()
    out = []
    for p, (records, invalid) in zip(programs, results):
        steps = [Step.from_json(r, base=p) for r in records]
        engine._record(p, steps, invalid)
        out.append(steps)
    return out
