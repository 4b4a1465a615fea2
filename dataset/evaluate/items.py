"""The prompts a model evaluation asks, read from a generated dataset folder.

``single`` items: the chat rows of ``train/single.jsonl`` and ``test/single.jsonl`` (the split asked;
a folder of the older layout has one ``single.jsonl``) joined by id with
their archival rows in ``rows.jsonl`` (the original program, the step's strategy, category and
difficulty bucket). ``menu`` items: the rows of ``train/menu.jsonl`` and ``test/menu.jsonl`` (schema in docs/dataset.md and
``MENU_ROW`` below): the prompt messages, the menu (shown number -> step key, strategy, measured
speedup, timing verdict) and the answer number. The evaluation sends a row's messages up to its last
user message; the assistant message is the label, never shown to the model.
"""
from __future__ import annotations

import json
from pathlib import Path

from engine.leir.diagnostics import LeirError

SPLITS = ("test", "train", "all")
MENU_ROW = {
    "type": "object",
    "required": ["id", "split", "messages", "menu", "answer"],
    "properties": {
        "id": {"type": "string"},
        "split": {"enum": ["train", "test"]},
        "program": {"type": "object"},
        "messages": {"type": "array", "minItems": 1,
                     "items": {"type": "object", "required": ["role", "content"]}},
        "menu": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["number", "key"],
            "properties": {"number": {"type": "integer", "minimum": 1}, "key": {"type": "string"},
                           "strategy": {"type": "string"}, "speedup": {"type": ["number", "null"]},
                           "verdict": {"type": ["string", "null"]}}}},
        "answer": {"type": ["integer", "null"]},
    },
}


def _jsonl(path: Path) -> list[tuple[int, dict]]:
    out = []
    for no, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((no, json.loads(line)))
        except json.JSONDecodeError as e:
            raise LeirError(f"not JSON: {e.msg}", no, e.colno, str(path)) from None
    return out


def prompt_messages(messages: list[dict], system_prompt: str) -> list[dict]:
    """What the model is sent: the row's messages up to its last user message, with the
    system prompt first when the row has none."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last is None:
        raise ValueError("no user message")
    msgs = [{"role": m["role"], "content": m["content"]} for m in messages[:last + 1]]
    if msgs[0]["role"] != "system":
        msgs.insert(0, {"role": "system", "content": system_prompt})
    return msgs


def _chat_files(folder: Path, name: str, split: str) -> list[Path]:
    """A training file's split files (``train/NAME``, ``test/NAME``) that ``split`` reads; a
    folder of the older layout has one ``NAME`` holding both."""
    files = [folder / s / name for s in ("train", "test") if split in (s, "all") and (folder / s / name).exists()]
    return files or [p for p in [folder / name] if p.exists()]


def single_items(folder: Path, split: str, system_prompt: str) -> list[dict]:
    chats, rows = _chat_files(folder, "single.jsonl", split), folder / "rows.jsonl"
    if not chats:
        return []
    if not rows.exists():
        raise LeirError("the dataset has single.jsonl but no rows.jsonl (the archival rows the prompts refer to)",
                        file=str(rows))
    archive = {r["id"]: r for _, r in _jsonl(rows)}
    items = []
    for no, rec, chat in ((no, rec, c) for c in chats for no, rec in _jsonl(c)):
        if split != "all" and rec.get("split") != split:
            continue
        row = archive.get(rec.get("id"))
        if row is None:
            raise LeirError(f"chat row '{rec.get('id')}' has no archival row in rows.jsonl", no, 1, str(chat))
        step = row["step"]
        items.append({"kind": "single", "id": rec["id"], "split": rec.get("split"),
                      "messages": prompt_messages(rec["messages"], system_prompt), "program": row["program"],
                      "strategy": step["strategy"], "category": step.get("category") or "",
                      "bucket": (row.get("difficulty") or {}).get("bucket") or ""})
    return items


def menu_items(folder: Path, split: str, system_prompt: str) -> list[dict]:
    """The menu rows of ``train/menu.jsonl`` and ``test/menu.jsonl`` (one file per split)."""
    items = []
    for path in _chat_files(folder, "menu.jsonl", split):
        items += _menu_items(path, split, system_prompt)
    return items


def _menu_items(path: Path, split: str, system_prompt: str) -> list[dict]:
    from ..assembly.file_schema import validator
    v = validator(MENU_ROW)
    items = []
    for no, rec in _jsonl(path):
        err = next(iter(v.iter_errors(rec)), None)
        if err is not None:
            where = "/".join(str(p) for p in err.path)
            raise LeirError(f"not a menu row: {where + ': ' if where else ''}{err.message[:160]}", no, 1, str(path))
        if split != "all" and rec["split"] != split:
            continue
        numbers = [e["number"] for e in rec["menu"]]
        if numbers != list(range(1, len(numbers) + 1)):
            raise LeirError("menu entries must be numbered 1, 2, ... in order (the numbers shown are the numbers "
                            "an answer names)", no, 1, str(path))
        items.append({"kind": "menu", "id": rec["id"], "split": rec["split"],
                      "messages": prompt_messages(rec["messages"], system_prompt), "menu": rec["menu"],
                      "answer": rec["answer"], "program": rec.get("program")})
    return items


def load_items(dataset: str, split: str, system_prompt: str) -> list[dict]:
    """Every prompt of ``split`` in the dataset folder, single ones first, each in file order."""
    folder = Path(dataset)
    if split not in SPLITS:
        raise LeirError(f"unknown split '{split}' (expected one of {', '.join(SPLITS)})")
    if not folder.is_dir():
        raise LeirError("no such dataset folder (give the -o folder of python -m dataset.generate)", file=dataset)
    if not _chat_files(folder, "single.jsonl", "all") and not _chat_files(folder, "menu.jsonl", "all"):
        raise LeirError("not a generated dataset: no train/ or test/ single.jsonl or menu.jsonl here", file=dataset)
    items = single_items(folder, split, system_prompt) + menu_items(folder, split, system_prompt)
    ids = [(i["kind"], i["id"]) for i in items]
    if len(set(ids)) != len(ids):
        raise LeirError("the dataset repeats a prompt id", file=dataset)
    return items
