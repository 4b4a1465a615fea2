"""How an LLM answer is tied to the menu (or, free-form, to a JSON shape) on the servers people
run, and how ``--constraint auto`` finds the form an endpoint speaks.

``FORMS`` is the one table: each form says what it sends (``extra_body`` fields or a
``response_format``), what shape the answer then has (``number``: one menu number per
answer, ``n`` answers; ``json``: one ``{"choices": [...]}`` object), and whether ``auto``
tries it. The order of the table is the order ``auto`` tries, most specific first.

``auto`` (``Negotiator``): the first call of a run sends the first form; a *validation
error* (HTTP 400/422, or a 500 whose body is a request-validation error: see
``search.client``) means the server does not speak it, an answer *not in the form* (prose
under a number constraint) means the server ignored it; either way the same prompt is sent
again in the next form. Free-form answers (``llm-free``) are the paper's, for models trained
to write them (thinking, ``<answer>`` tags): ``auto`` constrains nothing there; the JSON
forms are explicit modes. The first form answered in its own shape is kept for the run (and
for a resumed run). Every try is recorded (``Negotiator.state``); the calls themselves are
in the trajectory's ``llm_calls`` with the form they used.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Optional

MENU_SCHEMA_NAME = "menu_choice"
FREE_SCHEMA_NAME = "transformed_irs"


def menu_schema(numbers: list[int], k: int, *, openai: bool = False) -> dict:
    """``{"choices": [k distinct menu numbers at most]}``. OpenAI's strict mode rejects the
    array-size keywords, so its variant leaves them out (the parser enforces them anyway)."""
    arr = {"type": "array", "items": {"type": "integer", "enum": list(numbers)}}
    if not openai:
        arr.update({"minItems": 1, "maxItems": k, "uniqueItems": True})
    return {"type": "object", "additionalProperties": False, "required": ["choices"], "properties": {"choices": arr}}


def free_schema(k: int) -> dict:
    """One ``{transformed_IR, applied_strategies}`` object (k = 1) or a list of them."""
    entry = {"type": "object", "additionalProperties": False, "required": ["transformed_IR", "applied_strategies"],
             "properties": {"transformed_IR": {"type": "string"},
                            "applied_strategies": {"type": "array", "items": {"type": "string"}}}}
    if k == 1:
        return entry
    entry = dict(entry, properties=dict(entry["properties"], idx={"type": "integer"}),
                 required=["idx", "transformed_IR", "applied_strategies"])
    return {"type": "array", "items": entry, "minItems": 1}


def _json_schema(name: str, schema: dict) -> dict:
    return {"response_format": {"type": "json_schema", "json_schema": {"name": name, "strict": True,
                                                                      "schema": schema}}}


def _alternatives(numbers: list[int]) -> str:
    return "|".join(str(i) for i in numbers)


@dataclass(frozen=True)
class Form:
    name: str
    speaks: str                                   # the servers that understand it
    answer: str                                   # "number" | "json" (menu answers)
    menu: Optional[Callable]                      # (numbers, k) -> {"extra_body"?, "response_format"?}
    free: Optional[Callable]                      # (schema) -> the same, for llm-free; None: not for it
    auto: tuple = ("menu",)                       # the policies whose --constraint auto tries it


FORMS: tuple[Form, ...] = (
    Form("choice", "vLLM (structured_outputs choice)", "number",
         lambda nums, k: {"extra_body": {"structured_outputs": {"choice": [str(i) for i in nums]}}}, None),
    Form("regex", "SGLang (regex)", "number",
         lambda nums, k: {"extra_body": {"regex": f"({_alternatives(nums)})"}}, None),
    Form("grammar", "llama.cpp llama-server, llama-cpp-python (GBNF grammar)", "number",
         lambda nums, k: {"extra_body": {"grammar": "root ::= " + " | ".join(f'"{i}"' for i in nums)}}, None),
    Form("json", "SGLang, vLLM, llama-server (response_format json_schema)", "json",
         lambda nums, k: _json_schema(MENU_SCHEMA_NAME, menu_schema(nums, k)),
         lambda schema: _json_schema(FREE_SCHEMA_NAME, schema)),
    Form("json-object", "llama.cpp llama-server, llama-cpp-python (response_format json_object + schema)", "json",
         lambda nums, k: {"response_format": {"type": "json_object", "schema": menu_schema(nums, k)}},
         lambda schema: {"response_format": {"type": "json_object", "schema": schema}}),
    Form("openai", "OpenAI (json_schema, strict subset)", "json",
         lambda nums, k: _json_schema(MENU_SCHEMA_NAME, menu_schema(nums, k, openai=True)),
         lambda schema: _json_schema(FREE_SCHEMA_NAME, schema)),
    Form("vllm-json", "vLLM (structured_outputs json)", "json",
         lambda nums, k: {"extra_body": {"structured_outputs": {"json": menu_schema(nums, k)}}},
         lambda schema: {"extra_body": {"structured_outputs": {"json": schema}}}, auto=()),
    Form("none", "any server (nothing sent; answers parsed and checked)", "number",
         lambda nums, k: {}, lambda schema: {}, auto=("menu", "free")),
)
FORM = {f.name: f for f in FORMS}
MODES = ("auto",) + tuple(f.name for f in FORMS)


def menu_answer_kind(form: Form, k: int) -> str:
    """How the prompt asks for the answer: one number per answer, or a JSON object of k."""
    if form.name == "none":
        return "number" if k == 1 else "json"
    return form.answer


_NUMBER = re.compile(r"\s*(\d+)\s*")


def in_menu_form(form: Form, text: str, numbers: list[int], k: int) -> bool:
    """Is ``text`` what a server enforcing ``form`` could have produced? (Not: server ignored it.)"""
    if form.name == "none":
        return True
    allowed = set(numbers)
    if menu_answer_kind(form, k) == "number":
        m = _NUMBER.fullmatch(text or "")
        return bool(m) and int(m.group(1)) in allowed
    try:
        value = json.loads(text or "")
    except (json.JSONDecodeError, RecursionError):
        return False
    items = value.get("choices") if isinstance(value, dict) else None
    return (isinstance(items, list) and 1 <= len(items)
            and all(isinstance(i, int) and not isinstance(i, bool) and i in allowed for i in items))


def in_free_form(form: Form, text: str, k: int) -> bool:
    if form.name == "none":
        return True
    try:
        value = json.loads(text or "")
    except (json.JSONDecodeError, RecursionError):
        return False
    entries = value if isinstance(value, list) else [value]
    return bool(entries) and all(isinstance(e, dict) and isinstance(e.get("transformed_IR"), str) for e in entries)


class Negotiator:
    """The form of a run. ``mode``: ``auto`` or a form name (then no fallback). ``resume``:
    the ``state()`` a previous run of the same trajectory recorded (its kept form is reused)."""

    def __init__(self, mode: str, purpose: str = "menu", resume: Optional[dict] = None):
        self.mode = mode
        self.purpose = purpose                       # "menu" | "free": forms without a builder are skipped
        self.tried: list[dict] = []
        self.kept: Optional[str] = None if mode == "auto" else mode
        self.n_max: Optional[int] = None             # the most answers one call gave back when asked for more
        if resume and resume.get("mode") == mode:
            self.tried = list(resume.get("tried") or [])
            self.kept = resume.get("kept") or self.kept
            self.n_max = resume.get("n_max")

    def _usable(self, f: Form) -> bool:
        return (f.menu if self.purpose == "menu" else f.free) is not None

    def candidates(self) -> list[Form]:
        """The forms to try for the next call, in order: the kept one alone, or (auto, not
        settled) every auto form not yet ruled out."""
        if self.kept is not None:
            return [FORM[self.kept]]
        out = [f for f in FORMS if self.purpose in f.auto and self._usable(f) and f.name not in self.ruled_out()]
        return out or [FORM["none"]]

    def ruled_out(self) -> set:
        return {t["form"] for t in self.tried if t["outcome"] in ("rejected", "ignored")}

    @property
    def settled(self) -> bool:
        return self.kept is not None

    def note(self, form: Form, outcome: str, call: Optional[int], detail: str = "") -> None:
        """Record a try: ``accepted`` (kept from now on), ``rejected`` (validation error) or
        ``ignored`` (answer not in the form)."""
        self.tried.append({"form": form.name, "outcome": outcome, "call": call, "detail": detail[:300]})
        if outcome == "accepted" and self.mode == "auto":
            self.kept = form.name

    def forget(self, forms: list[str]) -> None:
        """Undo rejections: every form, ``none`` included, failed validation, so the request
        itself was invalid (too long a prompt, ...), not its constraint."""
        for t in self.tried:
            if t["form"] in forms and t["outcome"] == "rejected":
                t["outcome"] = "rejected (request invalid in every form)"

    def state(self) -> dict:
        return {"mode": self.mode, "kept": self.kept, "tried": list(self.tried), "n_max": self.n_max}
