"""The Wilcoxon signed-rank test, two-sided: is a chooser's per-menu difference from random's
expectation centred on zero?

Zero differences are dropped (Wilcoxon's rule); equal magnitudes share their mean rank. Up to
``EXACT_UP_TO`` differences the p-value is exact: the distribution of the positive-rank sum when
each rank's sign is a fair coin (mean ranks are whole or half numbers, so the sums are counted on
doubled ranks, ties included). Beyond, the normal approximation with the tie correction and a
continuity correction. Pure and deterministic.
"""
from __future__ import annotations

import math

EXACT_UP_TO = 300
_DIGITS = 12          # magnitudes equal to this many digits are ties (float noise is not a difference)


def ranks(values: list[float]) -> list[float]:
    """Ranks 1..n of ``values``, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def _exact_tail(doubled: list[int], w2: int) -> tuple[float, float]:
    """(P(S <= w2), P(S >= w2)) for S the sum of a random half of ``doubled`` (each in with chance 1/2)."""
    import numpy as np
    dist = np.zeros(sum(doubled) + 1)
    dist[0] = 1.0
    for r in doubled:
        shifted = np.zeros_like(dist)
        shifted[r:] = dist[:len(dist) - r]
        dist = 0.5 * (dist + shifted)
    return float(dist[:w2 + 1].sum()), float(dist[w2:].sum())


def signed_rank_test(differences: list[float]) -> dict:
    """{"n": non-zero differences, "positive": how many are > 0, "w_plus": their rank sum, "p":
    two-sided p-value (None without a non-zero difference), "method": exact | normal}."""
    d = [round(x, _DIGITS) for x in differences]
    d = [x for x in d if x != 0]
    n = len(d)
    if n == 0:
        return {"n": 0, "positive": 0, "w_plus": 0.0, "p": None, "method": None}
    r = ranks([abs(x) for x in d])
    w_plus = float(sum(rk for rk, x in zip(r, d) if x > 0))
    positive = sum(1 for x in d if x > 0)
    if n <= EXACT_UP_TO:
        low, high = _exact_tail([round(2 * rk) for rk in r], round(2 * w_plus))
        p, method = min(1.0, 2 * min(low, high)), "exact"
    else:
        mean = n * (n + 1) / 4
        counts: dict[float, int] = {}
        for rk in r:
            counts[rk] = counts.get(rk, 0) + 1
        var = n * (n + 1) * (2 * n + 1) / 24 - sum(t ** 3 - t for t in counts.values()) / 48
        z = 0.0 if var <= 0 else max(0.0, abs(w_plus - mean) - 0.5) / math.sqrt(var)
        p, method = min(1.0, math.erfc(z / math.sqrt(2))), "normal"
    return {"n": n, "positive": positive, "w_plus": w_plus, "p": round(p, 6), "method": method}
