"""``measure``: no model; measures a screen of candidates and keeps the fastest.

At each choice it verifies and times up to ``screen`` menu entries (strategies taking turns,
seeded), each one a sample charged to the budget, and proposes the ``k`` fastest verified
ones. The budget bounds it: screening stops when the budget is spent."""
from __future__ import annotations

from .base import Policy, Proposal, Request, stratified


class MeasurePolicy(Policy):
    name = "measure"

    def propose(self, req: Request) -> list[Proposal]:
        order = stratified(req.menu, self.rng)
        width = max(req.k, self.options.screen)
        timed = []
        for c in order[:width]:
            if self.run.exhausted:
                break
            o = self.run.sample(req.node, c)
            if o.accepted and o.speedup is not None:
                timed.append((-o.speedup, c.number, c))
        timed.sort(key=lambda t: (t[0], t[1]))
        return [Proposal(candidate=c) for _, _, c in timed[:req.k]]
