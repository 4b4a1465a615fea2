"""The sum model: a program's time is the sum of its slot kernels' times (``engine.leir.slots``:
each top-level statement is its own loop nest), so a candidate that changes one slot, whose
kernel is ``r`` times faster than the parent's (time ``t_old``), takes the parent's time ``T``
to ``T - t_old + t_old / r``:

    speedup(r) = T / (T - t_old + t_old / r)

This is monotone in ``r``, so the kernels' sign-test interval ``[lo, hi]`` (the paired kernel
samples, ``lowering.measure.stats``) maps to the program's ``[speedup(lo), speedup(hi)]`` with
the same coverage; the verdict is taken on it against 1 +/- the noise floor, and the sequential
rule stops on it (``stats.decide(scale=scaler(...))``): a kernel that is 10% of its program and
1.5x faster is a 1.03x faster program, decided as such.

``T`` and ``t_old`` come from the parent's *profile*: the whole parent and each slot kernel
timed alone in ``PROFILE_ROUNDS`` interleaved rounds (``lowering.measure.profile``); a kernel's
time is the median of its rounds, ``T`` their sum. The profile also checks the model on that
parent: the sum against the whole parent's median; beyond ``SUM_TOLERANCE`` its candidates are
timed whole (``lowering.measure.statements``). A record of this method stores the profile and
the kernel samples, so every figure is re-derived from it (``rederive``, ``problems``).
"""
from __future__ import annotations

from .stats import Protocol, _median, decide, protocol_of, sig, verdict_of_interval

STATEMENTS = "statements"
PROFILE_ROUNDS = 5        # rounds of a parent's profile (each program's time: the median of these)
SUM_TOLERANCE = 0.05      # the sum of the kernels' times within this of the whole's (relative)


def profile_figures(times: list[list[float]]) -> dict:
    """{"whole_ms", "kernel_ms", "sum_ms", "sum_ratio"} of a profile's rounds (each round: the whole
    program's time, then each slot kernel's, in ms)."""
    if not times or len(times[0]) < 3 or any(len(row) != len(times[0]) for row in times):
        raise ValueError("a profile is rounds of the whole program's time and at least two kernels' times")
    cols = list(zip(*times))
    whole = sig(_median(list(cols[0])))
    kernels = [sig(_median(list(c))) for c in cols[1:]]
    total = total_ms(kernels)
    return {"whole_ms": whole, "kernel_ms": kernels, "sum_ms": total, "sum_ratio": sig(total / whole)}


def total_ms(kernel_ms: list[float]) -> float:
    return sig(sum(kernel_ms))


def holds(figures: dict, tolerance: float) -> bool:
    """Whether the kernels' times sum to the whole program's within ``tolerance``."""
    r = figures["sum_ratio"]
    return r * (1.0 + tolerance) >= 1.0 and r <= 1.0 + tolerance


def scaler(kernel_ms: list[float], slot: int):
    """The figures of paired kernel samples (``stats.derive``) -> the whole program's, when the
    kernel of slot ``slot`` is replaced (``stats.decide``'s ``scale``)."""
    T = total_ms(kernel_ms)
    t_old = kernel_ms[slot]

    def speedup(r: float) -> float:
        return T / (T - t_old + t_old / r)

    def scale(d: dict, noise_floor: float) -> dict:
        lo, hi = speedup(d["ci"][0]), speedup(d["ci"][1])
        return {"parent_ms": T, "candidate_ms": sig(T - t_old + t_old / d["speedup"]),
                "speedup": sig(speedup(d["speedup"])), "ci": [sig(lo), sig(hi)],
                "verdict": verdict_of_interval(lo, hi, noise_floor),
                "kernel": {k: d[k] for k in ("parent_ms", "candidate_ms", "speedup", "ci")}}
    return scale


def record_of(parent: list[float], candidate: list[float], *, target: str, machine: dict, protocol: Protocol,
              runs, profile: dict, slot: int, slots: list, tolerance: float, build: str = "exact") -> dict:
    """A timing record of method ``statements``: the kernels of slot ``slot`` paired (``parent``,
    ``candidate``: ms per round, ending where the sequential rule stopped on the program's
    interval), the parent's ``profile`` ({"times": rounds of [whole, kernel...], "runs"}) and its
    ``slots`` ([start, stop] statement ranges)."""
    parent, candidate = [sig(x) for x in parent], [sig(x) for x in candidate]
    fig = profile_figures(profile["times"])
    d = decide(parent, candidate, protocol, scaler(fig["kernel_ms"], slot))
    if not d["decided"] or d["stop"] != len(parent):
        raise ValueError(f"{len(parent)} paired samples do not end where the sequential rule stops")
    _, c = protocol.looks()
    return {"target": target, "machine": machine, "build": build, "method": STATEMENTS, "rounds": len(parent),
            "max_rounds": protocol.rounds, "look_every": protocol.look_every, "look_confidence": sig(c),
            "runs_per_sample": runs, "parent_ms": d["parent_ms"], "candidate_ms": d["candidate_ms"],
            "speedup": d["speedup"], "ci": d["ci"], "confidence": protocol.confidence,
            "noise_floor": protocol.noise_floor, "verdict": d["verdict"],
            "samples": {"parent": parent, "candidate": candidate},
            "statements": {"slot": slot, "slots": [list(s) for s in slots], "kernel": d["kernel"],
                           "profile": {"times": profile["times"], "runs": profile["runs"]}, **fig,
                           "sum_tolerance": tolerance}}


def rederive(record: dict) -> dict:
    """The figures a statements record's samples and profile give (``ValueError`` when they
    cannot: the model did not hold, the rule stops elsewhere)."""
    st, s = record["statements"], record["samples"]
    fig = profile_figures(st["profile"]["times"])
    if not holds(fig, st["sum_tolerance"]):
        raise ValueError(f"the kernels sum to {fig['sum_ratio']} of the whole program, beyond the tolerance "
                         f"{st['sum_tolerance']}: the sum model does not hold for this parent")
    if not 0 <= st["slot"] < len(fig["kernel_ms"]) or len(st["slots"]) != len(fig["kernel_ms"]):
        raise ValueError(f"slot {st['slot']} of {len(st['slots'])} slots, the profile has {len(fig['kernel_ms'])} "
                         "kernels")
    d = decide(s["parent"], s["candidate"], protocol_of(record), scaler(fig["kernel_ms"], st["slot"]))
    if not d["decided"] or d["stop"] != len(s["parent"]):
        raise ValueError(f"the sequential rule stops at {d['stop'] if d['decided'] else 'no look'} of its "
                         f"{len(s['parent'])} rounds")
    return {**d, **fig}


def problems(record: dict) -> list[str]:
    """Each figure of a statements record that its samples and profile do not give."""
    try:
        d = rederive(record)
    except (ValueError, KeyError, TypeError, ZeroDivisionError) as e:
        return [f"timing samples: {e}"]
    st = record["statements"]
    out = [f"timing {k} is {record[k]}, its samples give {d[k]}"
           for k in ("parent_ms", "candidate_ms", "speedup", "ci", "verdict") if record[k] != d[k]]
    out += [f"timing statements.{k} is {st[k]}, its samples give {d[k]}"
            for k in ("kernel", "whole_ms", "kernel_ms", "sum_ms", "sum_ratio") if st[k] != d[k]]
    if record["rounds"] != len(record["samples"]["parent"]):
        out.append(f"timing rounds is {record['rounds']}, it has {len(record['samples']['parent'])} paired samples")
    return out
