"""The job's journal: one file per finished task, written atomically, in ``OUT/.journal/``.

The driver alone writes here, once per task, after the task's result came back whole, so a job
killed at any moment (``kill -9`` included) leaves only complete entries; the same command
again skips the tasks already journalled and redoes the rest. ``job.json`` holds the options
that change results: a command with other such options refuses to mix its work into this
journal (``--restart`` clears it).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from engine.leir.diagnostics import LeirError
from engine.leir.files import write_atomic

JOURNAL = ".journal"


class Journal:
    def __init__(self, out: Path):
        self.root = Path(out) / JOURNAL
        self.tasks = self.root / "tasks"

    def open(self, fingerprint: dict, restart: bool = False) -> None:
        """Create or reuse the journal of this job."""
        if restart and self.root.exists():
            shutil.rmtree(self.root)
        self.tasks.mkdir(parents=True, exist_ok=True)
        job = self.root / "job.json"
        text = json.dumps(fingerprint, sort_keys=True, indent=1) + "\n"
        if job.exists():
            old = json.loads(job.read_text())
            if old != fingerprint:
                diff = sorted(k for k in set(old) | set(fingerprint) if old.get(k) != fingerprint.get(k))
                raise LeirError(f"{self.root.parent} holds a job made with other options (they differ in: "
                                f"{', '.join(diff)}); use another output folder or add --restart to start over")
        else:
            write_atomic(job, text)

    def _path(self, tid: str) -> Path:
        return self.tasks / f"{tid}.json"

    def done(self, tid: str) -> bool:
        return self._path(tid).exists()

    def load(self, tid: str) -> dict:
        return json.loads(self._path(tid).read_text())

    def commit(self, tid: str, result: dict) -> None:
        """Record a finished task: the file appears whole or not at all (and survives a crash of
        the machine: it is flushed before it is renamed into place)."""
        path = self._path(tid)
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        with open(tmp, "w") as f:
            f.write(json.dumps(result, separators=(",", ":")))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def clean_partial(self) -> None:
        """Remove temporary files a killed driver left behind."""
        for p in self.tasks.glob(".*.tmp*"):
            p.unlink(missing_ok=True)
