"""Statement-level paired timing, the ``Measurer``'s path for candidates that change one statement.

A one-step rewrite usually changes one top-level statement of its program. When the candidate's
slots (``engine.leir.slots``) are the parent's (as many, each with its statement count and
interface) and exactly one differs by renaming key, that slot's kernel is timed against the
parent's in the paired protocol (``Verifier.measure_paired`` on the two kernels, the sequential
rule deciding on the program's speedup) and the program's speedup follows from the sum model
(``lowering.measure.summodel``): a kernel build and kernel rounds instead of two programs', the
parent's kernels shared by every candidate of a state.

The sum model needs the parent's kernel times: its *profile*, measured once per parent (the
whole parent and each kernel alone, ``lowering.measure.profile``) and remembered in the
evaluation database by the parent's renaming key, target, machine, build and protocol. The
profile also tests the model on that parent: when its kernels do not sum to its whole time
within ``SUM_TOLERANCE``, its candidates are timed whole. So are candidates of a parent with one
slot, candidates of another slot structure or with several changed slots (a fusion, an inlined
intermediate, a layout change that rewrites a writer and its readers), and those whose kernel
could not be timed alone. ``counts`` says how many candidates went which way.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Optional

from .summodel import PROFILE_ROUNDS, SUM_TOLERANCE, holds, profile_figures, record_of

KIND = "profile"


class StatementTimer:
    """Statement-level timings for a ``Measurer`` (its verifier, protocol, machine and database)."""

    def __init__(self, measurer, tolerance: float = SUM_TOLERANCE, rounds: int = PROFILE_ROUNDS):
        self.measurer = measurer
        self.tolerance, self.rounds = float(tolerance), int(rounds)
        self.counts: Counter = Counter()      # "statements", or why a candidate was timed whole (WHOLE)
        self._profiles: dict[str, Optional[dict]] = {}
        db = measurer.cache.database
        if db is not None:
            for r in db.of_kind(KIND):
                if isinstance(r.get("key"), str) and isinstance(r.get("profile"), dict):
                    self._profiles[r["key"]] = r["profile"]

    def options(self) -> dict:
        """What the method adds to a timing's identity (``Measurer.key``)."""
        return {"method": "statements", "sum_tolerance": self.tolerance, "profile_rounds": self.rounds}

    # ------------------------------------------------------------------ the parent's profile

    def profile_key(self, parent_key: str) -> str:
        m = self.measurer
        p = m.protocol
        text = json.dumps([parent_key, m.target, m.machine, m.build_options(),
                           {"rounds": self.rounds, "min_ms": p.min_ms, "best_of": p.best_of}],
                          sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def profile(self, parent, parent_key: str, slots) -> Optional[dict]:
        """{"times": rounds of [whole, kernel...] ms, "runs", "slots"} of ``parent`` (measured on
        first use, then remembered); None when it could not be measured."""
        key = self.profile_key(parent_key)
        if key in self._profiles:
            return self._profiles[key]
        m = self.measurer
        res = m.verifier.measure_alone([parent] + [s.kernel for s in slots], self.rounds, m.protocol.min_ms,
                                       m.protocol.best_of, **m.build_argument())
        m.seconds += float(res.get("seconds") or 0.0)
        prof = None
        if res["ok"]:
            prof = {"times": res["times"], "runs": res["runs"], "slots": [[s.start, s.stop] for s in slots]}
            db = m.cache.database
            if db is not None:
                db.append({"kind": KIND, "key": key, "parent": parent_key, "target": m.target, "machine": m.machine,
                           "profile": prof})
        self._profiles[key] = prof
        return prof

    # ------------------------------------------------------------------ candidates

    def measure(self, parent, candidates: list) -> list:
        """A ``statements`` timing record per candidate the method applies to, None for the others
        (the caller times those whole)."""
        from engine.leir.canonical import renaming_key
        from engine.leir.diagnostics import LeirError
        from engine.leir.slots import changed_slots, split
        out: list = [None] * len(candidates)
        try:
            pslots = split(parent)
        except LeirError:
            pslots = []
        if len(pslots) < 2:
            self.counts["one statement"] += len(candidates)
            return out
        groups: dict[int, list] = {}              # slot -> [(candidate index, its kernel)]
        for i, c in enumerate(candidates):
            try:
                cslots = split(c)
            except LeirError:
                cslots = None
            changed = changed_slots(pslots, cslots) if cslots is not None else None
            if changed is None or len(changed) != 1:
                self.counts["another structure"] += 1
                continue
            groups.setdefault(changed[0], []).append((i, cslots[changed[0]].kernel))
        if not groups:
            return out
        waiting = sum(len(g) for g in groups.values())
        prof = self.profile(parent, renaming_key(parent), pslots)
        if prof is None:
            self.counts["no profile"] += waiting
            return out
        fig = profile_figures(prof["times"])
        if not holds(fig, self.tolerance):
            self.counts["sum model off"] += waiting
            return out
        m = self.measurer
        slots = prof["slots"]
        for slot, members in sorted(groups.items()):
            got = m.paired(pslots[slot].kernel, [k for _, k in members],
                           sum_model={"kernel_ms": fig["kernel_ms"], "slot": slot})
            for (i, _), res in zip(members, got):
                if res is None:
                    self.counts["kernel failed"] += 1
                    continue
                samples, runs = res
                out[i] = record_of(samples["parent"], samples["candidate"], target=m.target, machine=m.machine,
                                   protocol=m.protocol, runs=runs, profile=prof, slot=slot, slots=slots,
                                   tolerance=self.tolerance, build=m.build)
                self.counts["statements"] += 1
        return out
