"""``Measurer``: the one way any job times programs against each other.

``compare(parent, candidates)`` gives one timing record per candidate (``lowering.measure.stats``:
paired samples, speedup, interval, verdict), measured in interleaved rounds in the Verifier's
worker (built once, warm, under the machine-wide timing lock, the sequential rule stopping each
candidate as soon as it is decided) and remembered in the timing cache: a candidate already
compared with this parent on this machine, target, build and protocol is never timed again, in
this job or in a later one sharing the evaluation database. Candidates that are the same program
modulo renaming are timed once.

``build``: the named build timed (``lowering.builds``; default the Verifier's ``timed_build``):
``exact`` or ``fast``, whose every program is first checked against its exact build at the strict
tolerance in the worker (``lowering.fastcheck``; a mismatch is a candidate that could not be timed).
Every record names its build, and the cache keys on it, so exact and fast timings never mix.

``statements=True``: a candidate that changes one statement of its parent is timed by its changed
slot kernel against the parent's, its speedup by the sum model (``lowering.measure.statements``,
records of method ``statements``); the others are timed whole as above.
"""
from __future__ import annotations

from typing import Optional

from ..builds import EXACT, build_named
from .cache import BUILD_VERSION, TimingCache, timing_key
from .machine import machine_label
from .stats import Protocol, record_of

CHUNK = 8               # most candidates in one interleaved schedule (bounds a request's time and memory)


class Measurer:
    """Paired timings through ``verifier`` (a ``lowering.Verifier``) under ``protocol``."""

    def __init__(self, verifier, protocol: Optional[Protocol] = None, *, cache: Optional[TimingCache] = None,
                 database=None, machine: Optional[dict] = None, statements: bool = False,
                 build: Optional[str] = None):
        """``cache``: a ``TimingCache`` to share; else one over ``database`` (an
        ``EvaluationDatabase``; None: in memory only); ``statements``: time one-statement changes
        by their slot kernels (``lowering.measure.statements``); ``build``: the named build timed
        (None: the verifier's ``timed_build``, exact when it has none)."""
        self.verifier = verifier
        self.build = build_named(build or getattr(verifier, "timed_build", EXACT), "timed build").name
        self.protocol = (protocol or Protocol()).check()
        self.cache = cache if cache is not None else TimingCache(database)
        self._machine = machine
        self.measured = 0          # comparisons timed by this Measurer
        self.rounds = 0            # rounds they took (the sequential rule's saving shows here)
        self.seconds = 0.0
        self.by_statements = None
        if statements:
            from .statements import StatementTimer
            self.by_statements = StatementTimer(self)

    @property
    def target(self) -> str:
        return self.verifier.target

    @property
    def machine(self) -> dict:
        """What its records are labelled with: this machine, and the thread count the verifier's
        programs run on (``Verifier.threads``; a stand-in without one: this process's)."""
        if self._machine is None:
            self._machine = machine_label(self.target, getattr(self.verifier, "threads", None))
        return self._machine

    def build_options(self) -> dict:
        """What the build makes of a program beyond its text and the machine: the lowering's
        version, the CUDA arch, an llvm CPU chosen by ``LEIR_LLVM_MCPU`` (unset: this machine's own
        CPU, which the machine label already names) and the named build unless it is ``exact``
        (every timing before builds were named timed the exact build: their keys stay valid)."""
        import os

        from ..run import MCPU_ENV
        mcpu = os.environ.get(MCPU_ENV, "").strip() if self.target != "cuda" else ""
        return {"version": BUILD_VERSION, "arch": self.verifier.arch if self.target == "cuda" else None,
                **({"mcpu": mcpu} if mcpu else {}), **({"build": self.build} if self.build != EXACT else {})}

    def build_argument(self) -> dict:
        """``build=`` for the verifier's ``measure_*`` when it is not the verifier's own timed build
        (so a verifier that names no builds, such as a test's stand-in, is asked as before)."""
        return {"build": self.build} if self.build != getattr(self.verifier, "timed_build", EXACT) else {}

    def key(self, parent_key: str, candidate_key: str) -> str:
        protocol = self.protocol.to_json()
        if self.by_statements is not None:
            protocol |= self.by_statements.options()
        return timing_key(parent_key, candidate_key, self.target, self.machine, self.build_options(), protocol)

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
        for (k, _i), rec in zip(todo.items(), fresh):
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
        if self.by_statements is not None:
            out = self.by_statements.measure(parent, candidates)
        whole = [i for i, rec in enumerate(out) if rec is None]
        for i, got in zip(whole, self.paired(parent, [candidates[i] for i in whole])):
            if got is not None:
                samples, runs = got
                out[i] = record_of(samples["parent"], samples["candidate"], target=self.target, machine=self.machine,
                                   protocol=self.protocol, runs=runs, build=self.build)
        return out

    def paired(self, parent, candidates: list, sum_model: Optional[dict] = None) -> list:
        """Per candidate, (its paired samples {"parent", "candidate"}, runs per mean) or None when
        it could not be built or run: interleaved rounds in chunks of ``CHUNK`` (``sum_model``: see
        ``Verifier.measure_paired``)."""
        out: list = [None] * len(candidates)
        for start in range(0, len(candidates), CHUNK):
            chunk = list(range(start, min(start + CHUNK, len(candidates))))
            while chunk:
                res = self.verifier.measure_paired([parent] + [candidates[i] for i in chunk], self.protocol,
                                                   **({"sum_model": sum_model} if sum_model else {}),
                                                   **self.build_argument())
                self.seconds += float(res.get("seconds") or 0.0)
                if res["ok"]:
                    self.rounds += int(res.get("rounds") or 0)
                    numbers = res.get("numbers") or [res["number"]] * (len(chunk) + 1)
                    for k, (i, s) in enumerate(zip(chunk, res["samples"]), 1):
                        out[i] = (s, numbers[k])          # the candidate's runs per mean
                        self.measured += 1
                    break
                bad = res.get("failed")
                if not bad:          # the parent (or the worker) failed: nothing of this chunk can be timed
                    break
                chunk = [i for k, i in enumerate(chunk, 1) if k != bad]
        return out

    def stats(self) -> dict:
        out = {"measured": self.measured, "cached": self.cache.hits, "rounds": self.rounds,
               "seconds": round(self.seconds, 3), "protocol": self.protocol.to_json(), "build": self.build}
        if self.by_statements is not None:
            out["methods"] = dict(sorted(self.by_statements.counts.items()))
        return out


def compare_many(verifier, parent, candidates: list, protocol: Optional[Protocol] = None, **kw) -> list:
    """``Measurer(verifier, protocol, **kw).compare(parent, candidates)``, for one-off use."""
    return Measurer(verifier, protocol, **kw).compare(parent, candidates)
