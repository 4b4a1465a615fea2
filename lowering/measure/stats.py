"""Paired timings to a verdict: the sign-test interval of a median ratio, the noise floor, and the
sequential rule that stops timing a candidate as soon as its verdict is clear.

Round i of an interleaved schedule gives a pair (parent_i, candidate_i). The speedup is the median
of the ratios parent_i / candidate_i (on logarithms, so comparing B with A gives exactly the inverse
of comparing A with B). Its interval is the distribution-free one of a median (sign test): the k-th
smallest and k-th largest ratio, k the largest rank whose binomial(n, 1/2) tail keeps the coverage.
No normality is assumed (load makes timings heavy-tailed) and nothing is random, so a stored record
is re-derived exactly. The verdict widens the interval by the noise floor f (the systematic
difference an A/A comparison shows on this machine): ``faster`` when lo > 1+f, ``slower`` when
hi < 1/(1+f), else ``tie``.

**The sequential rule** (``Protocol``, method ``sequential``). A candidate is looked at after
``looks()`` rounds: the first look at the fewest rounds whose interval can exclude anything at the
per-look confidence, then every ``look_every`` rounds, the last at ``rounds``. With J looks each
interval is taken at confidence 1 - alpha/J (alpha = 1 - ``confidence``; Bonferroni over the looks),
so the probability that any look's interval misses the true median ratio is at most alpha, however
the stopping depends on the data. A candidate stops at the first look where it is decided:
``faster`` or ``slower`` as above, or ``tie`` when its whole interval lies inside [1/(1+f), 1+f]
(equivalent within the floor); at the last look the plain verdict holds. Hence a verdict ``faster``
is wrong (the true median ratio at most 1+f) with probability at most alpha, and so are ``slower``
and an early ``tie``. With the defaults (20 rounds, 0.95, every 4) the looks are at 8, 12, 16 and
20 rounds, each at 0.9875: a clear difference is decided after 8 rounds instead of 20.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

ROUNDS = 20             # most rounds per candidate
NOISE_FLOOR = 0.02      # f (benchmarks/timing_noise.py measures it)
CONFIDENCE = 0.95
LOOK_EVERY = 4          # rounds between two looks of the sequential rule (0: one look, at ``rounds``)
MIN_MS = 0.5            # one mean of back-to-back runs lasts at least this long (runs calibrated to it)
BEST_OF = 5             # a measurement is the fastest of this many such means
VERDICTS = ("faster", "slower", "tie")
FIXED = "interleaved"   # records of the fixed-rounds protocol (datasets written before the sequential rule)
SEQUENTIAL = "sequential"
DIGITS = 6              # significant digits of stored times and figures


def sig(x: float) -> float:
    """``x`` at the stored precision (samples are rounded before any decision, so re-deriving a
    stored record sees exactly what the measurement decided on)."""
    return float(f"{x:.{DIGITS}g}")


def min_rounds(confidence: float) -> int:
    """Fewest rounds whose sign-test interval (min, max of the ratios) reaches ``confidence``."""
    return 1 + math.ceil(math.log2(1.0 / (1.0 - confidence)) - 1e-12)


def _rank(n: int, confidence: float) -> int:
    """Largest k >= 1 with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2 (0: none)."""
    alpha, k, tail = (1.0 - confidence) / 2.0, 0, 0.0
    while k < n:
        tail += math.comb(n, k) / 2.0 ** n          # P(B <= k)
        if tail > alpha + 1e-12:
            break
        k += 1
    return min(k, (n + 1) // 2)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def verdict_of_interval(lo: float, hi: float, noise_floor: float) -> str:
    widen = 1.0 + noise_floor
    return "faster" if lo > widen else "slower" if hi * widen < 1.0 else "tie"


def _within(lo: float, hi: float, noise_floor: float) -> bool:
    """The whole interval inside the noise band: equivalent within the floor."""
    widen = 1.0 + noise_floor
    return lo * widen >= 1.0 and hi <= widen


def derive(parent: list[float], candidate: list[float], confidence: float, noise_floor: float) -> dict:
    """parent_ms, candidate_ms, speedup, ci and verdict of paired samples, all rounds at once."""
    if len(parent) != len(candidate) or not parent:
        raise ValueError("paired samples must be two non-empty lists of one length")
    if min(parent) <= 0 or min(candidate) <= 0:
        raise ValueError("timings must be positive")
    logs = sorted(math.log(p / c) for p, c in zip(parent, candidate))
    n = len(logs)
    mid = logs[n // 2] if n % 2 else (logs[n // 2 - 1] + logs[n // 2]) / 2.0
    k = _rank(n, confidence)
    if k < 1:
        raise ValueError(f"{n} rounds cannot give a {confidence:g} interval (at least {min_rounds(confidence)})")
    lo, hi = math.exp(logs[k - 1]), math.exp(logs[n - k])
    return {"parent_ms": sig(_median(parent)), "candidate_ms": sig(_median(candidate)),
            "speedup": sig(math.exp(mid)), "ci": [sig(lo), sig(hi)],
            "verdict": verdict_of_interval(lo, hi, noise_floor)}


@dataclass(frozen=True)
class Protocol:
    """How a comparison is measured and decided; part of a cached timing's identity."""

    rounds: int = ROUNDS
    confidence: float = CONFIDENCE
    noise_floor: float = NOISE_FLOOR
    look_every: int = LOOK_EVERY
    min_ms: float = MIN_MS
    best_of: int = BEST_OF

    def check(self) -> "Protocol":
        if not 0.5 <= self.confidence < 1.0:
            raise ValueError(f"confidence must be in [0.5, 1), not {self.confidence}")
        if self.noise_floor < 0:
            raise ValueError(f"the noise floor must be >= 0, not {self.noise_floor}")
        if self.look_every < 0 or self.best_of < 1 or self.min_ms <= 0:
            raise ValueError("look_every >= 0, best_of >= 1 and min_ms > 0 are needed")
        self.looks()
        return self

    def looks(self) -> tuple[list[int], float]:
        """(rounds after which a candidate is looked at, the confidence of each look's interval)."""
        return looks(self.rounds, self.confidence, self.look_every)

    def to_json(self) -> dict:
        return asdict(self)


