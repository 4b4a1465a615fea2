"""Strategies taking turns: the one way the project spreads a choice over strategies, so that a
short prefix covers many strategies and not a hundred tilings of one loop.

``take_turns`` interleaves groups round by round; ``shuffled_groups`` groups items by a key and
shuffles, seeded, the groups' order and each group. Every sampler is these two: the verification
sweeps' and tests' ``stratified_sample`` (below), the dataset's sample of a program's steps
(``dataset.generate.task``), the search's menus (``search.question``) and its lookahead's continuations
(``search.lookahead``). Deterministic for a given item order and generator."""
from __future__ import annotations

import random
from typing import Callable, Iterable, Sequence


def take_turns(groups: Iterable[Sequence], n: int | None = None) -> list:
    """Round k takes the k-th item of every group that has one, groups in the given order; at
    most ``n`` items (all when None)."""
    groups = [g for g in groups if len(g)]
    out: list = []
    k = 0
    while (n is None or len(out) < n) and any(k < len(g) for g in groups):
        out += [g[k] for g in groups if k < len(g)][:None if n is None else n - len(out)]
        k += 1
    return out


def shuffled_groups(items: Iterable, key: Callable, rng: random.Random,
                    arrange: Callable[[list], list] | None = None) -> list[list]:
    """The items grouped by ``key`` (each group in item order), the groups in sorted key order;
    then, drawn from ``rng``, the groups' order shuffled, rearranged by ``arrange`` (a function
    of the shuffled keys, if given), and each group shuffled, in that order."""
    by: dict = {}
    for it in items:
        by.setdefault(key(it), []).append(it)
    keys = sorted(by)
    rng.shuffle(keys)
    if arrange is not None:
        keys = arrange(keys)
    for k in keys:
        rng.shuffle(by[k])
    return [by[k] for k in keys]


def stratified_sample(items: Sequence, n: int, seed: int = 0, *, strategies: Iterable[str] | None = None,
                      strategy_of: Callable = lambda it: it.strategy,
                      group_of: Callable = lambda it: "") -> list:
    """``n`` items (or all there are) spread over ``strategies`` (default: those of the items,
    sorted): strategies take turns in that order; within a strategy the groups (``group_of``,
    e.g. the program name) take turns in a seeded order, and each group's items are drawn in a
    seeded order. For verification sweeps: every strategy that has steps is represented before
    any strategy gets a second turn."""
    rng = random.Random(seed)
    order = list(strategies) if strategies is not None else sorted({strategy_of(it) for it in items})
    queues = []
    for s in order:
        groups = shuffled_groups((it for it in items if strategy_of(it) == s), group_of, rng)
        queues.append(take_turns(g[::-1] for g in groups))
    return take_turns(queues, n)
