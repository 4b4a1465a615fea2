"""Strategy filtering as the paper prescribes (dataset.md 3, project decision) and the
assembly of multi-answer rows (dataset.md 4.3), both seeded and deterministic.

Single-answer rows: medium and difficult strategies are kept; easy simplification-oriented
strategies are kept at 20% and their expansion counterparts at 4%, decided per row by hashing
(original IR, transformed IR, seed) against the rate, so a row's fate depends on nothing else.

Multi-answer rows: per program, a seeded number of seeded subsets of its verified rows
(duplicate subsets skipped); then easy items are dropped, medium items are capped at 2,000 per
strategy over the whole dataset (in program order, counting the items of rows that are kept),
difficult items are kept; a row survives with at least two items and unless another row of
the same program has the same sorted list of transformed IRs; items are renumbered and the
prompt's "at least {k}" and the trace are rebuilt from the survivors.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

SIMPLIFICATION = ("factorization", "cancellation", "together", "powsimp", "logsimp", "collect", "operator_fission")
EXPANSION = ("expand_factorization", "expand_cancellation", "apart", "expand_powsimp", "expand_log", "expand_collect")
RATES = {"simplification": 0.20, "expansion": 0.04}     # paper 3.4: kept fraction of easy single rows
MEDIUM_CAP = 2000                                       # paper 3.4: medium items per strategy, multi rows


def easy_group(strategy: str) -> str:
    """simplification | expansion (dataset.md 3.3 grouping; an easy strategy in neither list is
    treated as an expansion, the stricter rate)."""
    return "simplification" if strategy in SIMPLIFICATION else "expansion"


def unit_hash(*parts) -> float:
    """A number in [0, 1) from the parts' text (seeded sampling without a generator's state)."""
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2.0 ** 64


def keep_single(bucket: str, strategy: str, original: str, transformed: str, seed: int) -> bool:
    if bucket != "easy":
        return True
    return unit_hash(original, transformed, seed) < RATES[easy_group(strategy)]


def multi_subsets(n: int, seed: int, key: str, max_rows: int, max_items: int) -> list[list[int]]:
    """Seeded subsets (sorted index lists) of ``n`` items: a repeat count in [2, min(n, max_rows)],
    each subset of a size in [2, min(n, max_items)]; duplicate subsets are skipped."""
    if n < 2:
        return []
    rng = random.Random(f"{seed}:multi:{key}")
    repeats = rng.randint(2, max(2, min(n, max_rows)))
    seen, out = set(), []
    for _ in range(repeats):
        k = rng.randint(2, max(2, min(n, max_items)))
        sub = tuple(sorted(rng.sample(range(n), k)))
        if sub in seen:
            continue
        seen.add(sub)
        out.append(list(sub))
    return out


@dataclass
class MultiFilter:
    """The multi-answer filter with its running per-strategy medium counts."""

    cap: int = MEDIUM_CAP
    medium: dict = field(default_factory=dict)
    items_in: dict = field(default_factory=dict)        # bucket -> items before filtering
    items_kept: dict = field(default_factory=dict)      # bucket -> items in kept rows
    rows_in: int = 0
    rows_kept: int = 0
    dropped: dict = field(default_factory=dict)         # why rows were dropped -> count

    def filter_program(self, subsets: list[list[dict]]) -> list[list[dict]]:
        """Filter one program's candidate rows (each a list of items with ``bucket``, ``strategy``,
        ``transformed``), returning the kept rows' items in order."""
        kept_rows, seen = [], set()
        for items in subsets:
            self.rows_in += 1
            for it in items:
                self.items_in[it["bucket"]] = self.items_in.get(it["bucket"], 0) + 1
            pending: dict[str, int] = {}
            keep = []
            for it in items:
                b, s = it["bucket"], it["strategy"]
                if b == "easy":
                    continue
                if b == "medium":
                    if self.medium.get(s, 0) + pending.get(s, 0) >= self.cap:
                        continue
                    pending[s] = pending.get(s, 0) + 1
                keep.append(it)
            if len(keep) < 2:
                self.dropped["fewer than 2 items"] = self.dropped.get("fewer than 2 items", 0) + 1
                continue
            sig = tuple(sorted(it["transformed"] for it in keep))
            if sig in seen:
                self.dropped["duplicate of another row"] = self.dropped.get("duplicate of another row", 0) + 1
                continue
            seen.add(sig)
            for s, n in pending.items():
                self.medium[s] = self.medium.get(s, 0) + n
            for it in keep:
                self.items_kept[it["bucket"]] = self.items_kept.get(it["bucket"], 0) + 1
            self.rows_kept += 1
            kept_rows.append(keep)
        return kept_rows