def looks(rounds: int, confidence: float, look_every: int) -> tuple[list[int], float]:
    """The looks of the sequential rule (see the module text): the smallest number of looks J such
    that the schedule first-look, every ``look_every``, last at ``rounds`` has at most J looks, each
    at confidence 1 - (1 - confidence)/J."""
    if rounds < min_rounds(confidence):
        raise ValueError(f"{rounds} rounds cannot give a {confidence:g} interval (at least {min_rounds(confidence)})")
    if look_every <= 0:
        return [rounds], confidence
    alpha = 1.0 - confidence
    for j in range(1, rounds + 1):
        c = 1.0 - alpha / j
        first = min_rounds(c)
        if first > rounds:
            break
        pts = list(range(first, rounds, look_every)) + [rounds]
        if len(pts) <= j:
            return pts, c
    return [rounds], confidence


def decide(parent: list[float], candidate: list[float], protocol: Protocol, scale=None) -> dict:
    """The sequential rule on paired samples: the figures at the first look where the candidate is
    decided (or at the last look), with ``stop`` (the rounds it used) and ``decided`` (False: the
    samples end before any look decided it: more rounds are wanted). ``scale``: a function of
    (figures, noise floor) to the figures decided on, when the samples are a part's and the
    verdict is the whole program's (``lowering.measure.summodel``)."""
    pts, c = protocol.looks()
    n = len(parent)
    if len(candidate) != n:
        raise ValueError("paired samples must be two lists of one length")
    last = None
    for look in pts:
        if look > n:
            break
        d = derive(parent[:look], candidate[:look], c, protocol.noise_floor)
        if scale is not None:
            d = scale(d, protocol.noise_floor)
        lo, hi = d["ci"]
        last = {**d, "stop": look, "decided": True}
        if look == protocol.rounds or d["verdict"] != "tie" or _within(lo, hi, protocol.noise_floor):
            return last
    if last is None:
        return {"stop": 0, "decided": False}
    return {**last, "decided": False}


