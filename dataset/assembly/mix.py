"""The mix of a dataset's chat rows, on request (``--mix paper``, ``--one-per-strategy``).

The paper's dataset is 0.51 / 12.17 / 87.32 % easy / medium / difficult strategy uses (each
answer of a multi-answer row counted) and 30 : 70 single- to multi-answer rows (7,537 and
17,416; dataset.md 3.5). Our sampler gives whatever the programs offer, so the mix is reached by
down-sampling the rows that verification and the paper's filters kept: ``select`` keeps the most
rows whose every share is within ``AIM`` points of its target (when no subset is, the pool does
not allow the target: it keeps the subset closest to it and the report names what is short).
Deterministic: a pure function of the rows' ids, buckets and the seed.

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
AIM = 2.0           # points: select keeps the most rows whose every share is this close to its target
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


def _allocate(avail: dict, n: int, uses: Counter, target: dict) -> dict | None:
    """How many single rows of each bucket (at most ``avail``) to add to multi-answer rows whose
    answers are ``uses`` so that ``n`` single rows bring the bucket shares closest to ``target``."""
    total = sum(uses.values()) + n
    want = {b: max(0, round(target[b] / 100.0 * total) - uses[b]) for b in BUCKETS}
    take = {b: min(avail[b], want[b]) for b in BUCKETS}
    left = n - sum(take.values())
    for b in sorted(BUCKETS, key=lambda x: target[x]):     # too many wanted: give back, smallest target first
        back = min(-left, take[b]) if left < 0 else 0
        take[b] -= back
        left += back
    for b in sorted(BUCKETS, key=lambda x: -target[x]):     # too few: fill from the largest target
        extra = min(left, avail[b] - take[b])
        take[b] += extra
        left -= extra
    return take if left == 0 else None


def _deviation(kinds: Counter, uses: Counter, target: dict) -> float:
    """The largest distance, in points, of a mix from its target."""
    nu, nk = sum(uses.values()), sum(kinds.values())
    devs = [abs((100.0 * uses[b] / nu if nu else 0.0) - target["buckets"][b]) for b in BUCKETS]
    devs += [abs((100.0 * kinds[k] / nk if nk else 0.0) - target["kinds"][k]) for k in KINDS]
    return max(devs)


def select(items: list[Item], name: str, seed: int) -> tuple[set[str], dict]:
    """(ids of the rows kept, the report for stats.json) of the mix ``name`` on ``items``.

    The most rows whose mix is within ``AIM`` points of the target, else the mix closest to it:
    multi-answer rows are taken in order of their share of difficult answers (the target's
    largest), for each count of them the single rows that bring the mix closest (by bucket, up
    to what the pool has, for a single:multi ratio near the target's); within a bucket or a make-up
    the rows kept are the first in a seeded hash order."""
    target = MIXES[name]
    rank = {it.id: (unit_hash(seed, "mix", it.id), it.id) for it in items}
    singles = {b: sorted((it for it in items if it.kind == "single" and it.buckets[0] == b), key=lambda it: rank[it.id])
               for b in BUCKETS}
    avail = {b: len(v) for b, v in singles.items()}
    top = max(BUCKETS, key=lambda b: target["buckets"][b])
    multis = sorted((it for it in items if it.kind == "multi"),
                    key=lambda it: (-it.buckets.count(top) / len(it.buckets), -len(it.buckets), rank[it.id]))
    share = target["kinds"]["single"] / 100.0
    best = None                             # ((within, rows, -deviation), k, allocation)
    uses = Counter()
    for k in range(len(multis) + 1):
        if k:
            uses.update(multis[k - 1].buckets)
        centre = round(k * share / (1 - share)) if k else sum(avail.values())
        spread = max(2, round(0.05 * centre))
        for n in range(max(0, centre - spread), min(sum(avail.values()), centre + spread) + 1):
            if n + k == 0:
                continue
            take = _allocate(avail, n, uses, target["buckets"])
            if take is None:
                continue
            dev = _deviation(Counter(single=n, multi=k), uses + Counter(take), target)
            key = (dev <= AIM, n + k if dev <= AIM else -dev, n + k)
            if best is None or key > best[0]:
                best = (key, k, take)
    ids = set()
    if best is not None:
        _, k, take = best
        ids = {it.id for it in multis[:k]} | {it.id for b in BUCKETS for it in singles[b][:take[b]]}
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
