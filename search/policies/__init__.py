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
    "random-all": "search.policies.random:RandomAllPolicy",
}


def make_policy(options, ctx):
    """The policy named by ``options.policy`` (or a user's class, ``package.module:Class``, a
    subclass of ``search.policies.base.Policy``), given the narrow context of a run."""
    return policy_class(options.policy)(options, ctx)


def policy_class(name: str):
    """The class of a policy name or of ``package.module:Class``; ``ValueError`` saying why not."""
    import importlib
    from .base import Policy
    module, _, cls = POLICIES.get(name, name).partition(":")
    try:
        got = getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(f"cannot load policy '{name}': {e}") from None
    if not (isinstance(got, type) and issubclass(got, Policy)):
        raise ValueError(f"policy '{name}' is not a subclass of search.policies.base.Policy")
    return got