def record_of(parent: list[float], candidate: list[float], *, target: str, machine: dict, protocol: Protocol,
              runs: int | None, build: str = "exact") -> dict:
    """A timing record from paired samples ending where the sequential rule stopped (figures derived
    from the stored, rounded values, so ``record_problems`` finds them again); ``build``: the named
    build timed (``lowering.builds``)."""
    parent, candidate = [sig(x) for x in parent], [sig(x) for x in candidate]
    d = decide(parent, candidate, protocol)
    if not d["decided"] or d["stop"] != len(parent):
        raise ValueError(f"{len(parent)} paired samples do not end where the sequential rule stops")
    pts, c = protocol.looks()
    return {"target": target, "machine": machine, "build": build, "method": SEQUENTIAL, "rounds": len(parent),
            "max_rounds": protocol.rounds, "look_every": protocol.look_every, "look_confidence": sig(c),
            "runs_per_sample": runs, "parent_ms": d["parent_ms"], "candidate_ms": d["candidate_ms"],
            "speedup": d["speedup"], "ci": d["ci"], "confidence": protocol.confidence,
            "noise_floor": protocol.noise_floor, "verdict": d["verdict"],
            "samples": {"parent": parent, "candidate": candidate}}


def fixed_record_of(parent: list[float], candidate: list[float], *, target: str, machine: dict, confidence: float,
                    noise_floor: float, runs: int | None, build: str = "exact") -> dict:
    """A record of the fixed-rounds protocol (every round at once; method ``interleaved``)."""
    parent, candidate = [sig(x) for x in parent], [sig(x) for x in candidate]
    d = derive(parent, candidate, confidence, noise_floor)
    return {"target": target, "machine": machine, "build": build, "method": FIXED, "rounds": len(parent),
            "runs_per_sample": runs,
            "parent_ms": d["parent_ms"], "candidate_ms": d["candidate_ms"], "speedup": d["speedup"], "ci": d["ci"],
            "confidence": confidence, "noise_floor": noise_floor, "verdict": d["verdict"],
            "samples": {"parent": parent, "candidate": candidate}}


def protocol_of(record: dict) -> Protocol:
    """The protocol a sequential record was decided under (its stored fields)."""
    return Protocol(rounds=record["max_rounds"], confidence=record["confidence"], noise_floor=record["noise_floor"],
                    look_every=record["look_every"])


def rederive(record: dict) -> dict:
    """The figures a record's samples give under its own method."""
    s = record["samples"]
    if record.get("method") == SEQUENTIAL:
        d = decide(s["parent"], s["candidate"], protocol_of(record))
        if not d["decided"] or d["stop"] != len(s["parent"]):
            raise ValueError(f"the sequential rule stops at {d['stop'] if d['decided'] else 'no look'} of its "
                             f"{len(s['parent'])} rounds")
        return d
    return derive(s["parent"], s["candidate"], record["confidence"], record["noise_floor"])


def verdict_of(record: dict) -> str:
    """The verdict a timing record's samples give."""
    return rederive(record)["verdict"]


def record_problems(record: dict) -> list[str]:
    """Each figure of a timing record that its samples do not give (dataset.check)."""
    s = record["samples"]
    if record.get("method") not in (FIXED, SEQUENTIAL):
        return [f"timing method '{record.get('method')}' is not '{SEQUENTIAL}' or '{FIXED}'"]
    try:
        d = rederive(record)
    except (ValueError, KeyError) as e:
        return [f"timing samples: {e}"]
    out = [f"timing {k} is {record[k]}, its samples give {d[k]}" for k in ("parent_ms", "candidate_ms", "speedup",
                                                                             "ci", "verdict") if record[k] != d[k]]
    if record["rounds"] != len(s["parent"]):
        out.append(f"timing rounds is {record['rounds']}, it has {len(s['parent'])} paired samples")
    return out


def ratio_bounds(record: dict) -> tuple[float, float]:
    """(lo, hi) of a record's interval."""
    lo, hi = record["ci"]
    return float(lo), float(hi)
