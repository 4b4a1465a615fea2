"""``random``: the seeded baseline; k menu entries drawn uniformly without replacement."""
from __future__ import annotations

from .base import Policy, Proposal, Request


class RandomPolicy(Policy):
    name = "random"

    def generate(self, req: Request) -> list[Proposal]:
        picks = self.rng.sample(req.menu, min(req.k, len(req.menu)))
        return [Proposal(candidate=c) for c in picks]
