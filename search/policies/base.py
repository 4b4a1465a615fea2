"""The policy interface, in MetaSchedule's shape: ``generate`` proposals for a node, the Run
measures them (charging the budget), ``observe`` the results, ``choose`` which become nodes.

A proposal is a menu choice (a ``search.space.Candidate``, legal by construction; one step or
a composite of several), a free-form program (``llm-free``: parsed and checked, never
executed) or a failure (an answer that could not be used: it is recorded as a failed sample
and never reaches verification). A policy sees the run only through its
``search.context.PolicyContext``."""
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
    k: int                            # how many nodes the algorithm wants
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


@dataclass
class Result:
    """A proposal the Run evaluated: its program, state key, outcome (cached or fresh), the
    strategies of the path from the original, the sample that paid for it, and the node it was
    timed against with the strategies of the move from there."""

    proposal: Proposal
    program: object
    key: str
    outcome: object                      # search.candidate_eval.CandidateOutcome
    fresh: bool                          # paid for now (False: evaluated before in this run)
    path: list                           # strategies from the original to this state
    sample: Optional[int] = None
    features: Optional[dict] = None      # what the policy wants stored with it in the database
    parent: Optional[object] = None      # the node it was proposed at and timed against
    moves: list = field(default_factory=list)   # strategies of the steps from ``parent`` to it

    @property
    def accepted(self) -> bool:
        return self.outcome.accepted


@dataclass
class KernelPick:
    """A policy's answer to the kernel search's question (``search.kernel_question.KernelAsk``):
    the index of the move to measure, or a failure (an answer that could not be used: a failed
    sample); ``call`` the model call it came from; ``extra`` what the sample records about it."""

    index: Optional[int] = None
    failure: Optional[dict] = None
    call: Optional[int] = None
    extra: dict = field(default_factory=dict)


class Policy:
    """Base: ``generate`` is the one method a policy must have; ``observe`` lets it learn from
    every result paid for; ``choose`` picks the results that become nodes (by default every
    accepted one); ``kernel_move`` answers the kernel search's question (by default the search's
    own order: its estimates); ``close`` frees what it holds."""

    name = "policy"
    needs_menu = True

    def __init__(self, options, ctx):
        self.options = options
        self.ctx = ctx
        self.rng = random.Random(f"{options.policy}:{options.seed}")

    def generate(self, req: Request) -> list[Proposal]:
        raise NotImplementedError

    def observe(self, results: list[Result]) -> None:
        pass

    def kernel_move(self, ask) -> KernelPick:
        """Which of a kernel's open moves to measure next (``ask``: a ``KernelAsk``). By default
        the search's order: the largest expected saving by its kernel cost model."""
        return KernelPick(max(range(len(ask)), key=lambda i: ask.priorities[i]), extra={"pick": "estimate"})

    def choose(self, req: Request, results: list[Result]) -> list[Result]:
        return [r for r in results if r.accepted]

    def state(self) -> dict:
        """What the trajectory records about the policy (model fits, calls, ...)."""
        return {}

    def close(self) -> None:
        pass
