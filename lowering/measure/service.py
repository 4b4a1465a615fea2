"""``Measurer``: the one way any job times programs against each other.

``compare(parent, candidates)`` gives one timing record per candidate (``lowering.measure.stats``:
paired samples, speedup, interval, verdict), measured in interleaved rounds in the Verifier's
worker (built once, warm, under the machine-wide timing lock, the sequential rule stopping each
candidate as soon as it is decided) and remembered in the timing cache: a candidate already
compared with this parent on this machine, target, build and protocol is never timed again, in
this job or in a later one sharing the evaluation database. Candidates that are the same program
modulo renaming are timed once.
"""
from __future__ import annotations

from typing import Optional

from .cache import BUILD_VERSION, TimingCache, timing_key
from .machine import machine_label
from .stats import Protocol, record_of

CHUNK = 8               # most candidates in one interleaved schedule (bounds a request's time and memory)


class Measurer:
    """Paired timings through ``verifier`` (a ``lowering.Verifier``) under ``protocol``."""

    def __init__(self, verifier, protocol: Optional[Protocol] = None, *, cache: Optional[TimingCache] = None,
                 database=None, machine: Optional[dict] = None):
        """``cache``: a ``TimingCache`` to share; else one over ``database`` (an
        ``EvaluationDatabase``; None: in memory only)."""
        self.verifier = verifier
        self.protocol = (protocol or Protocol()).check()
        self.cache = cache if cache is not None else TimingCache(database)
        self._machine = machine
        self.measured = 0          # comparisons timed by this Measurer
        self.rounds = 0            # rounds they took (the sequential rule's saving shows here)
        self.seconds = 0.0

    @property
    def target(self) -> str:
        return self.verifier.target

    @property
    def machine(self) -> dict:
        if self._machine is None:
            self._machine = machine_label(self.target)
        return self._machine

    def build_options(self) -> dict:
        return {"version": BUILD_VERSION, "arch": self.verifier.arch if self.target == "cuda" else None}

    def key(self, parent_key: str, candidate_key: str) -> str:
        return timing_key(parent_key, candidate_key, self.target, self.machine, self.build_options(),
                          self.protocol.to_json())

    def cached(self, parent, candidate) -> Optional[dict]:
        """The cached record of ``candidate`` against ``parent``, if any (nothing is measured)."""
        from engine.leir.canonical import renaming_key
        return self.cache.get(self.key(renaming_key(parent), renaming_key(candidate)))

    def compare(self, parent, candidates: list, reuse: bool = True) -> list:
        """One timing record per candidate (None for one that could not be built or run);
        ``reuse=False``: measure afresh even what the cache holds (a final confirmation)."""
        from engine.leir.canonical import renaming_key
        pkey = renaming_key(parent)
        keys = [renaming_key(c) for c in candidates]
        out: list = [None] * len(candidates)
        todo: dict[str, int] = {}               # candidate key -> first index to measure
        for i, k in enumerate(keys):
            rec = self.cache.get(self.key(pkey, k)) if reuse else None
            if rec is not None:
                out[i] = rec
            elif k not in todo:
                todo[k] = i
        fresh = self._measure(parent, [candidates[i] for i in todo.values()])
        for (k, i), rec in zip(todo.items(), fresh):
            if rec is not None:
                self.cache.put(self.key(pkey, k), pkey, k, rec)
        got = {k: rec for k, rec in zip(todo, fresh)}
        for i, k in enumerate(keys):
            if out[i] is None:
                out[i] = got.get(k)
        return out

    def compare_one(self, parent, candidate) -> Optional[dict]:
        return self.compare(parent, [candidate])[0]

    def _measure(self, parent, candidates: list) -> list:
        out: list = [None] * len(candidates)
        for start in range(0, len(candidates), CHUNK):
            chunk = list(range(start, min(start + CHUNK, len(candidates))))
            while chunk:
                res = self.verifier.measure_paired([parent] + [candidates[i] for i in chunk], self.protocol)
                self.seconds += float(res.get("seconds") or 0.0)
                if res["ok"]:
                    self.rounds += int(res.get("rounds") or 0)
                    for i, s in zip(chunk, res["samples"]):
                        out[i] = record_of(s["parent"], s["candidate"], target=self.target, machine=self.machine,
                                           protocol=self.protocol, runs=res["number"])
                        self.measured += 1
                    break
                bad = res.get("failed")
                if not bad:          # the parent (or the worker) failed: nothing of this chunk can be timed
                    break
                chunk = [i for k, i in enumerate(chunk, 1) if k != bad]
        return out

    def stats(self) -> dict:
        return {"measured": self.measured, "cached": self.cache.hits, "rounds": self.rounds,
                "seconds": round(self.seconds, 3), "protocol": self.protocol.to_json()}


def compare_many(verifier, parent, candidates: list, protocol: Optional[Protocol] = None, **kw) -> list:
    """``Measurer(verifier, protocol, **kw).compare(parent, candidates)``, for one-off use."""
    return Measurer(verifier, protocol, **kw).compare(parent, candidates)
