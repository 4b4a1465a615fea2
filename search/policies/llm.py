"""The LLM policies, over any OpenAI-compatible endpoint.

``llm`` (menu): the prompt is the paper's (state, known variables, hardware, history) with
a numbered menu of legal steps (``search.prompt.menu_messages``, shown as 1..m); the answer
is *constrained* to the menu in the form the server speaks (``search.constraint``: a choice
list, a regex, a GBNF grammar, a JSON schema whose items are an ``enum`` of the menu
numbers; ``--constraint auto`` finds it). A server that ignores the constraint may answer
anything: every answer is parsed and checked like untrusted text. ``--llm-answer rank``: no number
is read back; every entry shown is scored by its log-probability as the answer (``search.rank``,
``--scorer``) and the best taken (ties: the entry shown first); when the server gives no usable
log-probabilities, that question is asked for a number instead, and its record says why.

``llm-free``: the paper's free-form mode. The model writes transformed LEIR; it is parsed,
never executed, checked against the program's known tensors (names, dtypes, shapes: the
declarations are the original's, so a body that changes them does not pass analysis), then
verified like any candidate; the search records whether a rule reaches it in one step.
"""
from __future__ import annotations

from engine.leir.diagnostics import LeirError

from ..answers import AnswerError, parse_free_answer, parse_menu_answer
from ..client import ChatClient
from ..constraint import FORM, Negotiator, free_schema, in_free_form, in_menu_form, menu_answer_kind
from ..prompt import PromptOptions, free_messages
from ..question import menu_question
from ..rank import RankError, best_first
from .base import KernelPick, Policy, Proposal, Request


