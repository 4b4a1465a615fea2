"""A small builder for LEIR expressions, so translation rules read like the formulas they emit.

``E`` wraps an ``engine.ast`` expression and overloads the Python operators; Python numbers
become literals spelled as the reference translator spells them (``repr`` of the number,
negative values as unary minus). Index helpers fold ``*1`` and ``+0`` away so that emitted
subscripts look like the reference's (``c+g``, ``c*3+f*4``, ``c-2``).
"""
from __future__ import annotations

import math
from typing import Union

from engine.leir.ast import BinOp, Call, Compare, Num, Unary, Var

Number = Union[int, float, bool]


def lit(v: Number):
    """The literal for a Python number (``inf`` for infinities, unary minus for negatives)."""
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, float):
        if math.isnan(v):
            raise ValueError("NaN has no LEIR literal")
        if math.isinf(v):
            return Num("inf") if v > 0 else Unary("-", Num("inf"))
        text = repr(abs(v))
    else:
        text = str(abs(int(v)))
    n = Num(text)
    return Unary("-", n) if v < 0 else n


def ast(x):
    """An AST expression from an ``E``, an AST node or a Python number."""
    if isinstance(x, E):
        return x.node
    if isinstance(x, (int, float, bool)):
        return lit(x)
    return x


class E:
    """Operator-overloading wrapper around an LEIR expression node."""

    __slots__ = ("node",)

    def __init__(self, node):
        self.node = ast(node)

    def _bin(self, op, other, swap=False):
        a, b = (ast(other), self.node) if swap else (self.node, ast(other))
        return E(BinOp(op, a, b))

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, True)
    def __truediv__(self, o): return self._bin("/", o)
    def __rtruediv__(self, o): return self._bin("/", o, True)
    def __floordiv__(self, o): return self._bin("//", o)
    def __mod__(self, o): return self._bin("%", o)
    def __pow__(self, o): return self._bin("**", o)
    def __neg__(self): return E(Unary("-", self.node))
    def __and__(self, o): return self._bin("&", o)
    def __or__(self, o): return self._bin("|", o)

    # comparisons build Compare nodes (only used inside if_then_else conditions)
    def lt(self, o): return E(Compare(("<",), (self.node, ast(o))))
    def le(self, o): return E(Compare(("<=",), (self.node, ast(o))))
    def gt(self, o): return E(Compare((">",), (self.node, ast(o))))
    def ge(self, o): return E(Compare((">=",), (self.node, ast(o))))
    def eq(self, o): return E(Compare(("==",), (self.node, ast(o))))
    def ne(self, o): return E(Compare(("!=",), (self.node, ast(o))))


def call(fn: str, *args) -> E:
    return E(Call(fn, tuple(ast(a) for a in args)))


def exp(x): return call("exp", x)
def log(x): return call("log", x)
def sqrt(x): return call("sqrt", x)
def fabs(x): return call("abs", x)
def erf(x): return call("erf", x)
def vmax(a, b): return call("max", a, b)
def vmin(a, b): return call("min", a, b)
def ite(c, a, b): return call("if_then_else", c, a, b)


def between(lo: int, v, hi: int) -> E:
    """The chained comparison ``lo<=v<hi``."""
    return E(Compare(("<=", "<"), (lit(lo), ast(v), lit(hi))))


def conj(conds) -> E | None:
    """``c1&c2&...`` (None for no conditions)."""
    out = None
    for c in conds:
        out = c if out is None else out & c
    return out


# ------------------------------------------------------------------ integer index arithmetic

def _int(e):
    return e.value if isinstance(e, Num) and e.is_int else None


def iadd(a, b):
    """``a+b`` over index expressions with constant folding."""
    a, b = ast(a), ast(b)
    ia, ib = _int(a), _int(b)
    if ia is not None and ib is not None:
        return lit(ia + ib)
    if ib == 0:
        return a
    if ia == 0:
        return b
    if isinstance(b, Unary) and _int(b.operand) is not None:
        return BinOp("-", a, b.operand)
    return BinOp("+", a, b)


def isub(a, k: int):
    """``a-k`` for an integer constant ``k``."""
    return iadd(a, -k) if k >= 0 else iadd(a, lit(-k))


def imul(a, k: int):
    """``a*k`` for an integer constant ``k``."""
    a = ast(a)
    ia = _int(a)
    if ia is not None:
        return lit(ia * k)
    if k == 1:
        return a
    if k == 0:
        return lit(0)
    return BinOp("*", a, lit(k))


def linear(terms) -> object:
    """``sum(var*stride)`` for (expr, stride) pairs, folded: ``c*16+d``."""
    out = lit(0)
    for e, s in terms:
        out = iadd(out, imul(e, s))
    return out


def var(name: str) -> Var:
    return Var(name)
