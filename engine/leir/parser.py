"""LEIR text -> AST (lark LALR), with every error reported as a located ``LeirError``.

The AST is built while parsing (lark's embedded transformer): there is no parse tree, and
nothing recurses, however deep the text nests; ``limits.check_tree`` then bounds the depth
of what was read, so every later stage may recurse. The parser checks what the text alone
decides (known function names and arities, dtype and scope codes, tensor-name initials,
loop starts, integer ranges, the sibling form). Everything that needs the whole program
(roles, shapes, initialisation, def-use) is ``engine.leir.semantics``.
"""
from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from engine.leir.ast import (DTYPES, FUNCTIONS, SCOPES, BinOp, Call, Compare, Equation, Loop, Nest, Num, Pos,
                             Ref, Unary, Var)
from engine.leir.diagnostics import LeirError
from engine.leir.limits import MAX_EXTENT, check_expr, check_tree, int_literal_error, read_int, tensor_name_error

# What a lark terminal means, for "expected ..." messages.
_TERMINAL_NAMES = {
    "UNAME": "a tensor name or loop kind",
    "IVAR": "a loop variable or function name",
    "DTYPE": "a dtype code (f32, f16, ...)",
    "MEM": "a memory scope (g, s or l)",
    "NUMBER": "a number",
    "CMPOP": "a comparison",
    "MULOP": "'*', '/', '//' or '%'",
    "LSQB": "'['",
    "RSQB": "']'",
    "SEMICOLON": "';'",
    "EQUAL": "'='",
    "COMMA": "','",
    "LPAR": "'('",
    "RPAR": "')'",
    "RBRACE": "'}'",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "VBAR": "'|'",
    "AMPERSAND": "'&'",
    "__ANON_0": "'^{'",
    "__ANON_1": "'_{'",
    "POW": "'**'",
    "$END": "end of input",
}


def _at(tok: Token) -> Pos:
    return Pos(tok.line, tok.column)


def _err(msg: str, tok: Token) -> LeirError:
    return LeirError(msg, tok.line, tok.column)


def _check_loop(kind: Token, var: Token, start: Token, extent: Token) -> Loop:
    if kind not in ("L", "P", "V", "U", "B"):
        raise _err(f"unknown loop kind '{kind}' (expected L, P, V, U or B)", kind)
    n = read_int(extent, "loop extent", MAX_EXTENT, extent.line, extent.column)
    if n < 1:
        raise _err(f"loop extent must be at least 1, got {n}", extent)
    s = read_int(start, "loop start", MAX_EXTENT, start.line, start.column)
    if s != 0:
        raise _err(f"loop '{var}' starts at {s}: only loops starting at 0 are supported", start)
    if "_" in var or var in ("inf",) or var in FUNCTIONS:
        raise _err(f"'{var}' is not a valid loop variable name (lowercase letters, not a function "
                   "name or 'inf')", var)
    return Loop(str(kind), str(var), n, pos=_at(kind))


def _check_ref(name: Token, dtype: Token, mem: Token, index) -> Ref:
    msg = tensor_name_error(str(name))
    if msg:
        raise _err(msg, name)
    if dtype not in DTYPES:
        raise _err(f"unknown dtype code '{dtype}' (expected one of {', '.join(DTYPES)})", dtype)
    if mem not in SCOPES:
        raise _err(f"unknown memory scope '{mem}' (expected g, s or l)", mem)
    return Ref(str(name), str(dtype), str(mem), tuple(index or ()), pos=_at(name))


