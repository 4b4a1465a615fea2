"""``random``: the seeded baseline, choosing among exactly what a model would be shown.

In the paper's algorithms a model sees the entries of ``search.question.menu_question`` (those
that fit the prompt budget), so ``random`` draws its k entries uniformly from those; ``random-all``
draws from the node's whole menu (the baseline of earlier versions). Both record how many entries
they drew from and how many were legal. In the kernel search a model can reach every open move
of the kernel (``search.kernel_question``: nothing is dropped), so both draw from all of them.
"""
from __future__ import annotations

from dataclasses import replace

from .base import KernelPick, Policy, Proposal, Request


class RandomPolicy(Policy):
    name = "random"
    shown_only = True

    def __init__(self, options, ctx):
        super().__init__(options, ctx)
        self.drawn = {"questions": 0, "shown": 0, "menu": 0}

    def _pool(self, req: Request) -> list:
        if not self.shown_only:
            return list(req.menu)
        from ..question import menu_question
        as_model = replace(self.options, policy="llm")      # the entries the llm policy would show, seeded alike
        q = menu_question(req.node, req.menu, as_model, parent=req.parent, k=req.k, left=max(1, self.ctx.budget.left),
                          root_key=self.ctx.root.key, algorithm=req.algorithm, history=req.history)
        return list(q.shown)

    def generate(self, req: Request) -> list[Proposal]:
        pool = self._pool(req)
        self.drawn["questions"] += 1
        self.drawn["shown"] += len(pool)
        self.drawn["menu"] += len(req.menu)
        picks = self.rng.sample(pool, min(req.k, len(pool)))
        return [Proposal(candidate=c, extra={"drawn_from": len(pool), "menu": len(req.menu)}) for c in picks]

    def kernel_move(self, ask) -> KernelPick:
        self.drawn["questions"] += 1
        self.drawn["shown"] += len(ask)
        self.drawn["menu"] += len(ask)
        return KernelPick(self.rng.randrange(len(ask)), extra={"pick": "random"})

    def state(self) -> dict:
        return {"drawn_from": "shown entries" if self.shown_only else "whole menu", **self.drawn}


class RandomAllPolicy(RandomPolicy):
    name = "random-all"
    shown_only = False

    def __init__(self, options, ctx):
        super().__init__(options, ctx)
        import random
        self.rng = random.Random(f"random:{options.seed}")    # the draws of earlier versions' random
