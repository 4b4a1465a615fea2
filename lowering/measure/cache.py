"""The timing cache: a paired comparison is measured once per (parent, candidate, target, machine,
build options (the named build among them: ``lowering.builds``), protocol) and then read back, in this job and in any later job that shares the
evaluation database (``lowering.measure.database``).

Programs are identified modulo renaming (``engine.leir.canonical.renaming_key``): a renamed program
compiles to the same code. ``BUILD_VERSION`` names what the lowering and the build options make of a
program; bump it when that changes, so that timings of older code are not reused.
"""
from __future__ import annotations

import hashlib
import json
from typing import Optional

# 2: llvm builds for this machine's CPU (-mcpu, LEIR_LLVM_MCPU; was plain llvm, SSE2 without FMA),
# exp in float32 as vector arithmetic, tiled loops whose iterations own their element vectorised /
# parallel: the same program compiles to different code than under 1
# 3: llvm builds without fused multiply-add (the exact build of lowering.builds; AVX2 where 2 had AVX-512 and FMA)
BUILD_VERSION = 3
KIND = "timing"


def timing_key(parent_key: str, candidate_key: str, target: str, machine: dict, build: dict, protocol: dict) -> str:
    text = json.dumps([parent_key, candidate_key, target, machine, build, protocol], sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class TimingCache:
    """Timing records by key, backed by an ``EvaluationDatabase`` (in memory when None)."""

    def __init__(self, database=None):
        self.database = database
        self._by_key: dict[str, dict] = {}
        if database is not None:
            for r in database.of_kind(KIND):
                if isinstance(r.get("record"), dict) and isinstance(r.get("key"), str):
                    self._by_key[r["key"]] = r["record"]
        self.hits = 0
        self.stored = 0

    def get(self, key: str) -> Optional[dict]:
        rec = self._by_key.get(key)
        if rec is not None:
            self.hits += 1
        return rec

    def put(self, key: str, parent_key: str, candidate_key: str, record: dict) -> None:
        if key in self._by_key:
            return
        self._by_key[key] = record
        self.stored += 1
        if self.database is not None:
            self.database.append({"kind": KIND, "key": key, "parent": parent_key, "candidate": candidate_key,
                                  "target": record["target"], "machine": record["machine"],
                                  "build": record.get("build", "exact"), "record": record})

    def __len__(self) -> int:
        return len(self._by_key)
