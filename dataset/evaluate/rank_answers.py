"""``--answer rank``: a menu prompt answered by a log-probability ranking of its entries.

Instead of reading one number back, every entry's number is scored by how likely the model is to
answer it (``search.rank.rank_entries``, with the ``--scorer``: the server's log-probabilities or a
local model file). The judged prompt is the best-scored entry as the answer (judged as a number
answer is) plus the ``ranking`` of every scored entry, best first, so that the comparison scores
the model as a ranker too (``dataset.evaluate.comparison``). A menu none of whose entries could be
scored has no answer. Rankings are made one prompt at a time (a scorer keeps the form it settled on).
"""
from __future__ import annotations

import math
import threading

from .judge import judge_menu


class MenuRanker:
    """A scorer (``search.rank.make_scorer``) shared by the evaluation's threads."""

    def __init__(self, scorer):
        self.scorer = scorer
        self.lock = threading.Lock()

    def ask(self, item: dict) -> dict:
        """The answers record of ``evaluation.ask`` for a menu item: its entries' scores, or the error."""
        from search.rank import RankError, rank_entries
        numbers = [str(n) for n in range(1, len(item["menu"]) + 1)]
        with self.lock:
            try:
                scores = rank_entries(item["messages"], numbers, self.scorer)
            except RankError as e:
                return {"texts": [], "usage": {"prompt_tokens": 0, "completion_tokens": 0},
                        "error": {"type": "RankError", "status": None, "message": e.message,
                                  "unsupported": e.unsupported}}
        return {"texts": [], "usage": {"prompt_tokens": 0, "completion_tokens": 0}, "error": None,
                "scores": [s if math.isfinite(s) else None for s in scores]}

    def state(self) -> dict:
        return self.scorer.state()


def judge_ranked(item: dict, scores: list) -> dict:
    """A ranked menu judged: the best-scored entry as the answer, and the ranking of every scored
    entry (highest score first, the entry shown first on equal scores; None when none was scored)."""
    from search.rank import best_first
    if all(s is None for s in scores):
        return judge_menu("", item) | {"status": "not ranked", "message": "no entry could be scored", "ranking": None,
                                       "scores": scores, "in_form": True}
    order = [i + 1 for i in best_first([-math.inf if s is None else s for s in scores])]
    return judge_menu(str(order[0]), item) | {"ranking": order, "scores": scores, "in_form": True}
