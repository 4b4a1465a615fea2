"""Log-probability ranking: every entry a model is shown is scored by how likely the model is to
answer it, instead of one number being read back (``--llm-answer rank``).

**The score** of an answer ``a`` (an entry's number as text, "12") to a chat question is

    sum over a's tokens t_i of log P(t_i | prompt, assistant prefix, t_1..t_i-1)
      + log P(the number ends after a)

The prompt is the question's messages through the model's chat template, up to and including the
assistant prefix (``add_generation_prompt``); a number of several digits is several tokens
(SmolLM2 writes one token per digit). The end term is log(1 - sum of P(t) over the tokens t whose
text begins with a digit 0-9) at the position after ``a``: the probability that the number does
not go on. Without it "1" would always score at least as high as "12", of which it is a prefix.
The template's end-of-turn token is not the delimiter: a model that writes "1." or "1\\n" has
answered 1 too, and llama.cpp's server never reports the log-probability of the end-of-turn
token it stops on.

Scorers (``Scorer``): the server's log-probabilities (``search.rank_server``, ``--scorer
server``) or transformers on a local model file (``search.rank_local``, ``--scorer local:PATH``);
``search.scorers.make_scorer`` makes one from a ``--scorer`` value.
``rank_entries(messages, answers, scorer)`` is the call for code outside the search (the
dataset's evaluation); ``best_first(scores)`` is the order the policy takes entries in: highest
score first, a tie to the entry shown first.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Protocol

DIGITS = "0123456789"
# 1 - P(a digit follows) below this (rounding of the listed probabilities) counts as this
MIN_END_PROBABILITY = 1e-12


class RankError(Exception):
    """A question that could not be ranked, in one line. ``unsupported``: the scorer cannot rank
    questions of this kind at all (the server gives no usable log-probabilities), so the llm
    policy asks for a number instead; otherwise the question failed (a server error).
    ``requests``, ``usage``, ``latency_s``: what the attempt cost."""

    def __init__(self, message: str, *, unsupported: bool = False, requests: int = 0,
                 usage: Optional[dict] = None, latency_s: float = 0.0):
        super().__init__(message)
        self.message, self.unsupported = message, unsupported
        self.requests, self.usage, self.latency_s = requests, dict(usage or {}), latency_s


@dataclass(frozen=True)
class EntryScore:
    """One answer's score: ``logprob`` is the sum of ``token_logprobs`` and ``end`` (None: the
    answer was not scored, and ranks after every scored one); ``end`` None when the score has no
    end term (the server's first-token form)."""

    answer: str
    logprob: Optional[float]
    tokens: tuple = ()
    token_logprobs: tuple = ()
    end: Optional[float] = None

    def to_json(self) -> dict:
        return {"answer": self.answer, "logprob": self.logprob, "tokens": list(self.tokens),
                "token_logprobs": list(self.token_logprobs), "end": self.end}


@dataclass
class Ranking:
    """The scores of one question's answers (in the order given) and how they were obtained:
    ``scorer`` (server | local), ``form`` (how the server was asked; ``local``), the requests
    made and their token usage and latency."""

    entries: list
    scorer: str
    form: str
    requests: int = 0
    usage: dict = field(default_factory=dict)
    latency_s: float = 0.0

    @property
    def scores(self) -> list[float]:
        return [e.logprob if e.logprob is not None else -math.inf for e in self.entries]

    def to_json(self) -> dict:
        return {"scorer": self.scorer, "form": self.form, "requests": self.requests,
                "entries": [e.to_json() for e in self.entries]}


class Scorer(Protocol):
    """What ranks a question's answers: ``score`` (raises ``RankError``), ``state`` (what a
    trajectory records: the server form negotiated, the model file), ``close``."""

    name: str

    def score(self, messages: list[dict], answers: list[str]) -> Ranking: ...

    def state(self) -> dict: ...

    def close(self) -> None: ...


def best_first(scores: list[float]) -> list[int]:
    """Indices of ``scores``, highest first; equal scores keep the order shown (deterministic:
    the same scores always give the same choice)."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def rank_entries(messages: list[dict], answers: list[str], scorer: Scorer) -> list[float]:
    """Each answer's log-probability of being the model's answer to the chat ``messages`` (the
    score above; ``-inf`` for one the scorer could not score). ``answers``: the entries' numbers
    as text ("1", "2", ...). Raises ``RankError``."""
    answers = check_answers(answers)
    return scorer.score(messages, answers).scores


def check_answers(answers: list[str]) -> list[str]:
    """Answers are distinct, non-empty strings of the digits 0-9 (the end term is about numbers)."""
    answers = [str(a) for a in answers]
    bad = [a for a in answers if not a or any(c not in DIGITS for c in a)]
    if bad:
        raise ValueError(f"an answer to rank is a number written in the digits 0-9, not {bad[0]!r}")
    if len(set(answers)) != len(answers):
        raise ValueError("the answers to rank are not distinct")
    return answers


def end_logprob(next_tokens) -> float:
    """log P(the number ends) from the next token's distribution, given as (text, logprob) pairs
    (all of it, or the most likely tokens a server lists: a digit token not listed counts as 0)."""
    digit = sum(math.exp(lp) for text, lp in next_tokens if lp is not None and text and text[0] in DIGITS)
    return math.log(max(1.0 - digit, MIN_END_PROBABILITY))