class _LLMPolicy(Policy):
    purpose = "menu"

    def __init__(self, options, ctx):
        super().__init__(options, ctx)
        self.client = ChatClient(options.endpoint, options.model, api_key_env=options.api_key_env,
                                 timeout=options.llm_timeout, retries=options.retries, seed=options.seed,
                                 backoff_s=float(options.extra.get("backoff_s", 0.5)))
        self.calls = 0
        self.negotiator = Negotiator(options.constraint, self.purpose, ctx.previous.get("negotiation"))
        self.scorer, self.ranked, self.rank_fallbacks = None, 0, 0
        if getattr(options, "llm_answer", "name") == "rank" and self.purpose == "menu":
            from ..scorers import make_scorer
            self.scorer = make_scorer(options.scorer, client=self.client, seed=options.seed,
                                      resume=(ctx.previous.get("ranking") or {}))

    def prompt_options(self, req: Request) -> PromptOptions:
        return PromptOptions(algorithm=req.algorithm, target=self.options.target, gpu_name=self.options.gpu_name,
                             system_prompt=self.options.system_prompt, detail=self.options.menu_detail,
                             history=req.history)

    def _call(self, req, messages: list, n: int, parts: dict, form, shown=None):
        extra_body, response_format = parts.get("extra_body"), parts.get("response_format")
        seed = self.options.seed * 100003 + self.calls
        self.calls += 1
        res = self.client.chat(messages, n=n, temperature=self.options.temperature, max_tokens=self.options.max_tokens,
                               seed=seed, extra_body=extra_body, response_format=response_format)
        record = {"node": req.node.id if req is not None else 0, "policy": self.options.policy,
                  "constraint": form.name, "messages": messages,
                  "request": {"n": n, "temperature": self.options.temperature, "seed": seed,
                              "max_tokens": self.options.max_tokens, "extra_body": extra_body,
                              "response_format": response_format},
                  "answers": res.texts, "finish_reasons": res.finish_reasons, "usage": res.usage,
                  "latency_s": round(res.latency_s, 4), "attempts": res.attempts, "error": res.error}
        _shown(record, shown)
        return res, self.ctx.record_call(record)

    def _rank(self, req, messages: list, count: int, shown):
        """Rank the answers 1..count (``--llm-answer rank``): ("ok", indices best first, call),
        ("unsupported", None, call) (ask for a number instead) or ("failed", message, call)."""
        answers = [str(i) for i in range(1, count + 1)]
        record = {"node": req.node.id if req is not None else 0, "policy": self.options.policy, "answer": "rank",
                  "scorer": self.scorer.name, "messages": messages, "finish_reasons": []}
        self.ranked += 1
        try:
            ranking = self.scorer.score(messages, answers)
        except RankError as e:
            outcome = "unsupported" if e.unsupported else "failed"
            record.update(constraint=None, rank={"unavailable" if e.unsupported else "failed": e.message},
                          answers=[], usage=e.usage, latency_s=round(e.latency_s, 4), attempts=e.requests,
                          error=None if e.unsupported else {"type": "RankError", "message": e.message[:300],
                                                            "validation": False})
            _shown(record, shown)
            self.rank_fallbacks += e.unsupported
            return outcome, (None if e.unsupported else e.message), self.ctx.record_call(record)
        order = best_first(ranking.scores)
        rank = ranking.to_json()
        rank["order"] = [i + 1 for i in order]
        record.update(constraint=ranking.form, rank=rank, answers=[str(order[0] + 1)], usage=ranking.usage,
                      latency_s=round(ranking.latency_s, 4), attempts=ranking.requests, error=None)
        _shown(record, shown)
        return "ok", order, self.ctx.record_call(record)

    def _try(self, req, form, messages, n, parts, shown):
        """One form. A validation error with n > 1 may be about n, not the form (llama-server
        allows one choice): the same request with n = 1 tells."""
        res, call = self._call(req, messages, n, parts, form, shown)
        if res.error is not None and res.error.get("validation") and n > 1:
            again, call2 = self._call(req, messages, 1, parts, form, shown)
            if again.error is None:
                self.negotiator.n_max = 1
                self.negotiator.tried.append({"form": form.name, "outcome": "n > 1 refused", "call": call,
                                              "detail": res.error.get("message", "")[:300]})
                return again, call2
        return res, call

    def _ask(self, req: Request, build, in_form, shown=None):
        """Ask in the run's form (``--constraint auto``: negotiating it first), then ask again for
        answers a server left out of ``n``. ``build(form) -> (messages, n, parts)``;
        ``in_form(form, text)``. Returns ([(text, call)], failures)."""
        neg, auto = self.negotiator, self.negotiator.mode == "auto"
        tried_now: set = set()
        rejected: list = []
        while True:
            forms = [f for f in neg.candidates() if f.name not in tried_now] or [FORM["none"]]
            form = forms[0]
            tried_now.add(form.name)
            messages, n, parts = build(form)
            res, call = self._try(req, form, messages, min(n, neg.n_max or n), parts, shown)
            if res.error is not None:
                if auto and res.error.get("validation") and not neg.settled:
                    neg.note(form, "rejected", call, f"HTTP {res.error.get('status')}: {res.error.get('message')}")
                    rejected.append(form.name)
                    if any(f.name not in tried_now for f in neg.candidates()):
                        continue
                    neg.forget(rejected)
                return [], [{"reason": "llm error", "message": f"{res.error['type']}: {res.error['message']}",
                             "call": call}]
            # out of the form: the server ignored it (a kept form's answer cut short by max_tokens is no proof)
            off = [t for t, why in zip(res.texts, res.finish_reasons or [None] * len(res.texts))
                   if not in_form(form, t) and not (neg.settled and why == "length")]
            if auto and off and form.name != "none":
                neg.note(form, "ignored", call, f"answer not in the form: {off[0][:200]!r}")
                if neg.kept == form.name:
                    neg.kept = None                 # it only looked kept: the server ignores it
                if any(f.name not in tried_now for f in neg.candidates()):
                    continue
            elif auto and not neg.settled:
                neg.note(form, "accepted", call)
            break
        got = [(t, call) for t in res.texts[:n]]
        failures = []
        if len(res.texts) < min(n, neg.n_max or n):
            neg.n_max = max(1, len(res.texts))      # the server ignores n: ask with what it gives
        for _ in range(n - len(got)):               # answers left out: asked for again, never dropped
            ask = min(n - len(got), neg.n_max or n)
            more, c = self._call(req, messages, ask, parts, form, shown)
            if more.error is not None:
                failures.append({"reason": "llm error", "message": f"{more.error['type']}: {more.error['message']}",
                                 "call": c})
                break
            got += [(t, c) for t in more.texts[:n - len(got)]]
            if len(got) >= n:
                break
        for _ in range(n - len(got) - len(failures)):
            failures.append({"reason": "llm error", "message": f"the server gave {len(got)} of {n} answers",
                             "call": call})
        return got, failures

    def state(self) -> dict:
        out = {"endpoint": self.options.endpoint, "model": self.options.model, "calls": self.calls,
               "api_key_set": self.client.key_set, "constraint": self.negotiator.kept or self.options.constraint,
               "negotiation": self.negotiator.state()}
        if self.scorer is not None:
            out["ranking"] = dict(self.scorer.state(), questions=self.ranked, fallbacks=self.rank_fallbacks)
        return out

    def close(self) -> None:
        if self.scorer is not None:
            self.scorer.close()


