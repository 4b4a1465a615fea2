"""Speed labels that reproduce: a candidate timed against its parent in interleaved rounds.

Protocol (``compare_many``). The parent and up to ``CHUNK`` candidates are built, warmed and
measured in one Verifier worker under one hold of the machine-wide timing lock
(``Verifier.measure_schedule``). Each round measures the parent before and after every
candidate, ``P c1 P c2 P ... cn P``, the candidates' order rotated by one from round to round.
So every candidate measurement has a parent measurement on each side of it in time (linear
drift of the machine's speed cancels in their mean), no candidate always follows the same
program, and the parent costs n+1 measurements a round instead of the 2n of ``P c1 P c2``
pairs with a parent each.

Statistics (``derive``; ``verdict_of`` re-derives a stored record). Round i gives a pair
(parent_i, candidate_i), parent_i the mean of the two parent measurements around the
candidate's. The speedup is the median of the paired ratios parent_i / candidate_i (computed
on logarithms, so comparing B with A gives exactly the inverse of comparing A with B). Its
confidence interval is the distribution-free one of a median (sign test): the k-th smallest and
k-th largest ratio, k the largest rank whose binomial(n, 1/2) tail keeps the coverage at least
``confidence``. It needs no normality (load spikes make timings heavy-tailed) and no random
draws, so it is exact to re-derive. The verdict then widens the interval by the noise floor f,
the systematic difference an A/A comparison (a program against its own second build) can show
on this machine (``benchmarks/timing_noise.py``): ``tie`` when [lo/(1+f), hi*(1+f)] holds 1 (in
particular whenever the interval holds 1 or lies inside [1/(1+f), 1+f]), else ``faster`` or
``slower``. ``parent_ms`` and ``candidate_ms`` are the medians of the two sample lists.
"""
from __future__ import annotations

import math
import os
import platform
from collections import Counter

ROUNDS = 20             # default rounds (benchmarks/timing_noise.py: see docs/dataset.md, "Timing")
NOISE_FLOOR = 0.02      # default f (same measurement)
CONFIDENCE = 0.95
MIN_MS = 0.5            # about how long one mean of back-to-back runs lasts (runs calibrated to it)
BEST_OF = 5             # a measurement is the fastest of this many such means
CHUNK = 8               # most candidates in one interleaved schedule (bounds a request's time and memory)
VERDICTS = ("faster", "slower", "tie")
METHOD = "interleaved"
DIGITS = 6              # significant digits of stored times and figures


def _sig(x: float) -> float:
    return float(f"{x:.{DIGITS}g}")


# --------------------------------------------------------------------------- machine


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what ``platform`` knows)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def gpu_name() -> str | None:
    """The first CUDA device's name through TVM, None when there is none."""
    import tvm
    dev = tvm.cuda(0)
    return str(dev.device_name) if dev.exist else None


def machine_label(target: str) -> dict:
    """What a timing was measured on: the CPU model, the GPU (cuda targets only) and the cores."""
    return {"cpu": cpu_model(), "gpu": gpu_name() if target == "cuda" else None, "cores": os.cpu_count() or 1}


def machine_key(record: dict) -> str:
    """One line naming a record's target and machine (what must not be mixed silently)."""
    m = record["machine"]
    gpu = f", GPU {m['gpu']}" if m.get("gpu") else ""
    return f"{record['target']} on {m['cpu']}{gpu}, {m['cores']} cores"


# --------------------------------------------------------------------------- statistics


def min_rounds(confidence: float) -> int:
    """Fewest rounds whose sign-test interval (min, max of the ratios) reaches ``confidence``."""
    return 1 + math.ceil(math.log2(1.0 / (1.0 - confidence)))


