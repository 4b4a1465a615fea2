"""The training examples of ``python -m dataset.train``, read from generated dataset folders.

Which examples: ``--examples`` names kinds (``KINDS``), each an SFT file and its preference file:
``menu`` (the default: ``train/menu.jsonl``, the search's own request for a state and the number of
the entry measured fastest; pairs ``train/preferences_menu.jsonl``), ``kernel_menu`` (the kernel
search's question at a kernel, answered; ``preferences_kernel_menu.jsonl``), ``pairwise`` (which of
two entries of a timed menu is faster, ``1`` or ``2``; ``preferences_pairwise.jsonl``: the same
decisive pairs on the question the search asks) and ``pointwise`` (whether one entry is faster than
its parent, ``yes`` or ``no``; no pairs). All become TRL's conversational ``prompt`` / ``completion``
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

import re
from pathlib import Path

from engine.leir.diagnostics import LeirError

COMPLETIONS = ("number", "reason")
# --examples: each kind's SFT file and its preference file (None: the kind has no preference pairs)
KINDS = {"menu": ("menu.jsonl", "preferences_menu.jsonl"),
         "kernel_menu": ("kernel_menu.jsonl", "preferences_kernel_menu.jsonl"),
         "pairwise": ("pairwise.jsonl", "preferences_pairwise.jsonl"),
         "pointwise": ("pointwise.jsonl", None)}
DEFAULT_KINDS = ("menu",)
_ANSWER = re.compile(r"(?s)(?:<think>.*</think>)?\s*(\d+)\s*")
_YES_NO = re.compile(r"(?s)(?:<think>.*</think>)?\s*(yes|no)\s*")
# how a file's answers read (the answer after </think>), when not a number
ANSWERS = {"pointwise.jsonl": (_YES_NO, "'yes' or 'no'")}


def answer_text(content: str, completion: str, path: Path, no: int) -> str:
    """The assistant message trained: the whole of it (``reason``) or the answer alone (the number;
    ``yes`` or ``no`` in pointwise files)."""
    pattern, shape = ANSWERS.get(path.name, (_ANSWER, "'<think>...</think>N' or 'N'"))
    m = pattern.fullmatch(content or "")
    if m is None:
        raise LeirError(f"the assistant message is not {shape}: {(content or '')[:80]!r}", no, 1, str(path))
    return content if completion == "reason" else m.group(1)


def parse_kinds(text: str) -> tuple[str, ...]:
    """The kinds ``--examples`` names (comma-separated, each once, in the order given)."""
    kinds = tuple(dict.fromkeys(k.strip() for k in (text or "").split(",") if k.strip()))
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise LeirError(f"--examples: {'unknown kind ' + repr(bad[0]) if bad else 'no kind given'} (kinds: "
                        f"{', '.join(KINDS)})")
    return kinds


def _lines(path: Path):
    from engine.leir.files import json_lines
    for no, rec in json_lines(path):
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
    return sft_examples(folders, split, completion, DEFAULT_KINDS)


def sft_examples(folders: list[str], split: str, completion: str, kinds=DEFAULT_KINDS) -> list[dict]:
    """SFT records ``{"id", "prompt", "completion"}`` of the ``kinds`` (``KINDS``) of ``split`` in
    every folder: kind by kind, folders in the order given, each file in its order."""
    return _each_file(folders, [KINDS[k][0] for k in kinds], split, lambda path: _sft_file(path, completion))


def _each_file(folders: list[str], names: list[str], split: str, read) -> list[dict]:
    """``read`` of each file ``names`` of ``split`` in every folder: name by name, folders in order."""
    out = []
    for name in names:
        for folder in map(check_folder, folders):
            for path in split_files(folder, name, split):
                out += read(path)
    return out


def _sft_file(path: Path, completion: str) -> list[dict]:
    out = []
    for no, rec in _lines(path):
        msgs = _messages(rec.get("messages"), path, no, "messages")
        if msgs[-1]["role"] != "assistant" or len(msgs) < 2 or msgs[-2]["role"] != "user":
            raise LeirError("a row's messages must end with the user's request and the assistant's answer",
                            no, 1, str(path))
        text = answer_text(msgs[-1]["content"], completion, path, no)
        out.append({"id": str(rec.get("id", f"{path.name}:{no}")), "prompt": msgs[:-1],
                    "completion": [{"role": "assistant", "content": text}]})
    return out


def pair_examples(folders: list[str], split: str, completion: str, kinds=DEFAULT_KINDS) -> list[dict]:
    """DPO records ``{"id", "prompt", "chosen", "rejected"}`` of the preference pairs of the
    ``kinds`` (the menu-form pairs by default): kind by kind, folders in the order given."""
    return _each_file(folders, [KINDS[k][1] for k in kinds if KINDS[k][1]], split,
                      lambda path: _pair_file(path, completion))


def _pair_file(path: Path, completion: str) -> list[dict]:
    out = []
    for no, rec in _lines(path):
        prompt = _messages(rec.get("prompt"), path, no, "prompt")
        pair = {}
        for side in ("chosen", "rejected"):
            msgs = _messages(rec.get(side), path, no, side)
            pair[side] = [{"role": "assistant", "content": answer_text(msgs[-1]["content"], completion, path, no)}]
        out.append({"id": str(rec.get("id", f"{path.name}:{no}")), "prompt": prompt, **pair})
    return out
