"""A local generation worker: ``python -m dataset.worker FD`` answers ``("run", options, spec)``
with the task's result, keeping its rule engine and Verifier across tasks. It asks the kernel
to kill it when the driver dies (a ``kill -9`` of the job leaves no worker behind)."""
from __future__ import annotations

import json
import signal
import sys


def _die_with_parent() -> None:
    import os
    parent = os.getppid()
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)            # PR_SET_PDEATHSIG
    except (OSError, AttributeError):            # not Linux: the worker ends when its socket closes
        return
    if os.getppid() != parent:                   # the driver died before the request took effect
        os._exit(1)


def main(argv: list[str]) -> None:
    from engine.leir.procs import serve

    from .task import Runner
    _die_with_parent()
    runners: dict[str, Runner] = {}

    def handle(request):
        kind, options, spec = request
        if kind != "run":
            return ("error", f"unknown request {kind!r}")
        key = json.dumps(options, sort_keys=True)
        runner = runners.get(key)
        if runner is None:
            runner = runners[key] = Runner(options)
        return ("ok", runner.run(spec))

    try:
        serve(handle, argv[:1])
    finally:
        for r in runners.values():
            r.close()


if __name__ == "__main__":
    main(sys.argv[1:])