def _rank(n: int, confidence: float) -> int:
    """Largest k >= 1 with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2 (0: none)."""
    alpha, k, tail = (1.0 - confidence) / 2.0, 0, 0.0
    while k < n:
        tail += math.comb(n, k) / 2.0 ** n          # P(B <= k)
        if tail > alpha + 1e-12:
            break
        k += 1
    return min(k, (n + 1) // 2)


def derive(parent: list[float], candidate: list[float], confidence: float, noise_floor: float) -> dict:
    """parent_ms, candidate_ms, speedup, ci and verdict of paired samples (see the module text)."""
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
    widen = 1.0 + noise_floor
    verdict = "faster" if lo / widen > 1.0 else "slower" if hi * widen < 1.0 else "tie"
    return {"parent_ms": _sig(_median(parent)), "candidate_ms": _sig(_median(candidate)),
            "speedup": _sig(math.exp(mid)), "ci": [_sig(lo), _sig(hi)], "verdict": verdict}


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def record_of(parent: list[float], candidate: list[float], *, target: str, machine: dict, confidence: float,
              noise_floor: float, runs: int | None) -> dict:
    """A row's timing record from its paired samples (stored at ``DIGITS`` significant digits,
    and the figures derived from the stored values, so that ``verdict_of`` finds them again)."""
    parent, candidate = [_sig(x) for x in parent], [_sig(x) for x in candidate]
    d = derive(parent, candidate, confidence, noise_floor)
    return {"target": target, "machine": machine, "method": METHOD, "rounds": len(parent),
            "runs_per_sample": runs, "parent_ms": d["parent_ms"], "candidate_ms": d["candidate_ms"],
            "speedup": d["speedup"], "ci": d["ci"], "confidence": confidence, "noise_floor": noise_floor,
            "verdict": d["verdict"], "samples": {"parent": parent, "candidate": candidate}}


def verdict_of(record: dict) -> str:
    """The verdict a timing record's samples give at its confidence and noise floor."""
    s = record["samples"]
    return derive(s["parent"], s["candidate"], record["confidence"], record["noise_floor"])["verdict"]


def record_problems(record: dict) -> list[str]:
    """Each figure of a timing record that its samples do not give (dataset.check)."""
    s = record["samples"]
    try:
        d = derive(s["parent"], s["candidate"], record["confidence"], record["noise_floor"])
    except ValueError as e:
        return [f"timing samples: {e}"]
    out = [f"timing {k} is {record[k]}, its samples give {d[k]}" for k in ("parent_ms", "candidate_ms", "speedup",
                                                                             "ci", "verdict") if record[k] != d[k]]
    if record["rounds"] != len(s["parent"]):
        out.append(f"timing rounds is {record['rounds']}, it has {len(s['parent'])} paired samples")
    if record["method"] != METHOD:
        out.append(f"timing method '{record['method']}' is not '{METHOD}'")
    return out


# --------------------------------------------------------------------------- measuring


def schedule(n: int, rounds: int) -> list[list[int]]:
    """Per round: the parent (0) around each candidate (1..n), candidates rotated each round."""
    out = []
    for r in range(rounds):
        order = [1 + (j + r) % n for j in range(n)]
        row = [0]
        for c in order:
            row += [c, 0]
        out.append(row)
    return out


def pair(times: list[list[float]], sched: list[list[int]], n: int) -> list[tuple[list, list]]:
    """Per candidate: (parent samples, candidate samples), one pair per round; the parent sample
    is the mean of the parent measurements just before and just after the candidate's."""
    out = [([], []) for _ in range(n)]
    for row, order in zip(times, sched):
        for pos, idx in enumerate(order):
            if idx:
                out[idx - 1][0].append((row[pos - 1] + row[pos + 1]) / 2.0)
                out[idx - 1][1].append(row[pos])
    return out


def compare_many(verifier, parent_program, candidate_programs: list, *, rounds: int = ROUNDS,
                 confidence: float = CONFIDENCE, noise_floor: float = NOISE_FLOOR, min_ms: float = MIN_MS,
                 best_of: int = BEST_OF, machine: dict | None = None) -> list:
    """One timing record per candidate (None for one that could not be timed), each measured
    interleaved with the parent, warm, in the verifier's worker, ``CHUNK`` candidates a schedule."""
    if rounds < min_rounds(confidence):
        raise ValueError(f"{rounds} rounds cannot give a {confidence:g} interval (at least {min_rounds(confidence)})")
    machine = machine or machine_label(verifier.target)
    out: list = [None] * len(candidate_programs)
    todo = list(range(len(candidate_programs)))
    for start in range(0, len(todo), CHUNK):
        chunk = todo[start:start + CHUNK]
        while chunk:
            sched = schedule(len(chunk), rounds)
            programs = [parent_program] + [candidate_programs[i] for i in chunk]
            res = verifier.measure_schedule(programs, sched, min_ms, best_of)
            if res["ok"]:
                for i, (p, c) in zip(chunk, pair(res["times"], sched, len(chunk))):
                    out[i] = record_of(p, c, target=verifier.target, machine=machine, confidence=confidence,
                                       noise_floor=noise_floor, runs=res["number"])
                break
            bad = res.get("failed")
            if not bad:          # the parent (or the worker) failed: nothing of this chunk can be timed
                break
            chunk = [i for k, i in enumerate(chunk, 1) if k != bad]
    return out


def compare(verifier, parent, candidate, **kw) -> dict | None:
    """``compare_many`` of one candidate."""
    return compare_many(verifier, parent, [candidate], **kw)[0]


# --------------------------------------------------------------------------- dataset figures


class TimingTally:
    """stats.json's timing section, counted row by row: verdicts, the machines and targets."""

    def __init__(self):
        self.rows = 0
        self.verdicts = Counter()
        self.machines = Counter()
        self.labels: dict[str, dict] = {}

    def add(self, record: dict) -> None:
        k = machine_key(record)
        self.rows += 1
        self.verdicts[record["verdict"]] += 1
        self.machines[k] += 1
        self.labels.setdefault(k, {"target": record["target"], "machine": record["machine"]})

    def summary(self) -> dict:
        return {"verdicts": {v: self.verdicts[v] for v in VERDICTS},
                "machines": [{**self.labels[k], "rows": n} for k, n in sorted(self.machines.items())]}


def dataset_problems(rows: list[dict], options) -> tuple[list[tuple[str, str]], int]:
    """(where, what) for every timing claim of ``rows`` that its samples or the job do not back,
    and timings of several machines or targets in one dataset; and how many records agree.
    ``options``: the job's ``time`` option (False without --time)."""
    problems, ok = [], 0
    machines = Counter()
    for no, r in enumerate(rows, 1):
        t = r.get("timing") if isinstance(r, dict) else None
        if not t:
            continue
        where = f"rows.jsonl:{no} ({r.get('id')}, {r.get('step', {}).get('strategy')})"
        if not options:
            problems.append((where, "a timing record in a job run without --time"))
            continue
        found = record_problems(t)
        for k in ("rounds", "noise_floor", "confidence"):
            if t[k] != options.get(k):
                found.append(f"timing {k} is {t[k]}, the job's --{k.replace('_', '-')} is {options.get(k)}")
        if t["target"] != r["verification"]["target"]:
            found.append(f"timed on {t['target']}, verified on {r['verification']['target']}")
        problems += [(where, p) for p in found]
        ok += not found
        machines[machine_key(t)] += 1
    if len(machines) > 1:
        listed = "; ".join(f"{k} ({n} rows)" for k, n in sorted(machines.items()))
        problems.append(("rows.jsonl", f"timings of {len(machines)} machines or targets in one dataset: {listed}"))
    return problems, ok
