"""AST -> canonical Step-TP text: superscript first, no spaces, source spelling of numbers.

Parentheses written in the source are kept (``paren`` flags); any others that precedence
requires are added, so every AST prints to text that parses back to an equal AST.
"""
from __future__ import annotations

from dataclasses import replace

from engine.leir.ast import (BinOp, Call, Compare, Equation, Loop, Nest, Num, Ref, Unary, Var, children,
                             with_children)

# Binding strength of each construct (higher binds tighter); mirrors leir.lark.
_PREC_OR, _PREC_AND, _PREC_CMP, _PREC_ADD, _PREC_MUL, _PREC_UNARY, _PREC_POW, _PREC_ATOM = range(1, 9)
_BINOP_PREC = {"|": _PREC_OR, "&": _PREC_AND, "+": _PREC_ADD, "-": _PREC_ADD,
               "*": _PREC_MUL, "/": _PREC_MUL, "//": _PREC_MUL, "%": _PREC_MUL, "**": _PREC_POW}


def _prec(e) -> int:
    if isinstance(e, BinOp):
        return _BINOP_PREC[e.op]
    if isinstance(e, Compare):
        return _PREC_CMP
    if isinstance(e, Unary):
        return _PREC_UNARY
    return _PREC_ATOM


class Printer:
    """Canonical printer; with ``memo`` (a dict) it remembers the text of every node it
    printed, by identity. Neighbours of one program share almost all of their nodes with it
    and with each other (engine.enumerate), so a shared memo prints each node once."""

    __slots__ = ("memo",)

    def __init__(self, memo: dict | None = None):
        self.memo = memo

    def expr(self, e, need: int = 0) -> str:
        """Print ``e`` in a context that requires binding strength ``need``."""
        s = self.bare(e)
        if e.paren or _prec(e) < need:
            return "(" + s + ")"
        return s

    def bare(self, e) -> str:
        return self._remembered(e, self._bare)

    def _remembered(self, node, render) -> str:
        memo = self.memo
        if memo is None:
            return render(node)
        got = memo.get(id(node))
        if got is not None and got[0] is node:
            return got[1]
        s = render(node)
        memo[id(node)] = (node, s)     # the node is kept alive, so its id is not reused
        return s

    def _bare(self, e) -> str:
        if isinstance(e, Num):
            return e.text
        if isinstance(e, Var):
            return e.name
        if isinstance(e, Ref):
            return self.ref(e)
        if isinstance(e, Unary):
            return e.op + self.expr(e.operand, _PREC_UNARY)
        if isinstance(e, BinOp):
            p = _BINOP_PREC[e.op]
            if e.op == "**":  # base is an atom, exponent a unary; right-associative
                return self.expr(e.lhs, _PREC_ATOM) + "**" + self.expr(e.rhs, _PREC_UNARY)
            return self.expr(e.lhs, p) + e.op + self.expr(e.rhs, p + 1)
        if isinstance(e, Compare):
            out = self.expr(e.operands[0], _PREC_ADD)
            for op, operand in zip(e.ops, e.operands[1:]):
                out += op + self.expr(operand, _PREC_ADD)
            return out
        if isinstance(e, Call):
            return e.func + "(" + ",".join(self.expr(a) for a in e.args) + ")"
        raise TypeError(f"not an expression: {e!r}")

    def ref(self, r: Ref) -> str:
        s = f"{r.name}^{{{r.dtype},{r.scope}}}"
        if r.index:
            s += "_{" + ",".join(self.expr(i) for i in r.index) + "}"
        return s

    def item(self, it) -> str:
        return self._remembered(it, self._item)

    def _item(self, it) -> str:
        if isinstance(it, Equation):
            return self.ref(it.lhs) + "=" + self.expr(it.rhs) + ";"
        if isinstance(it, Nest):
            return "".join(loop_to_str(l) for l in it.loops) + "[" + "".join(self.item(b) for b in it.body) + "];"
        raise TypeError(f"not a statement: {it!r}")

    def body(self, body) -> str:
        return "".join(self.item(n) for n in body)


_PLAIN = Printer()


# --------------------------------------------------------------------------- layout as read back


