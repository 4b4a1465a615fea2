"""The paper's prompt, label and assistant-content formats (dataset.md 6), with two changes.

* Keys agree: the paper's prompt asks for ``'applied_strategies'`` while its labels say
  ``applied_strategy``; here both say ``applied_strategies`` and the label's value is a list
  (of the one strategy that made the row), which is also what the search's free-form prompt and
  its answer grammar ask (search/prompt.py, search/constraint.py).
* The promise of "bitwise identical" outputs is made only on rows verified exactly (a bitwise
  rule, compared exactly); a reassociating row's prompt asks for outputs "numerically equivalent
  within the stated tolerance" and states the verifier's strict bound (``TOLERANCE``).

Labels are valid JSON (double quotes), single and multi alike: the reference's Python-repr
multi label is a defect the project does not reproduce.
"""
from __future__ import annotations

import json
import re

from search.prompt import TORCH_DTYPES

PREFIX = ("Give the following IR of {model_name}: '{leir}', where the known variables are {known_info}. "
          "Do not change the names, shapes or dtypes of these known variables in the IR. \n")
# what the outputs must be: the paper's words on rows verified exactly, the stated tolerance on the others
EXACT = "that produces exactly the same outputs for any floating-point inputs (bitwise identical)"
TOLERANCE = ("that produces outputs numerically equivalent within the stated tolerance for any floating-point "
             "inputs (|actual-expected| <= atol + rtol*|expected| per element, rtol = 16*eps*sqrt(n) with n the "
             "reduction length and eps of the dtype, atol = rtol*max(1, max|expected|))")
SINGLE_REQUEST = ("Please give me a **numerically equivalent transformed** IR {equal}, and also provide applied "
                  "strategy in this transformed IR. \n Return the answer **only** as a valid JSON object with the "
                  "following keys:'transformed_IR', 'applied_strategies'.")
MULTI_REQUEST = ("Please give me at least {k} different **numerically equivalent transformed** IRs {equal}, "
                 "and also provide applied strategy for each transformed IR. \n Return the answer list **only** "
                 "as a valid JSON object, and each entry with the following keys: 'idx', 'transformed_IR', "
                 "'applied_strategies'.")
MULTI_THINK_HEAD = "These {n} transformed IRs can be individually analyzed as follows: "
AT_LEAST = re.compile(r"at least (\d+) different")


def known_item(decl: dict) -> str:
    dtype = TORCH_DTYPES.get(decl["dtype"], f"torch.{decl['dtype']}")
    return f"'{decl['name']}' with the dtype {dtype} and shape {list(decl['shape'])}"


def known_info(program: dict) -> str:
    """``'A' with the dtype torch.float32 and shape [4, 8], ..., and 'C' with ...``: inputs then
    outputs, comma-separated, "and" before the last item."""
    items = [known_item(d) for d in list(program["inputs"]) + list(program["outputs"])]
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + ", and " + items[-1]


def prefix(program: dict) -> str:
    return PREFIX.format(model_name=program["name"], leir=program["leir"], known_info=known_info(program))


def verified_exactly(row: dict) -> bool:
    """A row whose rule is bitwise exact and whose verification compared exactly: the only rows
    whose prompt promises bitwise identical outputs."""
    return row["step"]["exactness"] == "bitwise" and row["verification"]["tolerance"]["mode"] == "exact"


def single_prompt(program: dict, exact: bool = True) -> str:
    return prefix(program) + SINGLE_REQUEST.format(equal=EXACT if exact else TOLERANCE)


def multi_prompt(program: dict, k: int, exact: bool = True) -> str:
    """``exact``: every answer of the row was verified exactly."""
    return prefix(program) + MULTI_REQUEST.format(k=k, equal=EXACT if exact else TOLERANCE)


def single_label(transformed: str, strategy: str) -> str:
    return json.dumps({"transformed_IR": transformed, "applied_strategies": [strategy]})


def multi_label(items: list[tuple[str, str]]) -> str:
    """``items``: (transformed LEIR, strategy) in answer order; idx numbered from 0."""
    return json.dumps([{"idx": i, "transformed_IR": t, "applied_strategies": [s]} for i, (t, s) in enumerate(items)])


def single_answer(cot: str, label: str) -> str:
    return f"<think>{cot}</think><answer>{label}</answer>"


def multi_think(traces: list[str]) -> str:
    return MULTI_THINK_HEAD.format(n=len(traces)) + "\n".join(f"{i}. {t}" for i, t in enumerate(traces))


def multi_answer(traces: list[str], label: str) -> str:
    return f"<think>{multi_think(traces)}</think><answer>{label}</answer>"


def messages(prompt: str, answer: str) -> list[dict]:
    return [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]


_ANSWER = re.compile(r"^<think>(?P<think>.*)<[/\\]think><answer>(?P<answer>.*)<[/\\]answer>$", re.DOTALL)


def split_answer(content: str) -> tuple[str, str] | None:
    """(think, answer) of an assistant message, accepting both closing-tag spellings."""
    m = _ANSWER.match(content)
    return (m["think"], m["answer"]) if m else None
