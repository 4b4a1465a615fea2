"""The mix of a dataset's chat rows, on request (``--mix paper``, ``--one-per-strategy``).

The paper's dataset is 0.51 / 12.17 / 87.32 % easy / medium / difficult strategy uses (each
answer of a multi-answer row counted) and 30 : 70 single- to multi-answer rows (7,537 and
17,416; dataset.md 3.5). Our sampler gives whatever the programs offer, so the mix is reached by
down-sampling the rows that verification and the paper's filters kept: ``select`` removes rows
one at a time, each time from the kind of row (single or multi, and its bucket make-up) whose
removal brings the mix closest to the target, the row removed being the last of that kind in a
seeded hash order; it stops once every share is within ``AIM`` points of its target, or when no
removal brings it closer (then the pool does not allow the target, and the report names what
is short). Deterministic: a pure function of the rows' ids, buckets and the seed.

``one_per_strategy`` keeps one verified row per (program, strategy), drawn by seeded hash, as
the paper samples one variant when a strategy admits several outcomes (dataset.md 1).

Both work on any rows (from source programs or from intermediate states): a row is its ``id``,
its ``program`` and its step's strategy; a chat row is its kind, ids and buckets.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .difficulty import BUCKETS, PAPER_MIX
from .filtering import unit_hash

KINDS = ("single", "multi")
MIXES = {"paper": {"buckets": dict(PAPER_MIX), "kinds": {"single": 30.0, "multi": 70.0}}}
AIM = 1.0           # points: select stops once every share is this close to its target
WITHIN = 3.0        # points: the promise (stats.json says whether it holds)


def one_per_strategy(rows: list[dict], seed: int) -> list[dict]:
    """One row per (program, strategy): the one with the smallest seeded hash; order kept."""
    best: dict[tuple, tuple[float, str]] = {}
    for r in rows:
        key = (r["program"]["leir"], r["step"]["strategy"])
        h = (unit_hash(seed, "one", r["id"]), r["id"])
        if key not in best or h < best[key]:
            best[key] = h
    keep = {v[1] for v in best.values()}
    return [r for r in rows if r["id"] in keep]


@dataclass(frozen=True)
class Item:
    """A chat row as the mix sees it."""
    id: str
    kind: str                   # single | multi
    buckets: tuple              # the bucket of each answer


def shares(items: list[Item]) -> dict:
    """{"buckets": {bucket: %}, "kinds": {kind: %}, "counts": {...}} of a set of chat rows."""
    uses = Counter(b for it in items for b in it.buckets)
    kinds = Counter(it.kind for it in items)
    return {"buckets": _pct(uses, BUCKETS), "kinds": _pct(kinds, KINDS),
            "counts": {"rows": len(items), "single": kinds["single"], "multi": kinds["multi"],
                       **{f"{b}_uses": uses[b] for b in BUCKETS}}}


def _pct(c: Counter, keys) -> dict:
    total = sum(c[k] for k in keys)
    return {k: round(100.0 * c[k] / total, 2) if total else 0.0 for k in keys}


class _State:
    """Running counts of the kept rows, and the squared distance of their mix to the target."""

    def __init__(self, target: dict):
        self.t = target
        self.uses = Counter()
        self.kinds = Counter()

    def move(self, kind: str, make: tuple, sign: int) -> None:
        self.kinds[kind] += sign
        for b, n in zip(BUCKETS, make):
            self.uses[b] += sign * n

    def deviations(self) -> dict:
        nu, nk = sum(self.uses.values()), sum(self.kinds.values())
        out = {}
        for b in BUCKETS:
            out[b] = (100.0 * self.uses[b] / nu if nu else 0.0) - self.t["buckets"][b]
        for k in KINDS:
            out[k] = (100.0 * self.kinds[k] / nk if nk else 0.0) - self.t["kinds"][k]
        return out

    def cost(self) -> float:
        return sum(d * d for d in self.deviations().values())


def select(items: list[Item], name: str, seed: int) -> tuple[set[str], dict]:
    """(ids of the rows kept, the report for stats.json) of the mix ``name`` on ``items``."""
    target = MIXES[name]
    classes: dict[tuple, list[Item]] = {}
    for it in items:
        make = tuple(it.buckets.count(b) for b in BUCKETS)
        classes.setdefault((it.kind, make), []).append(it)
    for members in classes.values():        # the row removed first is the last in a seeded order
        members.sort(key=lambda it: (unit_hash(seed, "mix", it.id), it.id))
    kept = {c: len(m) for c, m in classes.items()}
    state = _State(target)
    for (kind, make), n in kept.items():
        for _ in range(n):
            state.move(kind, make, +1)
    order = sorted(classes)
    while sum(kept.values()) > 1 and max(abs(d) for d in state.deviations().values()) > AIM:
        now, best = state.cost(), None
        for c in order:
            if not kept[c]:
                continue
            state.move(*c, -1)
            cost = state.cost()
            state.move(*c, +1)
            if cost < now and (best is None or cost < best[0]):
                best = (cost, c)
        if best is None:
            break
        kept[best[1]] -= 1
        state.move(*best[1], -1)
    ids = {it.id for c, m in classes.items() for it in m[:kept[c]]}
    after = [it for it in items if it.id in ids]
    return ids, report(name, items, after)


def report(name: str, before: list[Item], after: list[Item]) -> dict:
    """Target and achieved mix, whether every share is within ``WITHIN`` points, and what is
    short when it is not."""
    target = MIXES[name]
    got = shares(after)
    short = [] if after else ["no chat rows to mix"]
    for group in ("buckets", "kinds") if after else ():
        for k, want in target[group].items():
            if got[group][k] < want - WITHIN:
                what = f"{k} uses" if group == "buckets" else f"{k}-answer rows"
                short.append(f"{what}: {got[group][k]}% against {want}% (the pool has too few)")
    return {"target": target, "achieved": {"buckets": got["buckets"], "kinds": got["kinds"]},
            "before": shares(before), "after": got["counts"], "within_points": WITHIN,
            "within": not short, "short": short}


def summary(reports: dict) -> str:
    """One line per split for the log."""
    parts = []
    for split, r in reports.items():
        a = r["achieved"]
        mix = " / ".join(f"{a['buckets'][b]}" for b in reversed(BUCKETS))
        head = (f"{split}: {r['after']['rows']} of {r['before']['counts']['rows']} chat rows, difficult/medium/easy "
                f"{mix} %, single:multi {a['kinds']['single']}:{a['kinds']['multi']}")
        parts.append(head + (f", within {r['within_points']:g} points of the target" if r["within"]
                             else "; short: " + "; ".join(r["short"])))
    return "\n".join(parts)
