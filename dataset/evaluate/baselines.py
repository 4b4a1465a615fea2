"""What a model's menu answers are compared with, on the same menus: random choice and the shipped
cost model (``search.costmodel``'s prior, the ``cost`` policy's first ranking of an unseen program).

*Random*: each shown entry with probability 1/m. Its agreement and mean regret are expectations
(exact), with the 2.5% and 97.5% points of the same statistics over ``DRAWS`` seeded random
choosers: the range a chooser without knowledge lands in on these menus.

*Cost model*: each entry's program is the row's step applied to the state (``Engine.apply``);
the prior predicts its log speedup from ``search.features.relative`` (the entry against the state,
the path its one strategy: exactly the examples it was trained on) and the best prediction is
the choice (the lowest number on equal predictions). Its choices are judged like a model's
answers (``dataset.evaluate.judge.judge_menu``).
"""
from __future__ import annotations

import json
import random

from .judge import judge_menu
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


def cost_model_baseline(items: list[dict], target: str = "llvm", rules=None) -> dict:
    """The shipped prior's choice on each menu, judged like a model's answer."""
    from engine import Engine
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import program_from_json
    from search.costmodel import pretrained_status
    from search.features import program_features, relative
    engine = Engine(rules=rules, strategies="paper")
    model, note = pretrained_status(target, engine.strategies)
    if model is None:
        return {"unavailable": note}
    judged, unranked = [], 0
    for it in items:
        if it.get("program") is None or any("step" not in e for e in it["menu"]):
            return {"unavailable": "the menu rows do not carry their state's program and steps"}
        program = program_from_json(it["program"])
        base = program_features(program, target)
        xs, ok = [], []
        for e in it["menu"]:
            step = dict(e["step"])
            if isinstance(step.get("params"), str):         # JSON text in menu rows (one Parquet type)
                step["params"] = json.loads(step["params"])
            try:
                after = engine.apply(program, step)
            except (LeirError, KeyError):
                ok.append(False)
                xs.append(None)
                continue
            ok.append(True)
            xs.append(relative(program_features(after, target), base, [e["strategy"]], model.strategies))
        if not any(ok):
            unranked += 1
            judged.append(judge_menu("", it))
            continue
        scores = model.predict([x for x in xs if x is not None])
        it_scores = iter(scores)
        ranked = [(next(it_scores) if good else float("-inf")) for good in ok]
        pick = min(range(len(ranked)), key=lambda i: (-ranked[i], i)) + 1
        judged.append(judge_menu(str(pick), it))
    out = menu_metrics(judged)
    out["note"] = f"shipped prior ({note})" + (f"; {unranked} menu(s) it could not rank" if unranked else "")
    return out


def baselines(items: list[dict], target: str = "llvm", seed: int = 0, rules=None) -> dict:
    return {"random": random_baseline(items, seed), "cost model": cost_model_baseline(items, target, rules)}
