"""The training examples of ``python -m dataset.train``, read from generated dataset folders.

SFT examples are the menu rows (``train/menu.jsonl``: the search's own request for a state and
the number of the entry measured fastest); DPO examples are the menu-form preference pairs
(``train/preferences_menu.jsonl``). Both become TRL's conversational ``prompt`` / ``completion``
(``chosen`` / ``rejected``) records, the prompt being the row's messages up to its last user
message, byte for byte what the search sends.

``completion``: what the model learns to answer. ``number`` (the default) keeps only the menu
number after ``</think>``: the search and ``dataset.evaluate`` constrain the answer to the menu
numbers (a grammar, a choice list, a regex, a JSON schema), so a model that learned to think first
would be cut off before its first word. ``reason`` keeps the row's whole ``<think>...</think>N``
(for servers asked without a constraint, ``--constraint none``).

Pure and light: no model, no tokenizer; every problem is a ``LeirError`` naming file and line.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from engine.leir.diagnostics import LeirError

COMPLETIONS = ("number", "reason")
_ANSWER = re.compile(r"(?s)(?:<think>.*</think>)?\s*(\d+)\s*")


def answer_text(content: str, completion: str, path: Path, no: int) -> str:
    """The assistant message trained: the whole of it (``reason``) or the number alone."""
    m = _ANSWER.fullmatch(content or "")
    if m is None:
        raise LeirError(f"the assistant message is not '<think>...</think>N' or 'N': {(content or '')[:80]!r}",
                        no, 1, str(path))
    return content if completion == "reason" else m.group(1)


def _lines(path: Path):
    for no, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise LeirError(f"not JSON: {e.msg}", no, e.colno, str(path)) from None
        if not isinstance(rec, dict):
            raise LeirError("expected a JSON object", no, 1, str(path))
        yield no, rec


def _messages(value, path: Path, no: int, what: str) -> list[dict]:
    if not (isinstance(value, list) and value and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                                      and isinstance(m.get("content"), str) for m in value)):
        raise LeirError(f"{what} must be a list of {{role, content}} messages", no, 1, str(path))
    return [{"role": m["role"], "content": m["content"]} for m in value]


def split_files(folder: Path, name: str, split: str) -> list[Path]:
    """``folder/train/NAME`` and/or ``folder/test/NAME`` as ``split`` asks (train, test, all)."""
    return [folder / s / name for s in ("train", "test") if split in (s, "all") and (folder / s / name).is_file()]


def check_folder(folder: str) -> Path:
    p = Path(folder)
    if not p.is_dir():
        raise LeirError("no such dataset folder (give the -o folder of python -m dataset.generate)", file=folder)
    return p


def menu_examples(folders: list[str], split: str, completion: str) -> list[dict]:
    """SFT records ``{"id", "prompt", "completion"}`` of the menu rows of ``split`` in every folder
    (in the order given, each file in its order)."""
    out = []
    for folder in map(check_folder, folders):
        for path in split_files(folder, "menu.jsonl", split):
            for no, rec in _lines(path):
                msgs = _messages(rec.get("messages"), path, no, "messages")
                if msgs[-1]["role"] != "assistant" or len(msgs) < 2 or msgs[-2]["role"] != "user":
                    raise LeirError("a menu row's messages end with the user's request and the assistant's answer",
                                    no, 1, str(path))
                text = answer_text(msgs[-1]["content"], completion, path, no)
                out.append({"id": str(rec.get("id", f"{path.name}:{no}")), "prompt": msgs[:-1],
                            "completion": [{"role": "assistant", "content": text}]})
    return out


def pair_examples(folders: list[str], split: str, completion: str) -> list[dict]:
    """DPO records ``{"id", "prompt", "chosen", "rejected"}`` of the menu-form preference pairs."""
    out = []
    for folder in map(check_folder, folders):
        for path in split_files(folder, "preferences_menu.jsonl", split):
            for no, rec in _lines(path):
                prompt = _messages(rec.get("prompt"), path, no, "prompt")
                pair = {}
                for side in ("chosen", "rejected"):
                    msgs = _messages(rec.get(side), path, no, side)
                    pair[side] = [{"role": "assistant",
                                   "content": answer_text(msgs[-1]["content"], completion, path, no)}]
                out.append({"id": str(rec.get("id", f"{path.name}:{no}")), "prompt": prompt, **pair})
    return out
