"""LEIR text -> AST (lark LALR), with every error reported as a located ``LeirError``.

The parser checks what the text alone decides (known function names and arities, dtype
and scope codes, tensor-name initials, loop starts, the sibling form). Everything that
needs the whole program (roles, shapes, initialisation, def-use) is ``engine.semantics``.
"""
from __future__ import annotations

import functools
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from engine.leir.ast import (DTYPES, FUNCTIONS, SCOPES, BinOp, Call, Compare, Equation, Loop, Nest, Num, Pos,
                  Ref, Unary, Var)
from engine.leir.diagnostics import LeirError

RESERVED_INITIALS = "LPVBUT"

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


def _pos(meta_or_tok) -> Pos | None:
    line = getattr(meta_or_tok, "line", None)
    col = getattr(meta_or_tok, "column", None)
    if line is None:
        return None
    return Pos(line, col)


def _err(msg: str, at) -> LeirError:
    p = _pos(at)
    return LeirError(msg, p.line if p else None, p.col if p else None)


def _check_uint(tok: Token, what: str) -> int:
    if not tok.isdigit():
        raise _err(f"{what} must be a non-negative integer, got '{tok}'", tok)
    return int(tok)


def _check_loop(kind: Token, var: Token, start: Token, extent: Token) -> Loop:
    if kind not in ("L", "P", "V", "U", "B"):
        raise _err(f"unknown loop kind '{kind}' (expected L, P, V, U or B)", kind)
    n = _check_uint(extent, "loop extent")
    if n < 1:
        raise _err(f"loop extent must be at least 1, got {n}", extent)
    s = _check_uint(start, "loop start")
    if s != 0:
        raise _err(f"loop '{var}' starts at {s}: only loops starting at 0 are supported", start)
    if "_" in var or var in ("inf",) or var in FUNCTIONS:
        raise _err(f"'{var}' is not a valid loop variable name (lowercase letters, not a function "
                   "name or 'inf')", var)
    return Loop(str(kind), str(var), n, pos=_pos(kind))


def _check_ref(name: Token, dtype: Token, mem: Token, index) -> Ref:
    if name[0] in RESERVED_INITIALS:
        raise _err(f"tensor name '{name}' starts with a reserved letter ({', '.join(RESERVED_INITIALS)} "
                   "are loop kinds or TVMScript's alias)", name)
    if dtype not in DTYPES:
        raise _err(f"unknown dtype code '{dtype}' (expected one of {', '.join(DTYPES)})", dtype)
    if mem not in SCOPES:
        raise _err(f"unknown memory scope '{mem}' (expected g, s or l)", mem)
    return Ref(str(name), str(dtype), str(mem), tuple(index or ()), pos=_pos(name))


def _paren(e):
    from dataclasses import replace
    return replace(e, paren=True)


