"""Lookahead: rank a menu by the best state the cost model predicts within a few more steps.

A step that is slower on its own (a tile before its vectorisation) is what a one-step ranking
never picks. Lookahead scores each of the ``width`` best-predicted entries by the best
prediction among the states reachable from it in up to ``depth - 1`` further steps, following
only the ``width`` best-predicted continuations at each level (a beam). Of a state's one-step
rewrites at most ``fanout`` are predicted, strategies taking turns in enumeration order: a
prediction needs the program's features (its lowered TIR among them), and a state has hundreds
of rewrites. So it costs at most ``width * (1 + width * (depth - 2))`` enumerations and
``fanout`` times as many predictions, never a measurement. Everything is ordered by
(prediction, position), so the ranking is deterministic for a model.
"""
from __future__ import annotations

from engine.rewrite.sampling import take_turns

FANOUT = 24              # continuations predicted per state


def _strategies(candidate) -> list[str]:
    return [s.strategy for s in getattr(candidate, "steps", None) or (candidate.step,)]


def _turns(children: list, fanout: int) -> list:
    """At most ``fanout`` continuations, strategies taking turns (each in enumeration order)."""
    if len(children) <= fanout:
        return children
    by: dict[str, list] = {}
    for c in children:
        by.setdefault(c[2][-1], []).append(c)
    return take_turns((by[k] for k in sorted(by)), fanout)


def rank(space, node, menu: list, model, features_of, depth: int, width: int,
         fanout: int = FANOUT) -> list[float]:
    """Scores (predicted log speedups) aligned with ``menu``: the model's prediction of each
    entry's result, raised for the ``width`` best entries to the best prediction among their
    continuations up to ``depth`` steps from ``node`` (``depth`` 1: the plain prediction).

    ``space``: has ``successors(program, key) -> [(step, key)]``; ``model``: ``predict(xs)``;
    ``features_of(program, key, strategies)``: the model's features of a state reached from
    ``node`` by steps of those strategies; ``fanout``: continuations predicted per state."""
    if not menu:
        return []
    base = model.predict([features_of(c.program, c.key, _strategies(c)) for c in menu])
    scores = list(base)
    if depth <= 1 or width < 1:
        return scores
    order = sorted(range(len(menu)), key=lambda i: (-base[i], i))
    seen = {node.key} | {c.key for c in menu}
    for i in order[:width]:
        c = menu[i]
        frontier = [(c.program, c.key, _strategies(c))]
        best = base[i]
        for _ in range(depth - 1):
            children = []
            for program, key, strategies in frontier:
                for step, k in space.successors(program, key):
                    if k in seen:
                        continue
                    children.append((step.program, k, strategies + [step.strategy]))
            children = _turns(children, fanout)
            if not children:
                break
            preds = model.predict([features_of(p, k, s) for p, k, s in children])
            best = max(best, max(preds))
            top = sorted(range(len(children)), key=lambda j: (-preds[j], j))[:width]
            frontier = [children[j] for j in top]
        scores[i] = best
    return scores
