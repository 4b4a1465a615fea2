"""The evaluation database: one append-only JSON-lines file of what was measured, shared by every
job on a machine (searches, datasets, cost-model training) so that nothing is measured twice.

Each line is one record with a ``kind`` (``timing``: a paired comparison, ``lowering.measure.cache``;
the search adds ``original`` and ``outcome`` records, ``search.run_database``), written once, under an
exclusive lock, and flushed: a killed writer loses at most the line it was writing; a torn last line
is skipped when read and cut off before the next append; several processes may append at once.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator, Optional


class EvaluationDatabase:
    """Records in memory, appended to ``path`` when one is given (read first when it exists)."""

    def __init__(self, path: Optional[str] = None):
        self.path = str(path) if path else None
        self.records: list[dict] = []
        self.torn = 0                 # unreadable last lines skipped
        if self.path and Path(self.path).exists():
            self.records = list(self._read(Path(self.path)))

    def _read(self, p: Path) -> Iterator[dict]:
        from engine.leir.files import json_lines
        for _, d in json_lines(p, torn_tail=True):
            if d is None:                         # a line cut short by a killed writer
                self.torn += 1
            elif isinstance(d, dict):
                yield d

    def append(self, record: dict) -> dict:
        """Commit one record: in memory and, with a path, one line appended and flushed."""
        self.records.append(record)
        if self.path:
            import fcntl
            p = Path(self.path)
            if p.parent and not p.parent.exists():
                p.parent.mkdir(parents=True, exist_ok=True)
            line = (json.dumps(record, sort_keys=True) + "\n").encode()
            with open(p, "ab+") as f:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)
                try:
                    size = f.seek(0, os.SEEK_END)
                    if size:
                        f.seek(-1, os.SEEK_END)
                        if f.read(1) != b"\n":       # a torn last line (never committed): cut it off
                            f.seek(0)
                            f.truncate(f.read().rfind(b"\n") + 1)
                    f.seek(0, os.SEEK_END)
                    f.write(line)
                    f.flush()
                    os.fsync(f.fileno())
                finally:
                    fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        return record

    def of_kind(self, kind: Optional[str]) -> Iterator[dict]:
        """The records of one kind (None: lines without a kind, older formats)."""
        return (r for r in self.records if r.get("kind") == kind)
