"""Timed menus: every question a ``--time --menu`` or ``--time --kernel-menu`` job measured, kept.

A menu row (``dataset.text.menu``) or a kernel row (``dataset.text.kernel_menu``) is written only
where some entry is measured faster, yet every entry of a measured question was verified and timed
against the same parent (the state's program, or the slot's kernel). A timed menu record keeps all of
it, answered or not, so that the pairwise and pointwise examples (``dataset.text.pairwise``) are made
from every timing and ``dataset.check`` re-derives them: the question's first request (system, user),
its ``header`` (the user message before the entries: the state or the kernel as the search describes
it), and per entry its key, label, line (as the question shows it, without its number), steps,
number on the first page (None when the kernel question shows it on a later page), verification and
timing (speedup, interval, verdict, the record).

``form``: ``kernel`` (the kernel search's question at one slot's kernel, its timed moves) or ``menu``
(the search's question at a state, its shown entries). Pure: built from a measured question, no I/O.
"""
from __future__ import annotations


def header_of(user: str, intro: str) -> str:
    """The user message before its list of entries (which starts with ``intro``)."""
    at = user.find("\n\n" + intro)
    if at < 0:
        raise ValueError("the question's user message has no list of entries")
    return user[:at]


def _entry(e: dict, text: str, label: str, steps: list, number) -> dict:
    t = e["timing"]
    return {"key": e["key"], "label": label, "text": text, "steps": steps, "number": number,
            "verified": bool(e["verified"]), "speedup": t["speedup"] if t else None,
            "ci": list(t["ci"]) if t else None, "verdict": t["verdict"] if t else None, "timing": t}


def kernel_record(rid: str, q, chosen: list[int], entries: list[dict], program, depth: int, index: int,
                  slots) -> dict:
    """The timed menu of a measured slot (``kernel_menu.measured_slot``; ``rid``: its kernel row's
    id): the first page's request, every timed move (a move the first page does not show has
    ``number`` None)."""
    from search.kernel_question import MOVES_INTRO
    messages = [dict(m) for m in q.first().messages]
    return {"id": rid, "form": "kernel", "program": program.to_json(), "depth": depth, "slot": index,
            "slots": len(slots), "kernel": slots[index].kernel.to_json(), "kernel_key": slots[index].key,
            "messages": messages, "header": header_of(messages[1]["content"], MOVES_INTRO),
            "entries": [_entry(e, e["text"], e["label"], e["steps"], e["number"] if len(e["path"]) == 1 else None)
                        for e in entries],
            "split": None}


def menu_line(c, current, detail: str, number: int) -> str:
    """An entry's line as the search's menu shows it, without its number."""
    from search.prompt import menu_entry
    return menu_entry(number, c, current, detail)[len(f"{number}. "):]


def menu_record(q, entries: list[dict], program, depth: int, history=()) -> dict:
    """The timed menu of a measured state (``menu.measured_menu``): the search's request, every
    entry shown."""
    from search.prompt import MENU_INTRO

    from .menu import menu_id
    messages = [dict(m) for m in q.messages("number")]
    detail = q.options.detail
    return {"id": menu_id(program, history), "form": "menu", "program": program.to_json(), "depth": depth,
            "slot": None, "slots": None, "kernel": None, "kernel_key": None, "messages": messages,
            "header": header_of(messages[1]["content"], MENU_INTRO[detail]),
            "entries": [_entry(e, menu_line(c, q.state.program, detail, e["number"]), e["strategy"], [e["step"]],
                               e["number"]) for e, c in zip(entries, q.shown)],
            "split": None}