def with_printed_parens(item, memo: dict | None = None):
    """``item`` (a statement or an expression) as the parser builds it from its printed text:
    the parser keeps every parenthesis it reads as a ``paren`` flag, so each expression the
    printer parenthesises (its own flag, or precedence) gets the flag. Nothing else changes,
    and a node already so is returned as it is (``memo``: id -> result, shared across calls).

    Flags take no part in equality but decide the printed text of a node moved by a rewrite
    into a context that needs no parentheses: a tree a rule built and the same program read
    back from its text print alike only once both carry the flags the text implies
    (``engine.rewrite.enumerator`` applies this to what it rewrites and what it builds)."""
    memo = {} if memo is None else memo
    if isinstance(item, Equation):
        lhs, rhs = _layout(item.lhs, 0, memo), _layout(item.rhs, 0, memo)
        return item if lhs is item.lhs and rhs is item.rhs else replace(item, lhs=lhs, rhs=rhs)
    if isinstance(item, Nest):
        body = tuple(with_printed_parens(b, memo) for b in item.body)
        return item if all(a is b for a, b in zip(body, item.body)) else replace(item, body=body)
    return _layout(item, 0, memo)


def _layout(e, need: int, memo: dict):
    key = (id(e), need)
    got = memo.get(key)
    if got is not None and got[0] is e:
        return got[1]
    if isinstance(e, BinOp):
        p = _BINOP_PREC[e.op]
        needs = (_PREC_ATOM, _PREC_UNARY) if e.op == "**" else (p, p + 1)
    elif isinstance(e, Unary):
        needs = (_PREC_UNARY,)
    elif isinstance(e, Compare):
        needs = (_PREC_ADD,) * len(e.operands)
    else:                                        # Ref indices, Call arguments: no context
        needs = (0,) * len(children(e))
    kids = children(e)
    new = tuple(_layout(c, n, memo) for c, n in zip(kids, needs))
    paren = e.paren or _prec(e) < need
    out = e
    if any(a is not b for a, b in zip(new, kids)):
        out = with_children(e, new)
    if paren != e.paren:
        out = replace(out, paren=paren)
    memo[key] = (e, out)
    return out


def expr_to_str(e, need: int = 0) -> str:
    """Print ``e`` in a context that requires binding strength ``need``."""
    return _PLAIN.expr(e, need)


def ref_to_str(r: Ref) -> str:
    return _PLAIN.ref(r)


def loop_to_str(l: Loop) -> str:
    return f"{l.kind}^{{{l.extent}}}_{{{l.var}=0}}"


def item_to_str(it) -> str:
    return _PLAIN.item(it)


def body_to_str(body) -> str:
    """Canonical text of a program body (a sequence of top-level nests)."""
    return _PLAIN.body(body)


# --------------------------------------------------------------------------- display form


def _display_ref(r: Ref) -> str:
    sub = "_{" + ",".join(_display_expr(i) for i in r.index) + "}" if r.index else ""
    return f"{r.name}{sub}^{{{r.dtype},{r.scope}}}"


def _display_expr(e) -> str:
    """Like ``expr_to_str`` but subscript first and spaces around binary operators."""
    if isinstance(e, Ref):
        s = _display_ref(e)
    elif isinstance(e, BinOp):
        p = _BINOP_PREC[e.op]
        if e.op == "**":
            s = _wrap(e.lhs, _PREC_ATOM) + "**" + _wrap(e.rhs, _PREC_UNARY)
        else:
            s = _wrap(e.lhs, p) + f" {e.op} " + _wrap(e.rhs, p + 1)
    elif isinstance(e, Unary):
        s = e.op + _wrap(e.operand, _PREC_UNARY)
    elif isinstance(e, Compare):
        s = _wrap(e.operands[0], _PREC_ADD)
        for op, o in zip(e.ops, e.operands[1:]):
            s += f" {op} " + _wrap(o, _PREC_ADD)
    elif isinstance(e, Call):
        s = e.func + "(" + ", ".join(_display_expr(a) for a in e.args) + ")"
    else:
        s = _PLAIN.bare(e)
    return s


def _wrap(e, need: int) -> str:
    s = _display_expr(e)
    return "(" + s + ")" if e.paren or _prec(e) < need else s


def _display_item(it, indent: str) -> list[str]:
    if isinstance(it, Equation):
        return [indent + _display_ref(it.lhs) + " = " + _display_expr(it.rhs) + ";"]
    loops = " ".join(f"{l.kind}_{{{l.var}=0}}^{{{l.extent}}}" for l in it.loops)
    lines = [indent + loops + " ["]
    for b in it.body:
        lines += _display_item(b, indent + "  ")
    lines.append(indent + "];")
    return lines


def body_to_display(body) -> str:
    """The paper's display form: subscript before superscript, spaces, one equation per line.

    It parses back to the same AST; use it for reading, never for data.
    """
    lines: list[str] = []
    for n in body:
        lines += _display_item(n, "")
    return "\n".join(lines) + "\n"
