"""Choosers compared on the menus that can tell them apart (``menu_facts``: non-trivial menus).

Per chooser, over the same menus, pure functions of the judged prompts and the menus (a resumed
run and an uninterrupted one agree to the last digit):

* **valid**: answers naming an entry of the menu (Wilson 95% interval);
* **top-1**: the choice has the highest measured speedup (ties all count; Wilson 95%);
* **pairwise**: over the decisive pairs that involve the choice, the share where the choice is
  the faster one (a choice outside the timed entries involves none: it shows in top-1 and regret);
  for a chooser that ranks every entry, also **ranking pairwise**: the share of all decisive pairs
  of the menus it ranked that its ranking orders right. Pairs of one menu are not independent, so
  the 95% intervals resample menus (percentile bootstrap of the pooled share);
* **geometric-mean regret**: exp of the mean log(best / chosen speedup), the menu's largest
  regret for a choice the timing cannot rank or no choice (95% percentile bootstrap over menus);
* **p vs random**: two-sided Wilcoxon signed-rank tests, over menus, of the chooser against
  random choice's exact expectation on the same menu: top-1 hit minus random's (the share of the
  menu's entries that are fastest) and random's expected log regret minus the chooser's.

Random choice itself is exact: expected top-1 and log regret per menu, pairwise one half (each
decisive pair is won by one of its two entries, each chosen with the same chance). The bootstrap
draws ``BOOTSTRAP`` resamples of the menus from ``--seed``, the same ones for every chooser.
"""
from __future__ import annotations

import hashlib
import math
from collections import Counter

from .menu_facts import LEFT_OUT, MenuFacts, Pick
from .metrics import wilson
from .signed_rank import signed_rank_test

BOOTSTRAP = 10000
RANDOM = "random"


def _r(x):
    return None if x is None else round(x, 6)


def resamples(n: int, seed: int):
    """``BOOTSTRAP`` x ``n`` menu indices drawn with replacement (seeded; the same for every chooser)."""
    import numpy as np
    key = int(hashlib.sha256(f"comparison:{seed}:{n}".encode()).hexdigest()[:16], 16)
    return np.random.Generator(np.random.PCG64(key)).integers(0, n, size=(BOOTSTRAP, n))


def _percentiles(values) -> list | None:
    import numpy as np
    v = np.sort(values[np.isfinite(values)])
    if not len(v):
        return None
    return [float(v[int(0.025 * len(v))]), float(v[min(len(v) - 1, int(0.975 * len(v)))])]


def share_interval(correct: list[int], total: list[int], draws) -> list | None:
    """95% bootstrap interval of a pooled share sum(correct) / sum(total), resampling menus."""
    import numpy as np
    if not sum(total):
        return None
    c, t = np.array(correct, dtype=float)[draws].sum(axis=1), np.array(total, dtype=float)[draws].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        span = _percentiles(c / t)
    return None if span is None else [_r(x) for x in span]


def geo_mean_interval(logs: list[float], draws) -> list | None:
    """95% bootstrap interval of exp(mean of ``logs``), resampling menus."""
    import numpy as np
    if not logs:
        return None
    span = _percentiles(np.array(logs)[draws].mean(axis=1))
    return [_r(math.exp(x)) for x in span]


def choice_pairs(f: MenuFacts, number) -> tuple[int, int]:
    """(won, involved): decisive pairs of the menu that involve the chosen entry, and those it wins."""
    won = sum(1 for fast, _ in f.decisive if fast == number)
    lost = sum(1 for _, slow in f.decisive if slow == number)
    return won, won + lost


def ranking_pairs(f: MenuFacts, ranking) -> tuple[int, int]:
    """(ordered right, decisive pairs) of a ranking of every entry."""
    if sorted(ranking) != list(range(1, f.size + 1)):
        raise ValueError(f"menu {f.id}: a ranking must name each entry once, got {list(ranking)}")
    place = {n: i for i, n in enumerate(ranking)}
    return sum(1 for fast, slow in f.decisive if place[fast] < place[slow]), len(f.decisive)


