"""The policy interface: given a node and its menu, propose up to ``k`` next states.

A proposal is a menu choice (legal by construction), a free-form program (``llm-free``:
parsed and checked, never executed) or a failure (an answer that could not be used: it is
recorded as a failed sample and never reaches verification)."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class Request:
    node: object                      # search.space.Node
    parent: Optional[object]          # its parent node (the prompt's history), or None
    menu: list                        # search.space.Candidate, numbered from 1
    k: int                            # how many proposals the algorithm wants
    algorithm: str
    history: bool = True              # show the parent (chain-no-parent: False)


@dataclass
class Proposal:
    candidate: Optional[object] = None   # a menu entry
    program: Optional[object] = None     # a free-form program (llm-free)
    label: Optional[str] = None          # the strategy the model claims (llm-free)
    failure: Optional[dict] = None       # {"reason", "message", ...}: counts as a failed sample
    call: Optional[int] = None           # index of the LLM call it came from
    extra: dict = field(default_factory=dict)


class Policy:
    """Base: ``propose`` is the one method a policy must have; ``observe`` lets it learn from
    every evaluated sample; ``close`` frees what it holds."""

    name = "policy"
    needs_menu = True

    def __init__(self, options, run):
        self.options = options
        self.run = run
        self.rng = random.Random(f"{options.policy}:{options.seed}")

    def propose(self, req: Request) -> list[Proposal]:
        raise NotImplementedError

    def observe(self, path_strategies: list, candidate_program, outcome) -> None:
        pass

    def state(self) -> dict:
        """What the trajectory records about the policy (model fits, calls, ...)."""
        return {}

    def close(self) -> None:
        pass


def stratified(menu: list, rng: random.Random) -> list:
    """The menu reordered so that strategies take turns (each strategy's steps shuffled, the
    strategies in a shuffled order): a short prefix covers many strategies, not 100 tilings."""
    by: dict[str, list] = {}
    for c in menu:
        by.setdefault(c.step.strategy, []).append(c)
    groups = [by[s] for s in sorted(by)]
    rng.shuffle(groups)
    for g in groups:
        rng.shuffle(g)
    out = []
    while any(groups):
        for g in groups:
            if g:
                out.append(g.pop())
    return out


def preferred_menu(menu: list, size: int, rng: random.Random) -> list:
    """At most ``size`` entries of a menu, in the order they are worth showing: the menu itself
    when it is that short, else strategies taking turns (``search.prompt.fit_menu`` keeps the
    longest prefix that fits the prompt budget and shows it in menu order, numbered 1..m)."""
    if len(menu) <= size:
        return list(menu)
    return stratified(menu, rng)[:size]
