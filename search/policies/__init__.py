"""Policies: who chooses among the legal next steps of a node (or, ``llm-free``, writes the
next program). One small interface (``search.policies.base.Policy``: generate, observe,
choose); ``make_policy`` builds one from the options and a ``search.context.PolicyContext``."""
from __future__ import annotations

# name -> "module:class"; the order is the one --help shows
POLICIES = {
    "llm": "search.policies.llm:MenuLLMPolicy",
    "llm-free": "search.policies.llm:FreeLLMPolicy",
    "cost": "search.policies.cost:CostPolicy",
    "measure": "search.policies.measure:MeasurePolicy",
    "random": "search.policies.random:RandomPolicy",
}


def make_policy(options, ctx):
    """The policy named by ``options.policy``, given the narrow context of a run."""
    import importlib
    module, cls = POLICIES[options.policy].split(":")
    return getattr(importlib.import_module(module), cls)(options, ctx)
