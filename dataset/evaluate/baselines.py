"""What a model's menu answers are compared with, on the same menus.

``dataset.evaluate.comparison`` scores these choosers on the menus that can tell choosers apart:

* *random*: each shown entry with probability 1/m, as exact expectations (``comparison``);
* *position k*: always the k-th entry (the last on a shorter menu), and *last*: the menus list
  entries in the engine's order, so a model may have learnt a position rather than a step;
* *strategy prior*: the entries ranked by their strategy's mean log speedup on the training split
  (``dataset.evaluate.strategy_prior``);
* *cost model*: each entry's program is the row's step applied to the state (``Engine.apply``,
  with the strategy set the dataset was made with, its ``stats.json``'s job: a smaller set refuses
  the entries of the others); the shipped prior (``search.costmodel``) predicts each one's log
  speedup from ``search.features.relative`` (the entry against the state, the path its one
  strategy: exactly the examples it was trained on) and ranks them, the lowest number first on
  equal predictions; an entry it cannot apply goes last.

``random_baseline`` and ``baselines`` keep the earlier all-menus figures of ``results.json``'s
``menu.baselines`` (random's with the range of seeded choosers).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from .judge import judge_menu
from .menu_facts import Pick
from .metrics import menu_metrics

DRAWS = 10000


def _speeds(menu: list[dict]) -> list:
    return [e.get("speedup") if e.get("verified", True) and (e.get("speedup") or 0) > 0 else None for e in menu]


def random_baseline(items: list[dict], seed: int = 0) -> dict:
    """Expected agreement and mean regret of a uniform choice, with the range of seeded draws."""
    agree, regret_sum, regret_n = 0.0, 0.0, 0.0
    per_menu = []
    for it in items:
        speeds = _speeds(it["menu"])
        measured = [s for s in speeds if s is not None]
        best = max(measured) if measured else None
        m = len(speeds)
        agree += sum(1 for s in measured if s == best) / m
        regrets = [best / s for s in measured]
        regret_sum += sum(regrets) / m
        regret_n += len(regrets) / m
        per_menu.append((speeds, best))
    n = len(items)
    rng = random.Random(f"random-baseline:{seed}")
    agreements, means = [], []
    for _ in range(DRAWS):
        a, rs = 0, []
        for speeds, best in per_menu:
            s = speeds[rng.randrange(len(speeds))]
            if s is not None:
                a += s == best
                rs.append(best / s)
        agreements.append(a / n)
        if rs:
            means.append(sum(rs) / len(rs))
    agreements.sort()
    means.sort()

    def span(xs):
        return [round(xs[int(0.025 * len(xs))], 6), round(xs[min(len(xs) - 1, int(0.975 * len(xs)))], 6)] if xs else None
    return {"prompts": n, "valid": n, "valid_rate": 1.0, "agreement": round(agree / n, 6) if n else None,
            "agreement_interval": span(agreements),
            "mean_regret": round(regret_sum / regret_n, 6) if regret_n else None, "regret_interval": span(means),
            "note": f"expectations of a uniform choice; intervals: 2.5%-97.5% of {DRAWS} seeded choosers"}


def dataset_strategies(folder: str):
    """The strategy set a dataset was made with (its ``stats.json``'s job), or None when not recorded."""
    stats = Path(folder) / "stats.json"
    try:
        return json.loads(stats.read_text()).get("job", {}).get("strategies")
    except (OSError, ValueError):
        return None


def cost_model_rankings(items: list[dict], target: str = "llvm", rules=None, strategies="paper"):
    """(per item the entry numbers best first, or None for a menu none of whose steps apply; a
    note), or (None, why the cost model cannot rank these menus)."""
    from engine import Engine
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import program_from_json
    from search.costmodel import pretrained_status
    from search.features import program_features, relative
    if any(it.get("program") is None or any("step" not in e for e in it["menu"]) for it in items):
        return None, "the menu rows do not carry their state's program and steps"
    engine = Engine(rules=rules, strategies=strategies)
    model, note = pretrained_status(target, engine.strategies)
    if model is None:
        return None, note
    rankings, unranked = [], 0
    for it in items:
        program = program_from_json(it["program"])
        base = program_features(program, target)
        xs = []
        for e in it["menu"]:
            step = dict(e["step"])
            if isinstance(step.get("params"), str):         # JSON text in menu rows (one Parquet type)
                step["params"] = json.loads(step["params"])
            try:
                after = engine.apply(program, step)
            except (LeirError, KeyError):
                xs.append(None)
                continue
            xs.append(relative(program_features(after, target), base, [e["strategy"]], model.strategies))
        if all(x is None for x in xs):
            unranked += 1
            rankings.append(None)
            continue
        scores = iter(model.predict([x for x in xs if x is not None]))
        score = [float(next(scores)) if x is not None else float("-inf") for x in xs]
        rankings.append(tuple(sorted(range(1, len(score) + 1), key=lambda n: (-score[n - 1], n))))
    label = strategies if isinstance(strategies, str) else ",".join(strategies)
    return rankings, (f"shipped prior ({note}); strategies {label}"
                      + (f"; {unranked} menu(s) it could not rank" if unranked else ""))


def cost_model_baseline(items: list[dict], target: str = "llvm", rules=None, strategies="paper",
                        ranked=None) -> dict:
    """The shipped prior's choice on each menu, judged like a model's answer (all menus).
    ``ranked``: ``cost_model_rankings``'s result when already computed."""
    rankings, note = ranked if ranked is not None else cost_model_rankings(items, target, rules, strategies)
    if rankings is None:
        return {"unavailable": note}
    out = menu_metrics([judge_menu(str(r[0]) if r else "", it) for it, r in zip(items, rankings)])
    out["note"] = note
    return out


def baselines(items: list[dict], target: str = "llvm", seed: int = 0, rules=None, strategies="paper",
              ranked=None) -> dict:
    return {"random": random_baseline(items, seed),
            "cost model": cost_model_baseline(items, target, rules, strategies, ranked)}


def position_choosers(facts: list) -> dict:
    """"position k" (the k-th entry, the last of a shorter menu) for k below the size of the longest
    menu that counts, and "last"."""
    longest = max((f.size for f in facts if f.left_out is None), default=0)
    out = {f"position {k}": [Pick(min(k, f.size)) for f in facts] for k in range(1, longest)}
    out["last"] = [Pick(f.size) for f in facts]
    return out


def ranking_chooser(rankings: list) -> list:
    """Picks of a chooser that ranks every entry (its choice: the first; None for a menu it could not rank)."""
    return [Pick(r[0], tuple(r)) if r else Pick(None) for r in rankings]