def _shown(record: dict, shown) -> None:
    """What a call's record says of the entries shown: a kernel page's record (a dict), or the
    menu: shown number -> candidate (its number in the node's whole menu, step, result)."""
    if isinstance(shown, dict):
        record.update(shown)
    elif shown is not None:
        record["menu"] = [{"number": i + 1, "candidate": c.number, "step": c.step.key,
                           "strategy": c.step.strategy, "key": c.key} for i, c in enumerate(shown)]


def _failed(f: dict) -> Proposal:
    f = dict(f)
    return Proposal(failure=f, call=f.pop("call", None))


class MenuLLMPolicy(_LLMPolicy):
    name = "llm"

    def generate(self, req: Request) -> list[Proposal]:
        left = max(1, self.ctx.budget.left)
        # the entries the model sees (within --prompt-tokens), in menu order, shown as 1..m: the
        # one function the dataset's menu rows call too
        q = menu_question(req.node, req.menu, self.options, parent=req.parent, k=req.k, left=left,
                          root_key=self.ctx.root.key, algorithm=req.algorithm, history=req.history)
        shown, k = list(q.shown), q.k
        m = len(shown)
        numbers = list(range(1, m + 1))
        if self.scorer is not None and m:
            outcome, got, call = self._rank(req, q.messages("number"), m, shown)
            if outcome == "ok":
                return [Proposal(candidate=shown[i], call=call, extra={"shown_number": i + 1, "rank": r + 1})
                        for r, i in enumerate(got[:k])]
            if outcome == "failed" or not self.options.endpoint:
                return [Proposal(failure={"reason": "llm error", "message": got or "no log-probabilities"},
                                 call=call)]

        def build(form):
            answer = menu_answer_kind(form, k)
            return q.messages(answer), (k if answer == "number" else 1), form.menu(numbers, k)

        got, failures = self._ask(req, build, lambda form, t: in_menu_form(form, t, numbers, k), shown)
        out, taken = [_failed(f) for f in failures], set()
        for text, call in got:
            try:
                picks = parse_menu_answer(text, m)
            except AnswerError as e:
                out.append(Proposal(failure={"reason": e.reason, "message": e.message, "answer": text[:500]}, call=call))
                continue
            for num in picks:
                c = shown[num - 1]
                if c.number not in taken and len(taken) < k:
                    taken.add(c.number)
                    out.append(Proposal(candidate=c, call=call, extra={"shown_number": num}))
        return out


    def kernel_move(self, ask) -> KernelPick:
        """The kernel search's question, page by page (``search.kernel_question``): a move's number
        is the choice; a "more" line's number asks the page of the moves it stands for. Ranked
        (``--llm-answer rank``): each page's lines are ranked and the best is taken, a "more" line
        as any other."""
        q = ask.question
        first = page = q.first()
        pages = []
        rank = self.scorer is not None
        for _ in range(len(q.moves) + 4):
            numbers = page.numbers()
            record = {"kernel": {"slot": ask.slot, "state": q.state.key, "page": len(pages) + 1, "moves": len(q.moves),
                                 "lines": [{"number": n, "key": q.moves[ln.move].key} if ln.move is not None else
                                           {"number": n, "more": len(ln.more)} for n, ln in enumerate(page.lines, 1)]}}
            if rank:
                outcome, got, call = self._rank(None, list(page.messages), len(numbers), record)
                if outcome == "ok":
                    pages.append(got[0] + 1)
                    kind, nxt = q.follow(page, got[0] + 1)
                    if kind == "move":
                        return KernelPick(nxt, call=call, extra={"pick": "llm rank", "pages": pages,
                                                                "shown": page.size,
                                                                "first_page": len(first.shown_moves)})
                    page = nxt
                    continue
                if outcome == "failed" or not self.options.endpoint:
                    return KernelPick(failure={"reason": "llm error", "message": got or "no log-probabilities"},
                                      call=call)
                rank = False               # no usable log-probabilities: this question by number from here

            def build(form, page=page, numbers=numbers):
                return list(page.messages), 1, form.menu(numbers, 1)

            got, failures = self._ask(None, build, lambda form, t, numbers=numbers: in_menu_form(form, t, numbers, 1),
                                      record)
            if failures or not got:
                f = dict(failures[0]) if failures else {"reason": "llm error", "message": "no answer"}
                return KernelPick(failure=f, call=f.pop("call", None))
            text, call = got[0]
            try:
                num = parse_menu_answer(text, len(numbers))[0]
            except AnswerError as e:
                return KernelPick(failure={"reason": e.reason, "message": e.message, "answer": text[:500]}, call=call)
            pages.append(num)
            kind, nxt = q.follow(page, num)
            if kind == "move":
                return KernelPick(nxt, call=call, extra={"pick": "llm", "pages": pages, "shown": page.size,
                                                        "first_page": len(first.shown_moves)})
            page = nxt
        return KernelPick(failure={"reason": "parse failed", "message": "the model kept asking for more pages"})