@v_args(meta=True)
class _ToAst(Transformer):
    def start(self, meta, items):
        return tuple(items)

    def nest(self, meta, c):
        loops, *items = c
        return Nest(loops, tuple(items), pos=_pos(meta))

    def sibling(self, meta, c):
        raise _err("the 'sibling' form 'loops[...]loops[...];' is not LEIR: nest the inner loops "
                   "inside the body instead, as 'outer[init; inner[accumulate;];];'", meta)

    def loops(self, meta, c):
        return tuple(c)

    def loop(self, meta, c):
        kind, extent, var, start = c
        return _check_loop(kind, var, start, extent)

    def loop_sub_first(self, meta, c):
        kind, var, start, extent = c
        return _check_loop(kind, var, start, extent)

    def equation(self, meta, c):
        lhs, rhs = c
        return Equation(lhs, rhs, pos=_pos(meta))

    def tref(self, meta, c):
        name, dtype, mem, *rest = c
        return _check_ref(name, dtype, mem, rest[0] if rest else ())

    def tref_sub_first(self, meta, c):
        name, index, dtype, mem = c
        return _check_ref(name, dtype, mem, index)

    def index(self, meta, c):
        return tuple(c)

    def or_(self, meta, c):
        return BinOp("|", c[0], c[1], pos=_pos(meta))

    def and_(self, meta, c):
        return BinOp("&", c[0], c[1], pos=_pos(meta))

    def compare(self, meta, c):
        operands = tuple(c[0::2])
        ops = tuple(str(t) for t in c[1::2])
        return Compare(ops, operands, pos=_pos(meta))

    def add(self, meta, c):
        return BinOp("+", c[0], c[1], pos=_pos(meta))

    def sub(self, meta, c):
        return BinOp("-", c[0], c[1], pos=_pos(meta))

    def mul(self, meta, c):
        op = "*" if c[1] == "\\times" else str(c[1])
        return BinOp(op, c[0], c[2], pos=_pos(meta))

    def neg(self, meta, c):
        return Unary("-", c[0], pos=_pos(meta))

    def pow(self, meta, c):
        return BinOp("**", c[0], c[2], pos=_pos(meta))

    def num(self, meta, c):
        return Num(str(c[0]), pos=_pos(meta))

    def var(self, meta, c):
        name = c[0]
        if name == "inf":
            return Num("inf", pos=_pos(meta))
        if name in FUNCTIONS:
            raise _err(f"function '{name}' must be called with arguments", name)
        if "_" in name:
            raise _err(f"'{name}' is not a loop variable", name)
        return Var(str(name), pos=_pos(meta))

    def call(self, meta, c):
        name, *args = c
        if name not in FUNCTIONS:
            raise _err(f"unknown function '{name}' (LEIR has {', '.join(FUNCTIONS)})", name)
        if len(args) != FUNCTIONS[name]:
            raise _err(f"function '{name}' takes {FUNCTIONS[name]} argument"
                       f"{'s' if FUNCTIONS[name] != 1 else ''}, got {len(args)}", name)
        return Call(str(name), tuple(args), pos=_pos(meta))

    def paren(self, meta, c):
        return _paren(c[0])


@functools.lru_cache(maxsize=None)
def _lark() -> Lark:
    grammar = (Path(__file__).parent / "leir.lark").read_text()
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True,
                maybe_placeholders=False)


_TO_AST = _ToAst()


def _describe_expected(expected) -> str:
    names = sorted({_TERMINAL_NAMES.get(t, repr(t)) for t in expected})
    if len(names) > 6:
        names = names[:6] + ["..."]
    return ", ".join(names)


def _token_text(tok) -> str:
    if getattr(tok, "type", None) == "$END":
        return "end of input"
    return f"'{tok}'"


def parse_body(text: str):
    """Parse LEIR statements into a tuple of ``Nest``; raises ``LeirError`` on bad input."""
    if not text.strip():
        raise LeirError("empty program: expected at least one loop nest like 'B^{N}_{tx=0}[...];'", 1, 1)
    try:
        tree = _lark().parse(text)
        return _TO_AST.transform(tree)
    except VisitError as e:
        if isinstance(e.orig_exc, LeirError):
            raise e.orig_exc from None
        raise
    except UnexpectedEOF as e:
        lines = text.splitlines() or [""]
        raise LeirError(f"unexpected end of input (expected {_describe_expected(e.expected)}); "
                        "is a ']' or ';' missing?", len(lines), len(lines[-1]) + 1) from None
    except UnexpectedToken as e:
        if e.token.type == "$END":
            lines = text.rstrip().splitlines() or [""]
            raise LeirError(f"unexpected end of input (expected {_describe_expected(e.expected)}); "
                            "is a ']' or ';' missing?", len(lines), len(lines[-1]) + 1) from None
        raise LeirError(f"unexpected {_token_text(e.token)} (expected {_describe_expected(e.expected)})",
                        e.line, e.column) from None
    except UnexpectedCharacters as e:
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else "?"
        shown = repr(ch) if ch.isprintable() else f"byte {ord(ch):#x}"
        raise LeirError(f"unexpected character {shown}", e.line, e.column) from None
    except UnexpectedInput as e:  # any other lark input error
        raise LeirError(str(e).splitlines()[0], getattr(e, "line", None), getattr(e, "column", None)) from None