class _ToAst(Transformer):
    """Callbacks lark calls at each reduction, with the children of the rule (tokens and the
    nodes already built); a node's position is that of its first character."""

    def start(self, c):
        return tuple(c)

    def nest(self, c):
        loops, *items = c
        return Nest(loops, tuple(items), pos=loops[0].pos)

    def sibling(self, c):
        p = c[0][0].pos
        raise LeirError("the 'sibling' form 'loops[...]loops[...];' is not LEIR: nest the inner loops "
                        "inside the body instead, as 'outer[init; inner[accumulate;];];'", p.line, p.col)

    def loops(self, c):
        return tuple(c)

    def loop(self, c):
        kind, extent, var, start = c
        return _check_loop(kind, var, start, extent)

    def loop_sub_first(self, c):
        kind, var, start, extent = c
        return _check_loop(kind, var, start, extent)

    def equation(self, c):
        lhs, rhs = c
        return Equation(lhs, rhs, pos=lhs.pos)

    def tref(self, c):
        name, dtype, mem, *rest = c
        return _check_ref(name, dtype, mem, rest[0] if rest else ())

    def tref_sub_first(self, c):
        name, index, dtype, mem = c
        return _check_ref(name, dtype, mem, index)

    def index(self, c):
        return tuple(c)

    def or_(self, c):
        return BinOp("|", c[0], c[1], pos=c[0].pos)

    def and_(self, c):
        return BinOp("&", c[0], c[1], pos=c[0].pos)

    def compare(self, c):
        return Compare(tuple(str(t) for t in c[1::2]), tuple(c[0::2]), pos=c[0].pos)

    def add(self, c):
        return BinOp("+", c[0], c[1], pos=c[0].pos)

    def sub(self, c):
        return BinOp("-", c[0], c[1], pos=c[0].pos)

    def mul(self, c):
        op = "*" if c[1] == "\\times" else str(c[1])
        return BinOp(op, c[0], c[2], pos=c[0].pos)

    def neg(self, c):
        minus, operand = c
        return Unary("-", operand, pos=_at(minus))

    def pow(self, c):
        return BinOp("**", c[0], c[2], pos=c[0].pos)

    def num(self, c):
        tok = c[0]
        if tok.isdigit():
            msg = int_literal_error(tok)
            if msg:
                raise _err(msg, tok)
        return Num(str(tok), pos=_at(tok))

    def var(self, c):
        name = c[0]
        if name == "inf":
            return Num("inf", pos=_at(name))
        if name in FUNCTIONS:
            raise _err(f"function '{name}' must be called with arguments", name)
        if "_" in name:
            raise _err(f"'{name}' is not a loop variable", name)
        return Var(str(name), pos=_at(name))

    def call(self, c):
        name, *args = c
        if name not in FUNCTIONS:
            raise _err(f"unknown function '{name}' (LEIR has {', '.join(FUNCTIONS)})", name)
        if len(args) != FUNCTIONS[name]:
            raise _err(f"function '{name}' takes {FUNCTIONS[name]} argument"
                       f"{'s' if FUNCTIONS[name] != 1 else ''}, got {len(args)}", name)
        return Call(str(name), tuple(args), pos=_at(name))

    def paren(self, c):
        lpar, e = c
        return replace(e, paren=True, pos=_at(lpar))


@functools.lru_cache(maxsize=None)
def _lark(start: str = "start") -> Lark:
    """The parser of a program body (``start``) or of one expression (``expr``: the rule
    files' LEIR identities, engine.rewrite.leirterms)."""
    grammar = (Path(__file__).parent / "leir.lark").read_text()
    return Lark(grammar, parser="lalr", lexer="contextual", transformer=_ToAst(), maybe_placeholders=False,
                start=start)


def _describe_expected(expected) -> str:
    names = sorted({_TERMINAL_NAMES.get(t, repr(t)) for t in expected})
    if len(names) > 6:
        names = names[:6] + ["..."]
    return ", ".join(names)


def _token_text(tok) -> str:
    if getattr(tok, "type", None) == "$END":
        return "end of input"
    return f"'{tok}'"


def _end_of_input(text: str, expected, hint: str = "; is a ']' or ';' missing?") -> LeirError:
    """The error for text that stops early, placed just after its last character."""
    kept = text.rstrip(" \t\f\r\n")  # the grammar's whitespace
    line = kept.count("\n") + 1
    col = len(kept) - (kept.rfind("\n") + 1) + 1
    return LeirError(f"unexpected end of input (expected {_describe_expected(expected)}){hint}", line, col)


def _parse(text: str, start: str):
    """Run the parser for ``start``; every lark error becomes a located ``LeirError``."""
    hint = "" if start == "expr" else "; is a ']' or ';' missing?"
    try:
        return _lark(start).parse(text)
    except UnexpectedEOF as e:
        raise _end_of_input(text, e.expected, hint) from None
    except UnexpectedToken as e:
        if e.token.type == "$END":
            raise _end_of_input(text, e.expected, hint) from None
        raise LeirError(f"unexpected {_token_text(e.token)} (expected {_describe_expected(e.expected)})",
                        e.line, e.column) from None
    except UnexpectedCharacters as e:
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else "?"
        shown = repr(ch) if ch.isprintable() else f"U+{ord(ch):04X}"
        raise LeirError(f"unexpected character {shown}", e.line, e.column) from None
    except UnexpectedInput as e:  # any other lark input error
        raise LeirError(str(e).splitlines()[0], getattr(e, "line", None), getattr(e, "column", None)) from None


def parse_body(text: str):
    """Parse LEIR statements into a tuple of ``Nest``; raises ``LeirError`` on bad input."""
    if not text.strip():
        raise LeirError("empty program: expected at least one loop nest like 'B^{N}_{tx=0}[...];'", 1, 1)
    body = _parse(text, "start")
    check_tree(body)  # bound the depth (what the callbacks checked is remembered: cheap)
    return body


def parse_expr(text: str):
    """Parse one LEIR expression (the grammar's ``expr``: tensor reads, numbers, loop variables,
    calls, unary and binary operators, comparisons); raises ``LeirError`` on bad input."""
    if not text.strip():
        raise LeirError("empty expression", 1, 1)
    expr = _parse(text, "expr")
    check_expr(expr)
    return expr
