"""Policies: who chooses among the legal next steps of a node (or, ``llm-free``, writes the
next program). One small interface (``search.policies.base.Policy``); ``make_policy`` builds
one from the options."""
from __future__ import annotations

POLICIES = {
    "random": "search.policies.random:RandomPolicy",
    "measure": "search.policies.measure:MeasurePolicy",
    "cost": "search.policies.cost:CostPolicy",
    "llm": "search.policies.llm:MenuLLMPolicy",
    "llm-free": "search.policies.llm:FreeLLMPolicy",
}


def make_policy(options, run):
    """The policy named by ``options.policy``, bound to a search run."""
    import importlib
    module, cls = POLICIES[options.policy].split(":")
    return getattr(importlib.import_module(module), cls)(options, run)
