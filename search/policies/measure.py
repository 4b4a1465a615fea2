"""``measure``: no model; screen the menu by measurement and keep the fastest.

It generates a screen of menu entries (strategies taking turns, seeded); the Run verifies each
(a sample each) and times them together against the node (paired rounds); the ``k`` fastest
verified ones become nodes, those significantly faster than the node first. The screen follows
the budget left (item 4 of issue 21): ``ceil(left x screen_share)``, at least the ``k``
proposals wanted, at most ``--screen``, the menu and the budget left, so that a small budget
buys several moves instead of one wide screen.
"""
from __future__ import annotations

import math

from .base import KernelPick, Policy, Proposal, Request, Result, stratified


def screen_width(left: int, share: float, k: int, cap: int, menu: int) -> int:
    """How many candidates one move screens: clamp(ceil(left x share), k, min(cap, menu)),
    never more than ``left``."""
    return max(0, min(max(math.ceil(left * share), k), cap, menu, left))


class MeasurePolicy(Policy):
    name = "measure"

    def generate(self, req: Request) -> list[Proposal]:
        width = screen_width(self.ctx.budget.left, self.options.screen_share, req.k,
                             max(req.k, self.options.screen), len(req.menu))
        return [Proposal(candidate=c) for c in stratified(req.menu, self.rng)[:width]]

    def kernel_move(self, ask) -> KernelPick:
        """A screen in the kernel search: the strategy (or composite) measured least from this
        kernel state next, strategies taking turns in a seeded order (no model, no estimate)."""
        counts: dict[str, int] = {}
        for m in ask.measured:
            counts[m["label"]] = counts.get(m["label"], 0) + 1
        order = stratified_indices(ask.labels, ask.keys, self.rng)
        at = {i: n for n, i in enumerate(order)}
        return KernelPick(min(order, key=lambda i: (counts.get(ask.labels[i], 0), at[i])),
                          extra={"pick": "screen"})

    def choose(self, req: Request, results: list[Result]) -> list[Result]:
        timed = [r for r in results if r.accepted and r.outcome.ratio is not None]
        timed.sort(key=lambda r: (not r.outcome.faster, -r.outcome.ratio, r.proposal.candidate.number))
        return timed[:req.k]


def stratified_indices(labels: list, keys: list, rng) -> list[int]:
    """Indices of moves in a seeded order in which labels take turns."""
    from engine.rewrite.sampling import shuffled_groups, take_turns
    ranked = sorted(range(len(labels)), key=lambda i: keys[i])
    return take_turns(g for g in shuffled_groups(ranked, lambda i: labels[i], rng))
