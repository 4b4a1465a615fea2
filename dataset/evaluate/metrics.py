"""The numbers of a model evaluation, computed from the judged prompts alone (pure functions,
so a resumed run and an uninterrupted one agree to the last digit).

Single-step (paper Table 2, spec lowering.md 8.1): the pass ladder Diff / Build / Exec /
Equal as the share of attempts reaching each rung, pass@1 and pass@k with the unbiased
estimator ``1 - C(n-c, k) / C(n, k)`` (n attempts, c of them equal), per strategy category and
difficulty bucket of the prompt, and the distribution of the strategies the model chose
(Figure 5): what it claims (``applied_strategies``) and, separately, what the engine says the
change is when one rule step reaches it. Menu prompts: the valid-answer rate, agreement with
the measured-fastest entry and the mean regret (best speedup / chosen speedup), the rates with
Wilson 95% intervals, the mean regret with a seeded percentile-bootstrap 95% interval.
"""
from __future__ import annotations

import random
from collections import Counter
from math import comb, sqrt

Z95 = 1.959963984540054          # the standard normal's 97.5% point
BOOTSTRAP = 10000                 # resamples of a mean's interval (seeded: the same results every run)

LADDER = ("diff", "build", "exec", "equal")
PAPER_TABLE2 = {          # spec search.md 7.1: one attempt, temperature 0, % of 2248 test cases
    "Qwen3-1.7B": {"diff": 99, "build": 87, "exec": 87, "equal": 73},
    "Qwen3-8B": {"diff": 100, "build": 95, "exec": 94, "equal": 88},
    "Qwen3-14B": {"diff": 100, "build": 96, "exec": 96, "equal": 90},
    "Qwen3-32B": {"diff": 100, "build": 96, "exec": 95, "equal": 92},
}


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of the chance that at least one of ``k`` attempts drawn from ``n``
    (``c`` of them correct) is correct."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} attempts, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def wilson(successes: int, n: int, z: float = Z95):
    """The Wilson score interval of a binomial proportion (95% by default); None without trials."""
    if n == 0:
        return None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, centre - half), 6), round(min(1.0, centre + half), 6)]


def mean_interval(values: list[float], seed: int = 0, confidence: float = 0.95):
    """A percentile-bootstrap interval of a mean (seeded, so deterministic); None when empty."""
    if not values:
        return None
    rng = random.Random(f"bootstrap:{seed}:{len(values)}")
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(BOOTSTRAP))
    lo = means[int((1 - confidence) / 2 * BOOTSTRAP)]
    hi = means[min(BOOTSTRAP - 1, int((1 + confidence) / 2 * BOOTSTRAP))]
    return [round(lo, 6), round(hi, 6)]


def _rate(num: float, den: float):
    return round(num / den, 6) if den else None


def ladder(results: list[dict], k: int) -> dict:
    """Pass rates (over attempts) and pass@1 / pass@k (over prompts) of single-prompt results."""
    attempts = [a for r in results for a in r["attempts"]]
    out = {"prompts": len(results), "attempts": len(attempts)}
    for rung in LADDER:
        out[rung] = _rate(sum(1 for a in attempts if a[rung]), len(attempts))
    for j in sorted({1, k}):
        vals = [pass_at_k(len(r["attempts"]), sum(a["equal"] for a in r["attempts"]), j)
                for r in results if len(r["attempts"]) >= j]
        out[f"pass@{j}"] = _rate(sum(vals), len(vals))
    return out


def _grouped(results: list[dict], field: str, k: int) -> dict:
    groups: dict[str, list] = {}
    for r in results:
        groups.setdefault(r[field] or "unknown", []).append(r)
    return {g: ladder(rs, k) for g, rs in sorted(groups.items())}


def _dist(counter: Counter) -> dict:
    total = sum(counter.values())
    return {"counts": dict(sorted(counter.items(), key=lambda t: (-t[1], t[0]))),
            "shares": {s: round(c / total, 6) for s, c in sorted(counter.items(), key=lambda t: (-t[1], t[0]))},
            "total": total, "distinct": len(counter)}


def strategy_distribution(results: list[dict]) -> dict:
    """Figure 5: the strategies the model said it applied (every parsed answer) and the ones a
    single rule step reaches (answers that are valid programs one step away), by name and by
    category; the prompts' own strategies for comparison."""
    claimed, claimed_cat, reached, reached_cat, asked, asked_cat = (Counter() for _ in range(6))
    for r in results:
        asked[r["strategy"]] += 1
        asked_cat[r["category"] or "unknown"] += 1
        for a in r["attempts"]:
            for s, cat in a.get("claimed") or []:
                claimed[s] += 1
                claimed_cat[cat or "unknown"] += 1
            if a.get("reached"):
                reached[a["reached"]["strategy"]] += 1
                reached_cat[a["reached"]["category"] or "unknown"] += 1
    return {"claimed": _dist(claimed), "claimed_categories": _dist(claimed_cat),
            "reached": _dist(reached), "reached_categories": _dist(reached_cat),
            "prompts": _dist(asked), "prompt_categories": _dist(asked_cat)}


def statuses(results: list[dict]) -> dict:
    c = Counter(a["status"] for r in results for a in r["attempts"])
    return dict(sorted(c.items()))


def single_metrics(results: list[dict], k: int) -> dict:
    return {"overall": ladder(results, k), "by_category": _grouped(results, "category", k),
            "by_bucket": _grouped(results, "bucket", k), "statuses": statuses(results),
            "strategies": strategy_distribution(results)}


def menu_metrics(results: list[dict]) -> dict:
    """Over menu prompts: valid answers (a number on the menu), agreement of the chosen entry
    with the measured-fastest one (ties count as agreement), agreement with the row's own
    answer, and the regret best / chosen over valid answers whose entry has a measured speedup
    (a choice without one, e.g. a step that failed verification, is counted apart)."""
    n = len(results)
    valid = [r for r in results if r["valid"]]
    agree = sum(1 for r in valid if r["agrees"])
    label = sum(1 for r in valid if r["matches_label"])
    regrets = [r["regret"] for r in valid if r["regret"] is not None]
    return {"prompts": n, "valid": len(valid), "valid_rate": _rate(len(valid), n),
            "valid_interval": wilson(len(valid), n),
            "agreement": _rate(agree, n), "agreement_interval": wilson(agree, n),
            "agreement_of_valid": _rate(agree, len(valid)),
            "label_agreement": _rate(label, n),
            "mean_regret": round(sum(regrets) / len(regrets), 6) if regrets else None,
            "regret_interval": mean_interval(regrets),
            "regret_answers": len(regrets), "unmeasured_choices": len(valid) - len(regrets),
            "out_of_form": sum(1 for r in results if r.get("in_form") is False),
            "statuses": dict(sorted(Counter(r["status"] for r in results).items()))}
