"""The LLM policies, over any OpenAI-compatible endpoint.

``llm`` (menu): the prompt is the paper's (state, known variables, hardware, history) with
a numbered menu of legal steps; the answer is *constrained* to the menu, by vLLM's
``structured_outputs`` choice list (``--constraint choice``, one number per answer, ``n``
answers for ``k`` proposals) or by a JSON schema whose items are an ``enum`` of the menu
numbers (``--constraint json``, through ``response_format``). A server that ignores the
constraint may answer anything: every answer is parsed and checked like untrusted text.

``llm-free``: the paper's free-form mode. The model writes transformed LEIR; it is parsed,
never executed, checked against the program's known tensors (names, dtypes, shapes: the
declarations are the original's, so a body that changes them does not pass analysis), then
verified like any candidate; the search records whether a rule reaches it in one step.
"""
from __future__ import annotations

from engine.leir.diagnostics import LeirError

from ..answers import AnswerError, parse_free_answer, parse_menu_answer
from ..client import ChatClient
from ..prompt import free_prompt, menu_prompt
from .base import Policy, Proposal, Request, stratified


class _LLMPolicy(Policy):
    def __init__(self, options, run):
        super().__init__(options, run)
        self.client = ChatClient(options.endpoint, options.model, api_key_env=options.api_key_env,
                                 timeout=options.llm_timeout, retries=options.retries, seed=options.seed,
                                 backoff_s=float(options.extra.get("backoff_s", 0.5)))
        self.calls = 0

    def _call(self, req: Request, prompt: str, n: int, extra_body=None, response_format=None, shown=None):
        messages = [{"role": "system", "content": self.options.system_prompt}, {"role": "user", "content": prompt}]
        seed = self.options.seed * 100003 + self.calls
        self.calls += 1
        res = self.client.chat(messages, n=n, temperature=self.options.temperature, max_tokens=self.options.max_tokens,
                               seed=seed, extra_body=extra_body, response_format=response_format)
        record = {"node": req.node.id, "policy": self.options.policy, "messages": messages,
                  "request": {"n": n, "temperature": self.options.temperature, "seed": seed,
                              "max_tokens": self.options.max_tokens, "extra_body": extra_body,
                              "response_format": response_format},
                  "answers": res.texts, "finish_reasons": res.finish_reasons, "usage": res.usage,
                  "latency_s": round(res.latency_s, 4), "attempts": res.attempts, "error": res.error}
        if shown is not None:
            record["menu"] = [{"number": i + 1, "candidate": c.number, "strategy": c.step.strategy, "key": c.key}
                              for i, c in enumerate(shown)]
        return res, self.run.record_call(record)

    def state(self) -> dict:
        return {"endpoint": self.options.endpoint, "model": self.options.model, "calls": self.calls,
                "api_key_set": self.client.key_set, "constraint": self.options.constraint}


class MenuLLMPolicy(_LLMPolicy):
    name = "llm"

    def propose(self, req: Request) -> list[Proposal]:
        shown = req.menu
        if len(shown) > self.options.menu_size:
            shown = sorted(stratified(req.menu, self.rng)[:self.options.menu_size], key=lambda c: c.number)
        m, k = len(shown), min(req.k, len(shown))
        numbers = list(range(1, m + 1))
        constraint = self.options.constraint
        extra_body = response_format = None
        if constraint == "choice":
            answer, n = "number", k
            extra_body = {"structured_outputs": {"choice": [str(i) for i in numbers]}}
        elif constraint == "json":
            answer, n = "json", 1
            response_format = {"type": "json_schema", "json_schema": {
                "name": "menu_choice", "strict": True,
                "schema": {"type": "object", "additionalProperties": False, "required": ["choices"],
                           "properties": {"choices": {"type": "array", "minItems": 1, "maxItems": k,
                                                      "uniqueItems": True,
                                                      "items": {"type": "integer", "enum": numbers}}}}}}
        else:
            answer, n = ("number", 1) if k == 1 else ("json", 1)
        prompt = menu_prompt(req.node, req.parent, shown, k=k, history=req.history, algorithm=req.algorithm,
                             target=self.options.target, gpu_name=self.options.gpu_name,
                             root_key=self.run.root.key, answer=answer)
        res, call = self._call(req, prompt, n, extra_body, response_format, shown)
        if res.error is not None:
            return [Proposal(failure={"reason": "llm error", "message": f"{res.error['type']}: {res.error['message']}"},
                             call=call)]
        out, taken = [], set()
        for text in res.texts or [""]:
            try:
                picks = parse_menu_answer(text, m)
            except AnswerError as e:
                out.append(Proposal(failure={"reason": e.reason, "message": e.message, "answer": text[:500]}, call=call))
                continue
            for num in picks:
                c = shown[num - 1]
                if c.number not in taken and len(taken) < k:
                    taken.add(c.number)
                    out.append(Proposal(candidate=c, call=call))
        return out


class FreeLLMPolicy(_LLMPolicy):
    name = "llm-free"
    needs_menu = False

    def propose(self, req: Request) -> list[Proposal]:
        from engine.leir.parser import parse_body
        prompt = free_prompt(req.node, req.parent, k=req.k, history=req.history, algorithm=req.algorithm,
                             target=self.options.target, gpu_name=self.options.gpu_name, root_key=self.run.root.key)
        response_format = None
        if self.options.constraint == "json":
            entry = {"type": "object", "required": ["transformed_IR", "applied_strategies"],
                     "properties": {"idx": {"type": "integer"}, "transformed_IR": {"type": "string"},
                                    "applied_strategies": {"type": "array", "items": {"type": "string"}}}}
            response_format = {"type": "json_schema", "json_schema": {
                "name": "transformed_irs",
                "schema": entry if req.k == 1 else {"type": "array", "items": entry, "minItems": 1}}}
        res, call = self._call(req, prompt, 1, None, response_format)
        if res.error is not None:
            return [Proposal(failure={"reason": "llm error", "message": f"{res.error['type']}: {res.error['message']}"},
                             call=call)]
        text = res.texts[0] if res.texts else ""
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
