"""Verification and paired timing of candidates, cached modulo renaming.

Every candidate is verified against the *original* program (not its parent), so errors cannot
accumulate unseen along a trajectory: bitwise-exact when every step of its path is bitwise,
strict otherwise (free-form programs: strict). Verified candidates are timed against the node
they were proposed at (``lowering.measure.Measurer``: interleaved rounds, a sign-test interval,
the sequential rule, the timing cache of the evaluation database), so what a search decides on
is a paired verdict against the parent (``faster``, ``slower`` or ``tie`` beyond the noise
floor), never one median against another taken at another moment. A candidate's speedup over
the original is its parent's times its ratio over the parent (``speedup``), with the product of
the intervals along its path (``speedup_ci``); the final confirmation times the best candidates
against the original itself.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Optional

from engine.leir.diagnostics import LeirError

ACCEPTED = "accepted"


@dataclass
class CandidateOutcome:
    """What verifying (and timing) one candidate state gave."""

    key: str
    status: str                       # accepted | a Verdict reason | "measure failed"
    message: Optional[str] = None
    tolerance: Optional[str] = None
    max_abs_err: Optional[float] = None
    median_ms: Optional[float] = None     # its median in the paired comparison
    spread_ms: Optional[float] = None
    times_ms: list = field(default_factory=list)
    speedup: Optional[float] = None       # over the original: the parent's speedup x ratio
    seconds: float = 0.0
    parent: Optional[str] = None          # renaming key of the program it was timed against
    ratio: Optional[float] = None         # speedup over that parent (median of the paired ratios)
    ci: Optional[list] = None             # the ratio's interval
    verdict: Optional[str] = None         # faster | slower | tie, against the parent
    speedup_ci: Optional[list] = None     # over the original: the product of the intervals along the path
    timing: Optional[dict] = None         # the paired record (lowering.measure.stats)

    @property
    def accepted(self) -> bool:
        return self.status == ACCEPTED

    @property
    def faster(self) -> bool:
        """Significantly faster than the program it was timed against."""
        return self.verdict == "faster"

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, d: dict) -> "CandidateOutcome":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def path_tolerance(exactness: list[str]) -> str:
    """``exact`` when every step of a path is bitwise, else ``strict``."""
    return "exact" if exactness and all(e == "bitwise" for e in exactness) else "strict"


def chain(parent_speedup: float, parent_ci: Optional[list], ratio: float, ci: list) -> tuple[float, list]:
    """(speedup, interval) over the original of a state reached from a parent by one timed edge."""
    lo, hi = parent_ci or [1.0, 1.0]
    return parent_speedup * ratio, [lo * ci[0], hi * ci[1]]


class CandidateEvaluator:
    """Verifies candidates against one original and times them against their parent, on one target."""

    def __init__(self, original, target: str = "llvm", trials: int = 3, timeout: float = 300.0,
                 workers: int = 1, seed: int = 0, min_repeat_ms: float = 2.0, repeat: int = 7,
                 recorded: Optional[dict] = None, log=None, verifier=None, protocol=None, database=None,
                 timed_build: str = "exact", threads: Optional[int] = None):
        """``verifier``: a ``lowering.Verifier`` to share (its worker processes stay warm across
        runs; the caller closes it); by default the evaluator makes and closes its own.
        ``protocol``: the paired-timing protocol (``lowering.measure.Protocol``); ``database``: the
        evaluation database whose timing cache it reads and extends (None: in memory);
        ``timed_build``: the build timed (``lowering.builds``; fast: every program's fast build is
        checked against its exact build before it is timed, a mismatch failing its timing; an own
        verifier checks it at verification too). A shared verifier may time another build by
        default: every timing here names this one. ``threads``: the thread count candidates run on
        (``Verifier(threads=...)``; None: the environment's); a shared verifier must run on as many."""
        from lowering import Verifier
        from lowering.measure import Measurer, TimingCache
        self.original = original
        self.target = target
        self.workers = workers
        self.min_repeat_ms = min_repeat_ms
        self._own = verifier is None
        if verifier is None:
            verifier = Verifier(target=target, trials=trials, timeout=timeout, seed=seed, workers=workers,
                                warmup=3, number=1, repeat=repeat, log=log, timed_build=timed_build, threads=threads)
        elif verifier.target != target:
            raise LeirError(f"the shared verifier is for target '{verifier.target}', the search for '{target}'")
        else:
            from lowering.measure.machine import cpu_threads
            wanted = threads if threads is not None else cpu_threads()
            if getattr(verifier, "threads", wanted) != wanted:
                how = "--threads" if threads is not None else "--threads not given: TVM's default, lowering.measure.machine.cpu_threads"
                raise LeirError(f"the shared verifier runs programs on {verifier.threads} thread(s), the search on "
                                f"{wanted} ({how})")
        self.verifier = verifier
        self.measurer = Measurer(verifier, protocol, cache=TimingCache(database), build=timed_build)
        self.protocol = self.measurer.protocol
        self.cache: dict[str, CandidateOutcome] = {}          # verifications, by state key
        self.recorded: dict[str, CandidateOutcome] = dict(recorded or {})   # outcomes of an interrupted run
        self.baseline_ms: Optional[float] = None
        self.baseline: Optional[dict] = None

    # ------------------------------------------------------------------ the original

    def measure_original(self, recorded: Optional[dict] = None) -> dict:
        """Time the original alone (its absolute time, for the record; choosing the runs per
        repeat from a first probe); raises ``LeirError`` when it cannot be measured on this target
        (e.g. no CUDA device)."""
        if recorded:
            self.verifier.number = int(recorded.get("number", 1))
            self.baseline, self.baseline_ms = recorded, float(recorded["median_ms"])
            return recorded
        probe = self.verifier.measure(self.original, **self.measurer.build_argument())
        if not probe.ok:
            raise LeirError(f"cannot measure the original program on target '{self.target}': "
                            f"{probe.reason}: {probe.message}")
        self.verifier.number = max(1, min(1000, math.ceil(self.min_repeat_ms / max(probe.median_ms, 1e-6))))
        m = self.verifier.measure(self.original, **self.measurer.build_argument())
        if not m.ok:
            raise LeirError(f"cannot measure the original program on target '{self.target}': {m.reason}: {m.message}")
        self.baseline_ms = m.median_ms
        self.baseline = {"median_ms": m.median_ms, "spread_ms": m.spread_ms, "times_ms": m.times_ms,
                         "number": self.verifier.number, "repeat": self.verifier.repeat,
                         "warmup": self.verifier.warmup, "target": self.target, "build": m.build}
        return self.baseline

    # ------------------------------------------------------------------ candidates

    def known(self, key: str) -> Optional[CandidateOutcome]:
        return self.cache.get(key)

    def recorded_outcome(self, key: str) -> Optional[CandidateOutcome]:
        """An interrupted run's outcome of ``key`` (taken: a resumed run uses it once)."""
        return self.recorded.pop(key, None)

    def verify(self, original, program, tolerance: str):
        """A ``Verdict`` of ``program`` against ``original`` (the kernel search: a variant against its
        slot's kernel)."""
        return self.verifier.verify(original, program, tolerance)

    def evaluate(self, items: list[tuple], parent=None) -> list[tuple[CandidateOutcome, bool]]:
        """``items``: (program, renaming key, tolerance); ``parent``: the node they were proposed at
        (``search.space.Node``; None: the root). Returns (outcome, fresh) per item: verified against
        the original (a state verified before in this run comes from the cache: fresh False), and,
        when equal, timed against the parent."""
        out: list = [None] * len(items)
        todo = []
        for i, (_prog, key, _tol) in enumerate(items):
            if key in self.cache:
                out[i] = (self.cache[key], False)
            elif key in self.recorded:
                self.cache[key] = self.recorded.pop(key)
                out[i] = (self.cache[key], True)
            else:
                todo.append(i)
        if todo:                      # verification: in parallel when there are several workers
            jobs = [(items[i][0], items[i][2]) for i in todo]
            if self.workers > 1 and len(jobs) > 1:
                with ThreadPoolExecutor(self.workers) as pool:
                    verdicts = list(pool.map(lambda j: self.verifier.verify(self.original, j[0], j[1]), jobs))
            else:
                verdicts = [self.verifier.verify(self.original, p, t) for p, t in jobs]
            for i, v in zip(todo, verdicts):
                prog, key, tol = items[i]
                o = CandidateOutcome(key, ACCEPTED if v.equal else v.reason, v.message, tol, v.max_abs_err, seconds=v.seconds)
                self.cache[key] = o
                out[i] = (o, True)
        return self._time(items, out, parent)

    def _time(self, items, out, parent) -> list[tuple[CandidateOutcome, bool]]:
        """Each accepted outcome timed against ``parent`` (one interleaved schedule for all of them;
        an outcome recorded against this parent is reused)."""
        from engine.leir.canonical import renaming_key
        pprog = parent.program if parent is not None else self.original
        pkey = parent.key if parent is not None else renaming_key(self.original)
        psp = parent.speedup if parent is not None else 1.0
        pci = getattr(parent, "speedup_ci", None) if parent is not None else None
        need = [i for i, (o, _) in enumerate(out) if o.accepted and not (o.parent == pkey and o.timing)]
        records = self.measurer.compare(pprog, [items[i][0] for i in need]) if need else []
        timed = dict(zip(need, records))
        result = []
        for i, (o, fresh) in enumerate(out):
            if i in timed:
                rec = timed[i]
                if rec is None:
                    o = replace(o, status="measure failed", message="the paired timing failed (build or run)")
                else:
                    sp, sci = chain(psp or 1.0, pci, rec["speedup"], rec["ci"])
                    o = replace(o, parent=pkey, ratio=rec["speedup"], ci=list(rec["ci"]), verdict=rec["verdict"],
                                median_ms=rec["candidate_ms"], times_ms=list(rec["samples"]["candidate"]),
                                speedup=sp, speedup_ci=sci, timing=rec)
                self.cache[o.key] = o
            result.append((o, fresh))
        return result

    def time_alone(self, program):
        """A ``Measurement`` of one program alone (warm-up, repeats, median): what weighs the kernel
        search's slots against each other; every comparison is paired (``evaluate``)."""
        return self.verifier.measure(program, **self.measurer.build_argument())

    def verify_only(self, program, tolerance: str):
        return self.verifier.verify(self.original, program, tolerance)

    def confirm(self, programs: list) -> list[Optional[dict]]:
        """The original and ``programs`` timed afresh in interleaved rounds: one paired record per
        program against the original (None: it could not be timed). Not read from the timing cache:
        the figures a search reports are measured at its end, all together."""
        return self.measurer.compare(self.original, programs, reuse=False) if programs else []

    def close(self) -> None:
        if self._own:
            self.verifier.close()
