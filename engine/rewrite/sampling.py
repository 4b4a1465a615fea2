"""Seeded samples of steps spread evenly over strategies (and over programs within a strategy),
for verification sweeps and dataset generation: every strategy that has steps is represented
before any strategy gets a second turn."""
from __future__ import annotations

import random
from collections import defaultdict
from typing import Callable, Iterable, Sequence


def stratified_sample(items: Sequence, n: int, seed: int = 0, *, strategies: Iterable[str] | None = None,
                      strategy_of: Callable = lambda it: it.strategy,
                      group_of: Callable = lambda it: "") -> list:
    """``n`` items (or all there are) spread over ``strategies`` (default: those of the items,
    sorted): strategies take turns in that order; within a strategy the groups (``group_of``,
    e.g. the program name) take turns in a seeded order, and each group's items are drawn in a
    seeded order. Deterministic for a given item order and seed."""
    rng = random.Random(seed)
    order = list(strategies) if strategies is not None else sorted({strategy_of(it) for it in items})
    queues = []
    for s in order:
        by_group: dict[str, list] = defaultdict(list)
        for it in items:
            if strategy_of(it) == s:
                by_group[group_of(it)].append(it)
        groups = sorted(by_group)
        rng.shuffle(groups)
        for g in groups:
            rng.shuffle(by_group[g])
        queue = []
        while any(by_group[g] for g in groups):
            queue += [by_group[g].pop() for g in groups if by_group[g]]
        queues.append(queue)
    out: list = []
    k = 0
    while len(out) < n and any(k < len(q) for q in queues):
        out += [q[k] for q in queues if k < len(q)][:n - len(out)]
        k += 1
    return out