class FreeLLMPolicy(_LLMPolicy):
    name = "llm-free"
    needs_menu = False
    purpose = "free"

    def generate(self, req: Request) -> list[Proposal]:
        from engine.leir.parser import parse_body
        k = max(1, req.k)
        messages = free_messages(req.node, self.prompt_options(req), parent=req.parent, k=k,
                                 root_key=self.ctx.root.key)

        def build(form):
            return messages, 1, (form.free(free_schema(k)) if form.free is not None else {})

        got, failures = self._ask(req, build, lambda form, t: in_free_form(form, t, k))
        if failures:
            return [_failed(f) for f in failures]
        text, call = got[0] if got else ("", None)
        try:
            entries = parse_free_answer(text)
        except AnswerError as e:
            return [Proposal(failure={"reason": e.reason, "message": e.message, "answer": text[:500]}, call=call)]
        out = []
        for e in entries[:max(1, req.k)]:
            label = ", ".join(e["applied_strategies"]) or "free-form"
            try:
                program = req.node.program.with_body(parse_body(e["transformed_IR"]))
            except LeirError as err:
                err.located("<model answer>", e["transformed_IR"])
                out.append(Proposal(failure={"reason": "invalid program", "message": err.format()[:600],
                                             "leir": e["transformed_IR"][:2000]}, label=label, call=call))
                continue
            out.append(Proposal(program=program, label=label, call=call))
        return out
