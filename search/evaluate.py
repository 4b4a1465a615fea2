"""Verification and measurement of candidates, cached modulo renaming.

Every candidate is verified against the *original* program (not its parent), so errors
cannot accumulate unseen along a trajectory: bitwise-exact when every step of its path is
bitwise, strict otherwise (free-form programs: strict). Verified candidates are timed with
``Verifier.measure`` (warm-up, repeats, median); the number of runs per repeat is chosen
from the original's run time so that each repeat lasts ``min_repeat_ms``. Builds may run in
parallel (``workers``); timings hold the Verifier's machine-wide lock and never overlap.
"""
from __future__ import annotations

import math
import statistics
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Optional

from engine.leir.diagnostics import LeirError

ACCEPTED = "accepted"


@dataclass
class Outcome:
    """What verifying (and measuring) one candidate state gave."""

    key: str
    status: str                       # accepted | a Verdict reason | "measure failed"
    message: Optional[str] = None
    tolerance: Optional[str] = None
    max_abs_err: Optional[float] = None
    median_ms: Optional[float] = None
    spread_ms: Optional[float] = None
    times_ms: list = field(default_factory=list)
    speedup: Optional[float] = None
    seconds: float = 0.0

    @property
    def accepted(self) -> bool:
        return self.status == ACCEPTED

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, d: dict) -> "Outcome":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def path_tolerance(exactness: list[str]) -> str:
    """``exact`` when every step of a path is bitwise, else ``strict``."""
    return "exact" if exactness and all(e == "bitwise" for e in exactness) else "strict"


class Evaluator:
    """Verifies and times candidate programs against one original on one target."""

    def __init__(self, original, target: str = "llvm", trials: int = 3, timeout: float = 300.0,
                 workers: int = 1, seed: int = 0, min_repeat_ms: float = 2.0, repeat: int = 7,
                 recorded: Optional[dict] = None, log=None, verifier=None):
        """``verifier``: a ``lowering.Verifier`` to share (its worker processes stay warm across
        runs; the caller closes it); by default the evaluator makes and closes its own."""
        from lowering import Verifier
        self.original = original
        self.target = target
        self.workers = workers
        self.min_repeat_ms = min_repeat_ms
        self._own = verifier is None
        if verifier is None:
            verifier = Verifier(target=target, trials=trials, timeout=timeout, seed=seed, workers=workers,
                                warmup=3, number=1, repeat=repeat, log=log)
        elif verifier.target != target:
            raise LeirError(f"the shared verifier is for target '{verifier.target}', the search for '{target}'")
        self.verifier = verifier
        self.cache: dict[str, Outcome] = {}
        self.recorded: dict[str, Outcome] = dict(recorded or {})   # outcomes of an interrupted run
        self.baseline_ms: Optional[float] = None
        self.baseline: Optional[dict] = None

    # ------------------------------------------------------------------ the original

    def measure_original(self, recorded: Optional[dict] = None) -> dict:
        """Time the original (choosing the runs per repeat from a first probe); raises
        ``LeirError`` when it cannot be measured on this target (e.g. no CUDA device)."""
        if recorded:
            self.verifier.number = int(recorded.get("number", 1))
            self.baseline, self.baseline_ms = recorded, float(recorded["median_ms"])
            return recorded
        probe = self.verifier.measure(self.original)
        if not probe.ok:
            raise LeirError(f"cannot measure the original program on target '{self.target}': "
                            f"{probe.reason}: {probe.message}")
        self.verifier.number = max(1, min(1000, math.ceil(self.min_repeat_ms / max(probe.median_ms, 1e-6))))
        m = self.verifier.measure(self.original)
        if not m.ok:
            raise LeirError(f"cannot measure the original program on target '{self.target}': {m.reason}: {m.message}")
        self.baseline_ms = m.median_ms
        self.baseline = {"median_ms": m.median_ms, "spread_ms": m.spread_ms, "times_ms": m.times_ms,
                         "number": self.verifier.number, "repeat": self.verifier.repeat,
                         "warmup": self.verifier.warmup, "target": self.target}
        return self.baseline

    # ------------------------------------------------------------------ candidates

    def known(self, key: str) -> Optional[Outcome]:
        return self.cache.get(key)

    def evaluate(self, items: list[tuple]) -> list[tuple[Outcome, bool]]:
        """``items``: (program, renaming key, tolerance). Returns (outcome, fresh) per item: a
        state already evaluated in this run comes from the cache (fresh False)."""
        out: list = [None] * len(items)
        todo = []
        for i, (prog, key, tol) in enumerate(items):
            if key in self.cache:
                out[i] = (self.cache[key], False)
            elif key in self.recorded:
                self.cache[key] = self.recorded.pop(key)
                out[i] = (self.cache[key], True)
            else:
                todo.append(i)
        # verification: in parallel when there are several workers
        if todo:
            jobs = [(items[i][0], items[i][2]) for i in todo]
            if self.workers > 1 and len(jobs) > 1:
                with ThreadPoolExecutor(self.workers) as pool:
                    verdicts = list(pool.map(lambda j: self.verifier.verify(self.original, j[0], j[1]), jobs))
            else:
                verdicts = [self.verifier.verify(self.original, p, t) for p, t in jobs]
            for i, v in zip(todo, verdicts):
                prog, key, tol = items[i]
                o = Outcome(key, ACCEPTED if v.equal else v.reason, v.message, tol, v.max_abs_err, seconds=v.seconds)
                if v.equal:                     # timings: one at a time (the Verifier's lock)
                    m = self.verifier.measure(prog)
                    o.seconds += m.seconds
                    if m.ok:
                        o.median_ms, o.spread_ms, o.times_ms = m.median_ms, m.spread_ms, m.times_ms
                        o.speedup = self.baseline_ms / m.median_ms if m.median_ms > 0 else None
                    else:
                        o.status, o.message = "measure failed", f"{m.reason}: {m.message}"
                self.cache[key] = o
                out[i] = (o, True)
        return out

    def verify_only(self, program, tolerance: str):
        return self.verifier.verify(self.original, program, tolerance)

    def confirm(self, programs: list, rounds: int = 3) -> list[dict]:
        """Re-time the original and each program in alternation, ``rounds`` times, so that
        load on the machine hits both alike; speedup = median of the original's medians over
        the median of the program's."""
        base, per = [], [[] for _ in programs]
        for _ in range(rounds):
            m = self.verifier.measure(self.original)
            if m.ok:
                base.append(m.median_ms)
            for i, p in enumerate(programs):
                m = self.verifier.measure(p)
                if m.ok:
                    per[i].append(m.median_ms)
        out = []
        b = statistics.median(base) if base else None
        for ms in per:
            med = statistics.median(ms) if ms else None
            out.append({"original_ms": b, "median_ms": med, "rounds": rounds, "original_medians_ms": base,
                        "medians_ms": ms, "speedup": (b / med) if (b and med) else None})
        return out

    def close(self) -> None:
        if self._own:
            self.verifier.close()
