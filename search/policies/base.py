"""The policy interface: given a node and its menu, propose up to ``k`` next states.

A proposal is a menu choice (legal by construction), a free-form program (``llm-free``:
parsed and checked, never executed) or a failure (an answer that could not be used: it is
recorded as a failed sample and never reaches verification)."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional

from ..question import preferred_menu, stratified  # noqa: F401  (the menu question's; policies use them)


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
