"""What a step changes, in few tokens: the text of a menu entry.

A menu shows dozens of steps of the same program; repeating whole statements (every tensor
with its ``^{f32,g}`` annotation) made the softmax menu 7,293 tokens. ``compact_change``
diffs the program before and after the step over statements, then over LEIR tokens (a loop
header, a tensor reference with its indices, an identifier, a number, a character) and shows,
for each change, the new tokens with a couple of tokens of context (``…`` for the rest;
``- old`` when the step only deletes). Tensors in global memory are written without their
annotation (``A_{tx,a}`` for ``A^{f32,g}_{tx,a}``); any other scope keeps it, so a change of
scope stays visible. When the hunks would be longer than the changed statements themselves,
those statements are shown instead. Pure and deterministic: the same programs give the same
text (the dataset's menu rows rely on it).
"""
from __future__ import annotations

import difflib
import re

_TOKEN = re.compile(r"[A-Za-z_]\w*(?:\^\{[^{}]*\})?_\{[^{}]*\}|[A-Za-z_]\w*\^\{[^{}]*\}"  # loop header, tensor
                    r"|[A-Za-z_]\w*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\S")
_GLOBAL = re.compile(r"([A-Za-z_]\w*)\^\{[^{},]*,g\}")


def compact_leir(text: str) -> str:
    """LEIR with the ``^{dtype,g}`` annotations of global tensors left out."""
    return _GLOBAL.sub(r"\1", text)


def _tokens(text: str) -> list[str]:
    return [compact_leir(t) for t in _TOKEN.findall(text)]


def statements(program) -> list[str]:
    from engine.leir.printer import item_to_str
    return [item_to_str(n) for n in program.body]


def changed_statements(before, after) -> list[str]:
    """The top-level statements of ``after`` that are not in ``before``."""
    a, b = statements(before), statements(after)
    out = []
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            out.extend(b[j1:j2])
    if not out and len(b) < len(a):
        out.append("(removes statement(s))")
    return out


CONTEXT = 1          # unchanged tokens kept on each side of a change
MAX_CHARS = 64      # a longer change is cut there (the strategy and its parameters name the step anyway)


def _span(old: list[str], new: list[str]) -> str:
    """The changed tokens of ``new`` with ``CONTEXT`` tokens around each change (hunks closer
    than that merged; ``…`` for what is left out); ``- old`` when the step only deletes."""
    ops = [op for op in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not any(j2 > j1 for _t, _i1, _i2, j1, j2 in ops):
        return "- " + "".join(old[ops[0][1]:ops[-1][2]]) if ops else ""
    windows: list[list[int]] = []
    for _tag, _i1, _i2, j1, j2 in ops:
        lo, hi = max(0, j1 - CONTEXT), min(len(new), j2 + CONTEXT)
        if windows and lo <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], hi)
        else:
            windows.append([lo, hi])
    out, seen = [], set()
    for lo, hi in windows:
        piece = "".join(new[lo:hi])
        if piece not in seen:
            seen.add(piece)
            out.append(("…" if lo > 0 else "") + piece + ("…" if hi < len(new) else ""))
    return "".join(out).replace("……", "…")


def compact_change(before, after) -> str:
    """Per changed region of statements, the changed span of its new text (``; ``-separated),
    or the changed statements in compact notation when those are shorter; at most
    ``MAX_CHARS`` characters."""
    a, b = statements(before), statements(after)
    spans: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            spans.append(_span(_tokens("".join(a[i1:i2])), _tokens("".join(b[j1:j2]))))
    diff = "; ".join(spans)
    whole = " ".join(compact_leir(s) for s in changed_statements(before, after))
    if not diff:
        return "(statements reordered)"
    text = whole if whole and len(whole) < len(diff) else diff
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS].rstrip() + "…"


def full_change(before, after) -> str:
    """The changed statements as LEIR (``--menu-detail full``)."""
    return " ".join(changed_statements(before, after)) or "(statements reordered)"