def random_expectations(facts: list[MenuFacts]) -> tuple[list[float], list[float]]:
    """Per menu, a uniform choice's expected top-1 hit and expected log regret."""
    hits = [sum(f.hit(n) for n in range(1, f.size + 1)) / f.size for f in facts]
    logs = [sum(f.log_regret(n) for n in range(1, f.size + 1)) / f.size for f in facts]
    return hits, logs


def random_metrics(facts: list[MenuFacts]) -> dict:
    hits, logs = random_expectations(facts)
    n = len(facts)
    return {"menus": n, "valid": n, "valid_rate": 1.0 if n else None, "valid_interval": None,
            "top1": _r(sum(hits) / n) if n else None, "top1_interval": None,
            "pairwise": 0.5 if n else None, "pairwise_pairs": sum(len(f.decisive) for f in facts),
            "pairwise_interval": None, "ranking_pairwise": 0.5 if n else None, "ranking_interval": None,
            "geo_regret": _r(math.exp(sum(logs) / n)) if n else None, "geo_regret_interval": None,
            "vs_random": None, "note": "exact expectations of a uniform choice"}


def chooser_metrics(facts: list[MenuFacts], picks: list[Pick], draws, expected) -> dict:
    """One chooser's figures on ``facts`` (``draws``: ``resamples``; ``expected``: ``random_expectations``)."""
    n = len(facts)
    valid = [isinstance(p.choice, int) and 1 <= p.choice <= f.size for f, p in zip(facts, picks)]
    hits = [f.hit(p.choice) for f, p in zip(facts, picks)]
    logs = [f.log_regret(p.choice) for f, p in zip(facts, picks)]
    won, involved = zip(*(choice_pairs(f, p.choice) for f, p in zip(facts, picks))) if n else ((), ())
    out = {"menus": n, "valid": sum(valid), "valid_rate": _r(sum(valid) / n) if n else None,
           "valid_interval": wilson(sum(valid), n), "top1": _r(sum(hits) / n) if n else None,
           "top1_interval": wilson(sum(hits), n),
           "pairwise": _r(sum(won) / sum(involved)) if sum(involved) else None, "pairwise_pairs": sum(involved),
           "pairwise_interval": share_interval(list(won), list(involved), draws)}
    ranked = [(i, p.ranking) for i, p in enumerate(picks) if p.ranking is not None]
    if ranked:
        right, total = [0] * n, [0] * n
        for i, ranking in ranked:
            right[i], total[i] = ranking_pairs(facts[i], ranking)
        out |= {"ranking_pairwise": _r(sum(right) / sum(total)) if sum(total) else None,
                "ranking_pairs": sum(total), "ranked_menus": len(ranked),
                "ranking_interval": share_interval(right, total, draws)}
    exp_hits, exp_logs = expected
    out |= {"geo_regret": _r(math.exp(sum(logs) / n)) if n else None,
            "geo_regret_interval": geo_mean_interval(logs, draws),
            "vs_random": {"top1": signed_rank_test([h - e for h, e in zip(hits, exp_hits)]),
                          "log_regret": signed_rank_test([e - lg for lg, e in zip(logs, exp_logs)])}}
    return out


def compare(facts: list[MenuFacts], choosers: dict, seed: int = 0) -> dict:
    """Every chooser on the non-trivial menus of ``facts``. ``choosers``: name -> one ``Pick`` per
    menu of ``facts`` (in order), ``RANDOM`` for random choice's row, or {"unavailable": why}."""
    keep = [i for i, f in enumerate(facts) if f.left_out is None]
    counted = [facts[i] for i in keep]
    left = Counter(f.left_out for f in facts if f.left_out is not None)
    draws = resamples(len(counted), seed) if counted else None
    expected = random_expectations(counted)
    rows = {}
    for name, picks in choosers.items():
        if picks == RANDOM:
            rows[name] = random_metrics(counted)
        elif isinstance(picks, dict):
            rows[name] = picks
        else:
            rows[name] = chooser_metrics(counted, [picks[i] for i in keep], draws, expected)
    return {"menus": len(counted), "left_out": {reason: left.get(reason, 0) for reason in LEFT_OUT},
            "seed": seed, "bootstrap": BOOTSTRAP, "choosers": rows}
