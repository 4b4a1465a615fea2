"""Ranking by the server's log-probabilities (``--scorer server``), through the ``openai`` client.

Each answer is *forced*: the chat request carries a constraint that only the answer followed by one
character that is not a digit satisfies (``RANK_FORMS``), with ``logprobs`` and ``top_logprobs``.
The server generates the answer's tokens and reports their log-probabilities as the model gives
them, before the constraint (llama.cpp; vLLM's default ``--logprobs-mode raw_logprobs``), and the
position after the answer lists the most likely next tokens, whose digits give the end term
(``search.rank``). A question of m entries is m requests on the same prompt (servers reuse its
cache). A server that reports log-probabilities *after* the constraint (the forced token at 0, no
alternative) is detected and not used.

``--constraint auto``'s way of finding the form (``search.constraint``), here for ranking: the
first question tries the forms in order; a validation error rules a form out (``rejected``), so
does an answer that is not the forced one (``ignored``: the server does not know the field), a
response without log-probabilities (``no logprobs``) or with constrained ones (``constrained
logprobs``). The first form that works is kept for the run (and a resumed one); a kept form that
later fails the same way is dropped. ``first-token`` (no constraint, one request) ranks only
answers of one character, from the first answer token's listed alternatives, without an end term.
When no form works, ``RankError(unsupported=True)`` says what each gave.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from .rank import DIGITS, EntryScore, RankError, Ranking, end_logprob

# alternatives listed per position: the most OpenAI and vLLM (its default --max-logprobs) allow
TOP_LOGPROBS = 20


@dataclass(frozen=True)
class RankForm:
    name: str
    speaks: str
    force: Optional[Callable[[str], dict]]     # answer -> extra_body forcing it and one non-digit; None: first-token


RANK_FORMS: tuple[RankForm, ...] = (
    RankForm("structured-regex", "vLLM (structured_outputs regex)",
             lambda a: {"structured_outputs": {"regex": f"{a}[^0-9]"}}),
    RankForm("regex", "SGLang (regex)", lambda a: {"regex": f"{a}[^0-9]"}),
    RankForm("grammar", "llama.cpp llama-server, llama-cpp-python (GBNF grammar)",
             lambda a: {"grammar": f'root ::= "{a}" [^0-9]'}),
    RankForm("first-token", "any server with chat logprobs (OpenAI): answers of one character, no end term", None),
)
RANK_FORM = {f.name: f for f in RANK_FORMS}


class _Refused(Exception):
    """The server does not rank in this form (``outcome``: rejected | ignored | no logprobs |
    constrained logprobs)."""

    def __init__(self, outcome: str, detail: str):
        super().__init__(detail)
        self.outcome, self.detail = outcome, detail


class ServerScorer:
    """Ranks through ``client`` (a ``search.client.ChatClient``); ``resume``: a previous
    ``state()`` (the form it kept and every try)."""

    name = "server"

    def __init__(self, client, *, seed: int = 0, resume: Optional[dict] = None):
        self.client = client
        self.seed = seed
        resume = resume or {}
        self.kept: Optional[str] = resume.get("kept") if resume.get("kept") in RANK_FORM else None
        self.tried: list = list(resume.get("tried") or [])
        self.requests = 0
        self._cost = _Cost()

    # ------------------------------------------------------------------ negotiation

    def _ruled_out(self) -> set:
        return {t["form"] for t in self.tried if t["outcome"] != "accepted"}

    def candidates(self, answers: list[str]) -> list[RankForm]:
        """The forms to try for these answers, in order (the kept one alone, when it applies)."""
        fits = [f for f in RANK_FORMS if f.force is not None or all(len(a) == 1 for a in answers)]
        if self.kept is not None:
            return [f for f in fits if f.name == self.kept]
        return [f for f in fits if f.name not in self._ruled_out()]

    def _note(self, form: RankForm, outcome: str, detail: str = "") -> None:
        self.tried.append({"form": form.name, "outcome": outcome, "detail": detail[:300]})
        if outcome == "accepted":
            self.kept = form.name
        elif self.kept == form.name:
            self.kept = None

    def state(self) -> dict:
        return {"scorer": self.name, "kept": self.kept, "tried": list(self.tried), "requests": self.requests}

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ scoring

    def score(self, messages: list[dict], answers: list[str]) -> Ranking:
        self._cost = _Cost()
        tried_now: set = set()
        while True:
            forms = [f for f in self.candidates(answers) if f.name not in tried_now]
            if not forms:
                break
            form = forms[0]
            tried_now.add(form.name)
            try:
                entries = (self._forced(form, messages, answers) if form.force is not None
                           else self._first_token(messages, answers))
            except _Refused as e:
                self._note(form, e.outcome, e.detail)
                continue
            if self.kept != form.name:
                self._note(form, "accepted")
            c = self._cost
            return Ranking(entries, self.name, form.name, c.requests, c.usage, c.latency_s)
        tried = "; ".join(f"{t['form']}: {t['outcome']}" + (f" ({t['detail'][:80]})" if t["detail"] else "")
                          for t in self.tried if t["outcome"] != "accepted")
        longest = max(len(a) for a in answers) if answers else 0
        why = ("the first-token form ranks answers of one character only, and these have up to "
               f"{longest}; " if longest > 1 else "")
        raise self._error(f"the server gives no usable log-probabilities for ranking ({why}tried: "
                          f"{tried or 'nothing'})", unsupported=True)

    def _error(self, message: str, unsupported: bool = False) -> RankError:
        c = self._cost
        return RankError(message, unsupported=unsupported, requests=c.requests, usage=c.usage, latency_s=c.latency_s)

    def _ask(self, messages: list[dict], max_tokens: int, extra_body: Optional[dict]):
        res = self.client.chat(messages, n=1, temperature=0.0, max_tokens=max_tokens,
                               seed=self.seed * 100003 + self.requests, extra_body=extra_body,
                               logprobs=TOP_LOGPROBS)
        self.requests += 1
        self._cost.add(res)
        if res.error is not None:
            message = f"HTTP {res.error.get('status')}: {res.error.get('message')}"
            if res.error.get("validation"):
                raise _Refused("rejected", message)
            raise self._error(f"llm error: {res.error.get('type')}: {res.error.get('message')}")
        text = res.texts[0] if res.texts else ""
        tokens = res.logprobs[0] if res.logprobs else None
        return text, tokens

    def _forced(self, form: RankForm, messages: list[dict], answers: list[str]) -> list:
        out = []
        for a in answers:
            text, tokens = self._ask(messages, len(a) + 2, form.force(a))
            if not text.startswith(a) or text[len(a):len(a) + 1] in ("", *DIGITS):
                raise _Refused("ignored", f"forced {a!r} followed by a non-digit, the answer was {text[:80]!r}")
            if not tokens:
                raise _Refused("no logprobs", "the response has no log-probabilities")
            n, got = 0, ""
            while n < len(tokens) and len(got) < len(a):
                got += tokens[n]["token"]
                n += 1
            if got != a or n >= len(tokens):
                raise self._error(f"the server's tokens {[t['token'] for t in tokens]!r} do not end where the "
                                  f"answer {a!r} does", unsupported=True)
            listed = [[x for x in t["top"] if x[1] is not None] for t in tokens[:n + 1]]
            if all(len(x) <= 1 for x in listed):
                raise _Refused("constrained logprobs", "one alternative at most per position: the log-probabilities "
                                                       "are reported after the constraint (vLLM: --logprobs-mode "
                                                       "raw_logprobs)")
            lps = [t["logprob"] for t in tokens[:n]]
            if any(lp is None for lp in lps):
                raise _Refused("no logprobs", f"a forced token has no finite log-probability: {tokens[:n]!r}"[:300])
            end = end_logprob(tokens[n]["top"])
            out.append(EntryScore(a, sum(lps) + end, tuple(t["token"] for t in tokens[:n]), tuple(lps), end))
        return out

    def _first_token(self, messages: list[dict], answers: list[str]) -> list:
        _text, tokens = self._ask(messages, 1, None)
        if not tokens or not tokens[0]["top"]:
            raise _Refused("no logprobs", "the response has no log-probabilities")
        first: dict = {}
        for tok, lp in [[tokens[0]["token"], tokens[0]["logprob"]]] + tokens[0]["top"]:
            if lp is not None:
                first.setdefault(tok, lp)
        return [EntryScore(a, first.get(a), (a,) if a in first else (), (first[a],) if a in first else ())
                for a in answers]


class _Cost:
    """Requests, token usage and latency of one question."""

    def __init__(self):
        self.requests, self.latency_s = 0, 0.0
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}

    def add(self, res) -> None:
        self.requests += 1
        self.latency_s += res.latency_s
        for k in self.usage:
            self.usage[k] += int((res.usage or {}).get(k) or 0)
