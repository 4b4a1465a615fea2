"""The menu question of a state: which legal steps the model is shown, numbered how, in which words.

``menu_question`` is the one function that turns a state and its menu (``search.space.Space.menu``)
into the request the ``llm`` policy sends: the entries worth showing (at most ``menu_size``, strategies
taking turns in an order seeded by the run's seed and the state), the longest prefix of them whose
prompt stays within ``prompt_tokens``, shown in menu order as 1..m, and the chat messages. The search's
policy (``search.policies.llm``) and the dataset's menu rows (``dataset.text.menu``) both call it, so a
menu row's prompt is byte for byte what the search sends for that state.

The shuffle is seeded by the state's renaming key, not drawn from the run's one random stream: the
question asked at a state does not depend on which states the search visited before it (a dataset
can ask it without replaying the search).

Pure and light: no run state, no I/O, importable without the search machinery.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional

from engine.rewrite.sampling import shuffled_groups, take_turns

from .prompt import PromptOptions, fit_menu, menu_messages


def stratified(menu: list, rng: random.Random) -> list:
    """The menu reordered so that strategies take turns (each strategy's steps shuffled, the
    strategies in a shuffled order): a short prefix covers many strategies, not 100 tilings."""
    groups = shuffled_groups(menu, lambda c: getattr(c, "label", c.step.strategy), rng)   # a composite: its own group
    return take_turns(g[::-1] for g in groups)


def preferred_menu(menu: list, size: int, rng: random.Random) -> list:
    """At most ``size`` entries of a menu, in the order they are worth showing: the menu itself
    when it is that short, else strategies taking turns (``search.prompt.fit_menu`` keeps the
    longest prefix that fits the prompt budget and shows it in menu order, numbered 1..m)."""
    if len(menu) <= size:
        return list(menu)
    return stratified(menu, rng)[:size]


def prompt_options(options, algorithm: Optional[str] = None, history: bool = True) -> PromptOptions:
    """The prompt options of a search's ``SearchOptions`` (``algorithm``: the one named in the
    prompt, the run's by default)."""
    return PromptOptions(algorithm=algorithm or options.algorithm, target=options.target, gpu_name=options.gpu_name,
                         system_prompt=options.system_prompt, detail=options.menu_detail, history=history)


@dataclass(frozen=True)
class MenuQuestion:
    """The entries shown (``shown[i]`` is number i + 1) and how many choices are asked."""

    state: object
    parent: Optional[object]
    shown: tuple
    k: int
    options: PromptOptions
    root_key: str

    def messages(self, answer: str = "number") -> list[dict]:
        """The chat request; ``answer`` "number" or "json" (``search.constraint.menu_answer_kind``)."""
        return menu_messages(self.state, list(self.shown), self.options, parent=self.parent, k=self.k, answer=answer,
                             root_key=self.root_key)


def menu_question(state, menu: list, options, *, parent=None, k: int = 1, left: Optional[int] = None,
                  root_key: str = "", algorithm: Optional[str] = None, history: bool = True) -> MenuQuestion:
    """The question the ``llm`` policy asks at ``state`` (a search node: ``program``, ``key``,
    ``depth``, ``speedup``, ``strategy``, ``failures``, ``parent``). ``menu``: the state's legal
    steps (``Space.menu``); ``options``: the ``SearchOptions`` (seed, policy, menu size, prompt
    budget, prompt words); ``k``: the choices the algorithm wants, ``left`` the samples the budget
    still allows."""
    popts = prompt_options(options, algorithm, history)
    rng = random.Random(f"{options.policy}:{options.seed}:{state.key}")
    preferred = preferred_menu(menu, options.menu_size, rng)
    k = min(k, len(preferred), left if left is not None else k)
    shown = fit_menu(state, preferred, popts, budget=options.prompt_tokens, parent=parent, k=k, root_key=root_key)
    return MenuQuestion(state, parent, tuple(shown), min(k, len(shown)), popts, root_key)
