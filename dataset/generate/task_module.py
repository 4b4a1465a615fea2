"""The dataset's task module (``engine.plumbing.jobs``): ``run_task(options, spec)`` generates
one program's rows, in a local worker process or a Ray task alike, keeping one ``Runner`` (rule
engine and Verifier) per set of options for the process's life."""
from __future__ import annotations

import json

_RUNNERS: dict = {}


def run_task(options: dict, spec: dict) -> dict:
    from .task import Runner
    key = json.dumps(options, sort_keys=True)
    runner = _RUNNERS.get(key)
    if runner is None:
        runner = _RUNNERS[key] = Runner(options)
    return runner.run(spec)


def close() -> None:
    for r in _RUNNERS.values():
        r.close()
    _RUNNERS.clear()


def crashed_result(spec: dict, message: str) -> dict:
    """The result of a task whose worker died twice, or that ran past ``--program-time-limit``: the
    program is skipped with a note saying which."""
    from engine.plumbing.jobs import TIME_LIMIT
    reason = TIME_LIMIT if message.startswith(TIME_LIMIT) else "worker crashed"
    return {"index": spec["index"], "source": spec["source"], "status": "skipped",
            "note": {"reason": reason, "message": message}, "program": None, "origin": None, "key": None,
            "rows": [], "failures": [], "invalid": [],
            "counts": {"neighbours": 0, "sampled": 0, "verified": 0, "failed": 0}, "seconds": 0.0}
