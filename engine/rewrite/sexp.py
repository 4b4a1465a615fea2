"""Reading egglog text as s-expressions: located forms (line, column, offsets), so the rule
loader and ``engine.lint`` can point at the form a message is about. The one reader of rule
files: everything that looks into them or rewrites them (rulesets, identities, ``(leir ...)``
terms) works on these forms, and edits the text at their offsets (``edit_text``)."""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class SExp:
    """A parsed form: list items or an atom, with its 1-based line and column."""

    value: object          # list[SExp] | str (atoms keep their source text; strings quoted)
    line: int
    col: int
    start: int = -1        # offsets of the form in its text: text[start:end]
    end: int = -1

    @property
    def is_list(self) -> bool:
        return isinstance(self.value, list)

    @property
    def head(self) -> str | None:
        if self.is_list and self.value and not self.value[0].is_list:
            return self.value[0].value
        return None


TOKEN = re.compile(r'\s+|;[^\n]*|"(?:[^"\\]|\\.)*"|[()]|[^\s()";]+')


class SExpError(Exception):
    def __init__(self, msg, line, col):
        super().__init__(msg)
        self.line, self.col = line, col


def read_sexps(text: str) -> list[SExp]:
    """Top-level forms of an egglog file (comments dropped)."""
    stack: list[SExp] = [SExp([], 0, 0)]
    line, lstart = 1, 0
    for m in TOKEN.finditer(text):
        tok = m.group()
        col = m.start() - lstart + 1
        if tok[0].isspace() or tok[0] == ";":
            n = tok.count("\n")
            if n:
                line += n
                lstart = m.start() + tok.rfind("\n") + 1
            continue
        if tok == "(":
            node = SExp([], line, col, m.start())
            stack[-1].value.append(node)
            stack.append(node)
        elif tok == ")":
            if len(stack) == 1:
                raise SExpError("unbalanced ')'", line, col)
            stack.pop().end = m.end()
        else:
            stack[-1].value.append(SExp(tok, line, col, m.start(), m.end()))
    if len(stack) != 1:
        raise SExpError("unclosed '('", stack[-1].line, stack[-1].col)
    return stack[0].value


def sexp_text(x: SExp) -> str:
    """The form on one line (atoms as written, one space between items)."""
    if not x.is_list:
        return x.value
    return "(" + " ".join(sexp_text(c) for c in x.value) + ")"


def walk(x: SExp):
    """The form and every form inside it, depth first, in text order."""
    yield x
    if x.is_list:
        for c in x.value:
            yield from walk(c)


def edit_text(text: str, edits) -> str:
    """``text`` with each ``(start, end, replacement)`` applied; the spans must not overlap."""
    out, pos = [], 0
    for start, end, new in sorted(edits, key=lambda e: e[0]):
        out += [text[pos:start], new]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def in_place(text: str, form: SExp, replacement: str) -> tuple[int, int, str]:
    """The edit replacing ``form`` with ``replacement`` on the form's first line, the form's
    newlines following it, so every later line keeps its number."""
    return form.start, form.end, replacement + "\n" * text.count("\n", form.start, form.end)


def keyword(form: SExp, key: str) -> SExp | None:
    """The value after ``:key`` in a form, if present."""
    items = form.value
    for i, it in enumerate(items[:-1]):
        if not it.is_list and it.value == key:
            return items[i + 1]
    return None
