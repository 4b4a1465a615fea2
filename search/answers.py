"""Reading model answers. Text from a model is untrusted input: it is parsed (JSON, or Python
literals through ``ast.literal_eval``, which evaluates no code), checked, and either yields
usable proposals or an ``AnswerError`` that the search records as a failed sample. A parse
failure is never passed on as a program (the reference's defect 5)."""
from __future__ import annotations

import ast
import json
import re


class AnswerError(Exception):
    """An answer that cannot be used: ``reason`` (parse failed | not on menu | empty answer)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|<\\answer>|$)", re.S)
_FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)```", re.S)


def strip_wrappers(text: str) -> str:
    """The answer proper: after the last ``</think>``, inside ``<answer>`` tags (either closing
    spelling), inside a code fence."""
    if text is None:
        return ""
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    m = _ANSWER.search(text)
    if m:
        text = m.group(1)
    m = _FENCE.search(text)
    if m:
        text = m.group(1)
    return text.strip()


def _literal(text: str):
    """JSON, else a Python literal; raises ValueError."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
        raise ValueError(str(e)) from None


def _structured(text: str):
    """The answer as a Python value, with the reference's fallbacks: ``{...}, {...}`` objects
    are wrapped in a list; a truncated list is cut after its last complete object."""
    attempts = [text]
    if text.startswith("{") and "idx" in text:
        attempts.append("[" + text + "]")
    if text.startswith("["):
        for close in ('"}', "'}"):
            cut = text.rfind(close)
            if cut > 0:
                attempts.append(text[:cut + 2] + "]")
    start = min([i for i in (text.find("{"), text.find("[")) if i >= 0], default=-1)
    if start > 0:
        attempts.append(text[start:])
    for a in attempts:
        try:
            return _literal(a)
        except ValueError:
            continue
    raise AnswerError("parse failed", f"not a JSON or literal object: {text[:120]!r}")


def parse_free_answer(text: str) -> list[dict]:
    """``[{transformed_IR, applied_strategies: [...]}, ...]`` of an llm-free answer."""
    body = strip_wrappers(text)
    if not body:
        raise AnswerError("empty answer", "the model returned no text")
    value = _structured(body)
    if isinstance(value, dict) and "transformed_IR" not in value:
        inner = [v for v in value.values() if isinstance(v, (dict, list))]
        value = inner[0] if len(inner) == 1 and isinstance(inner[0], list) else list(value.values())
    entries = value if isinstance(value, list) else [value]
    out = []
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("transformed_IR"), str):
            continue
        strat = e.get("applied_strategies", e.get("applied_strategy", []))
        if isinstance(strat, str):
            strat = [strat]
        strat = [str(s) for s in strat] if isinstance(strat, (list, tuple)) else []
        out.append({"transformed_IR": e["transformed_IR"], "applied_strategies": strat})
    if not out:
        raise AnswerError("parse failed", "no entry with a 'transformed_IR' string")
    return out


def parse_menu_answer(text: str, size: int) -> list[int]:
    """The menu numbers (1..size, in order, without repeats) of an answer: a bare number, a
    JSON/literal number, list, or object with "choices" / "choice"."""
    body = strip_wrappers(text)
    if not body:
        raise AnswerError("empty answer", "the model returned no text")
    if re.fullmatch(r"\d+", body):
        value = int(body)
    else:
        try:
            value = _literal(body)
        except ValueError:
            raise AnswerError("parse failed", f"not a menu number: {body[:120]!r}") from None
    if isinstance(value, dict):
        value = value.get("choices", value.get("choice"))
    items = value if isinstance(value, (list, tuple)) else [value]
    nums = []
    for it in items:
        if isinstance(it, str) and it.strip().isdigit():
            it = int(it.strip())
        if isinstance(it, bool) or not isinstance(it, int):
            raise AnswerError("parse failed", f"not a menu number: {str(it)[:60]!r}")
        if not 1 <= it <= size:
            raise AnswerError("not on menu", f"choice {it} is not on the menu (1-{size})")
        if it not in nums:
            nums.append(it)
    if not nums:
        raise AnswerError("parse failed", "the answer names no menu number")
    return nums
