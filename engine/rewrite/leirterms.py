"""LEIR expressions in rule files, translated into the schema's egglog terms at load time.

Two places take them (engine/rewrite/rulebook.py calls this module):

* an identity's LEFT and RIGHT, ``(identity "powsimp/exp_product" "exp(a)*exp(b)" "exp(a+b)")``;
* the term macro ``(leir "TEXT" (NAME TERM) ...)``, usable anywhere inside a rule, e.g.
  ``(= s3 (Nest ls (ICons (Eqn y (leir "exp(e-mx)/sx") yi) (INil))))``.

TEXT is parsed by the LEIR parser's expression entry point (``parse_expr``): numbers, tensor
reads with concrete names, calls, unary and binary operators, comparisons. Every lowercase
name is an egglog variable of the same name (a pattern variable in a query, a ``let`` in the
actions), unless a ``(NAME TERM)`` binding gives it a term, which is written in its place:
``(leir "exp(v-p)" (v (Ref n d sc ix)))``. Written out::

    1/(1+exp(-x))   ->  (Bin "/" (Num "1") (Bin "+" (Num "1") (Call "exp" (ECons (Un "-" x) (ENil)))))
    f==-inf         ->  (Cmp "==" (ECons f (ECons (Un "-" (Num "inf")) (ENil))))

The translation is textual and exact: the loader's expanded rule text is what a rule author
would have written with the constructors, so rule files written either way load the same
egglog program. Errors point at the file position of the offending character in TEXT.
"""
from __future__ import annotations

from engine.leir.ast import BinOp, Call, Compare, Num, Ref, Unary, Var
from engine.leir.diagnostics import LeirError
from engine.rewrite.sexp import edit_text, in_place

MACRO = "leir"


class ExprError(Exception):
    """A LEIR expression of a rule file that cannot be translated, at (line, col) of the file."""

    def __init__(self, msg: str, line: int, col: int):
        super().__init__(msg)
        self.line, self.col = line, col


def _q(s: str) -> str:
    return '"' + s + '"'


def _list(items: list[str]) -> str:
    out = "(ENil)"
    for x in reversed(items):
        out = f"(ECons {x} {out})"
    return out


def term_text(expr, name) -> str:
    """The egglog term of a LEIR AST node; ``name(var)`` gives the text of a lowercase name."""
    t = type(expr)
    if t is Num:
        return f"(Num {_q(expr.text)})"
    if t is Var:
        return name(expr)
    if t is Unary:
        return f"(Un {_q(expr.op)} {term_text(expr.operand, name)})"
    if t is BinOp:
        return f"(Bin {_q(expr.op)} {term_text(expr.lhs, name)} {term_text(expr.rhs, name)})"
    if t is Call:
        return f"(Call {_q(expr.func)} {_list([term_text(a, name) for a in expr.args])})"
    if t is Compare:
        return f"(Cmp {_q(','.join(expr.ops))} {_list([term_text(a, name) for a in expr.operands])})"
    if t is Ref:
        return (f"(Ref {_q(expr.name)} {_q(expr.dtype)} {_q(expr.scope)} "
                f"{_list([term_text(i, name) for i in expr.index])})")
    raise TypeError(f"not a LEIR expression: {t.__name__}")


def _at(pos, line: int, col: int) -> tuple[int, int]:
    """File position of ``pos`` (a (line, col) inside a string literal, 1-based) when the
    literal's opening quote is at (line, col) of the file."""
    if pos is None:
        return line, col
    pl, pc = pos
    return (line, col + pc) if pl == 1 else (line + pl - 1, pc)


def leir_term(text: str, line: int, col: int, bindings: dict[str, str] | None = None,
              reserved=(), declared: set[str] | None = None) -> tuple[str, set[str]]:
    """(egglog term text of the LEIR expression ``text``, the names it used). ``text`` is the
    content of a string literal whose opening quote is at (line, col) of the rule file.

    ``bindings``: name -> term text written in the name's place. ``reserved``: names that must
    not occur. ``declared`` (identities): a name of more than one letter must be bound or in
    it (a typo such as ``ab`` for ``a*b`` is an error, not a new pattern variable)."""
    from engine.leir.parser import parse_expr
    bindings = bindings or {}
    if "\\" in text:
        where = _at(_offset(text, text.index("\\")), line, col)
        raise ExprError("a LEIR expression in a rule file takes no escapes", *where)
    try:
        expr = parse_expr(text)
    except LeirError as e:
        raise ExprError(f"in LEIR expression: {e.message}", *_at((e.line or 1, e.col or 1), line, col)) from None
    used: set[str] = set()

    def name(v: Var) -> str:
        n = v.name
        if n in reserved:
            raise ExprError(f"'{n}' is a name of the rule template ({' '.join(reserved)}): rename it",
                            *_at(v.pos and (v.pos.line, v.pos.col), line, col))
        if n in bindings:
            used.add(n)
            return bindings[n]
        if declared is not None and len(n) > 1 and n not in declared:
            raise ExprError(f"'{n}' is neither a one-letter pattern variable nor a name bound by :where or :let",
                            *_at(v.pos and (v.pos.line, v.pos.col), line, col))
        used.add(n)
        return n

    return term_text(expr, name), used


def _offset(text: str, i: int) -> tuple[int, int]:
    """(line, col) of character i of text, 1-based."""
    before = text[:i]
    return before.count("\n") + 1, i - before.rfind("\n")


# ------------------------------------------------------------------ the (leir ...) macro


def _bindings(pairs, render, problems) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for b in pairs:
        ok = b.is_list and len(b.value) == 2 and not b.value[0].is_list and b.value[0].value.isidentifier() \
            and b.value[0].value[:1].islower()
        if not ok:
            problems.append((b.line, b.col, "a binding is (NAME TERM), NAME a lowercase name"))
            return None
        out[b.value[0].value] = render(b.value[1])
    return out


def _render(x, problems) -> str:
    """The text of form x on one line, every (leir ...) inside it expanded."""
    if not x.is_list:
        return x.value
    if x.head == MACRO:
        return _expand_one(x, problems)
    return "(" + " ".join(_render(c, problems) for c in x.value) + ")"


def _expand_one(form, problems) -> str:
    items = form.value[1:]
    if not items or items[0].is_list or not items[0].value.startswith('"'):
        problems.append((form.line, form.col, f'({MACRO} "TEXT" (NAME TERM) ...) takes a LEIR expression string first'))
        return "(ENil)"
    s = items[0]
    binds = _bindings(items[1:], lambda t: _render(t, problems), problems)
    if binds is None:
        return "(ENil)"
    try:
        term, used = leir_term(s.value[1:-1], s.line, s.col, binds)
    except ExprError as e:
        problems.append((e.line, e.col, str(e)))
        return "(ENil)"
    for b in items[1:]:
        if b.value[0].value not in used:
            problems.append((b.line, b.col, f"binding '{b.value[0].value}' is not used in the expression"))
    return term


def _outermost(forms, out: list) -> list:
    for f in forms:
        if f.is_list:
            if f.head == MACRO:
                out.append(f)
            else:
                _outermost(f.value, out)
    return out


def expand_macros(text: str, forms) -> tuple[str, list[tuple[int, int, str]]]:
    """(``text`` with every ``(leir ...)`` form replaced by its term, problems as (line, col,
    message)). ``forms``: ``read_sexps(text)``. A form's replacement stays on its first line
    and the form's newlines follow it, so every later line keeps its number."""
    problems: list[tuple[int, int, str]] = []
    edits = [in_place(text, f, _expand_one(f, problems)) for f in _outermost(forms, [])]
    return edit_text(text, edits), problems
