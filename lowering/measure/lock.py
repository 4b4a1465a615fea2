"""The machine-wide timing lock: whoever times a program (the Verifier's single measurements,
``lowering.measure``'s interleaved schedules) holds it, so that two timings never overlap."""
from __future__ import annotations

import os
import tempfile


class TimingLock:
    """A machine-wide lock (``flock`` on a file in the temp folder): timings never overlap."""

    def __init__(self, target: str):
        self.path = os.path.join(tempfile.gettempdir(), f"leir-engine-timing-{target}.lock")
        self.fd = None

    def __enter__(self):
        import fcntl
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        import fcntl
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
