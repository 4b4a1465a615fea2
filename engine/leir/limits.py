"""What a LEIR program may be, in one place, checked where programs enter.

Programs enter through two doors: text (``parser.parse_body``, which every reader of
``.leir``, ``.json`` and ``.jsonl`` files goes through) and trees (``semantics.analyze``,
which every ``Program`` goes through, rewritten ones included). Both call ``check_tree``,
so every later stage (semantics, printer, interval and affine analysis, the rewriting, the
lowering) may recurse over a program, print it and read the text back.

``MAX_DEPTH`` = 100 levels of nesting in one top-level statement: the nodes on its deepest
path, each loop nest, equation, operator, comparison, call, tensor read and operand one
level (``B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}+1;];`` has 5). A chain ``a+b+...`` of n operands is
n-1 operator levels, and ``a**b**...`` nests to the right just as deep; redundant
parentheses add none (the tree keeps a flag). The corpus's deepest statement has 10
levels, and a reference-produced sub-nest adds one. The stages that recurse take at most
about 5 Python frames a level (the printer), so a statement at the limit leaves some 300
of Python's default 1000 frames to the caller (tests/test_mutants.py runs every stage,
the rewriting and the lowering included, at the limit under 150 to 200 extra frames).
JSON program files may nest containers as deep (a corpus record needs 4).

``MAX_EXTENT`` = 2**31-1: loop extents and tensor dimensions (TVM's default index type
is int32, and it is CUDA's largest grid dimension).
``MAX_INT`` = 2**63-1: integer literals (int64, the widest integer type TVM indexes with).

``PROGRAM_NAME``: letters, digits, ``_``, ``.`` and ``-``, not starting with ``.`` or ``-``,
at most 128 characters. Names become ``program NAME`` header lines and file names of
dataset rows, so they may hold nothing a header or a file system would read differently.

Numbers are read from ASCII digits only, everywhere: ``str.isdigit`` and ``int`` accept
other scripts' digits (and ``isdigit`` superscripts that ``int`` then refuses).
"""
from __future__ import annotations

import re

from engine.leir.ast import (ARITH_OPS, COMPARE_OPS, DTYPES, FUNCTIONS, LOGIC_OPS, LOOP_KINDS, SCOPES, BinOp,
                             Call, Compare, Equation, Nest, Num, Ref, Unary, Var)
from engine.leir.diagnostics import LeirError, quoted

MAX_DEPTH = 100
MAX_EXTENT = 2**31 - 1
MAX_INT = 2**63 - 1
MAX_NAME_LENGTH = 128

PROGRAM_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,%d}" % (MAX_NAME_LENGTH - 1))
TENSOR_NAME = re.compile(r"(?![LPVBUT])[A-Z][a-z]*")     # L P V B U are loop kinds, T TVMScript's alias
LOOP_VAR = re.compile(r"[a-z]+")
NUMBER = re.compile(r"[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?|inf")
RESERVED_INITIALS = "LPVBUT"


def _error(msg: str, node=None) -> LeirError:
    p = getattr(node, "pos", None)
    return LeirError(msg, p.line if p else None, p.col if p else None)


# --------------------------------------------------------------------------- names and numbers


def program_name_error(name) -> str | None:
    """Why ``name`` cannot name a program, or None."""
    if isinstance(name, str) and PROGRAM_NAME.fullmatch(name):
        return None
    return (f"program name {quoted(name)} is not valid: use letters, digits, '_', '.' and '-', not starting "
            f"with '.' or '-', at most {MAX_NAME_LENGTH} characters")


def check_program_name(name, line: int | None = None, col: int | None = None) -> str:
    msg = program_name_error(name)
    if msg:
        raise LeirError(msg, line, col)
    return name


def program_name_from(stem: str) -> str:
    """A valid program name for a file called ``stem`` (runs of other characters become '_')."""
    name = re.sub(r"[^A-Za-z0-9_.\-]+", "_", stem).lstrip(".-")[:MAX_NAME_LENGTH]
    return name or "program"


def tensor_name_error(name) -> str | None:
    if isinstance(name, str) and TENSOR_NAME.fullmatch(name):
        return None
    if isinstance(name, str) and name[:1] in RESERVED_INITIALS and re.fullmatch(r"[A-Z][a-z]*", name):
        return (f"tensor name {quoted(name)} starts with a reserved letter ({', '.join(RESERVED_INITIALS)} "
                "are loop kinds or TVMScript's alias)")
    return f"tensor name {quoted(name)} must be one capital letter followed by lowercase letters"


def _shown_int(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:10]}...{text[-4:]} ({len(text)} digits)"


def read_int(text: str, what: str, limit: int, line=None, col=None) -> int:
    """The value of ASCII decimal digits ``text``, at most ``limit``; ``LeirError`` otherwise."""
    if not (text.isascii() and text.isdigit()):
        raise LeirError(f"{what} must be a non-negative integer, got {quoted(text)}", line, col)
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(limit)) or int(digits) > limit:
        raise LeirError(f"{what} {_shown_int(text)} exceeds the limit {limit}", line, col)
    return int(digits)


_INT_DIGITS = len(str(MAX_INT))


def int_literal_error(text: str) -> str | None:
    """Why the integer literal ``text`` (ASCII digits) is out of range, or None. Its text is
    kept (the printer reproduces the source spelling) and converted with ``int`` wherever it is
    used, so the digits are bounded too, leading zeros included."""
    if len(text) > _INT_DIGITS or int(text) > MAX_INT:
        return (f"integer literal {_shown_int(text)} is out of range: at most {_INT_DIGITS} digits and "
                f"{MAX_INT} (2**63-1)")
    return None


def extent_error(n, what: str) -> str | None:
    if isinstance(n, bool) or not isinstance(n, int):
        return f"{what} must be an integer, got {quoted(n)}"
    if n < 1:
        return f"{what} must be at least 1, got {n if n.bit_length() < 1000 else 'a large negative integer'}"
    if n > MAX_EXTENT:
        shown = _shown_int(str(n)) if n.bit_length() < 1000 else f"(an integer of {n.bit_length()} bits)"
        return f"{what} {shown} exceeds the limit {MAX_EXTENT} (2**31-1)"
    return None


# --------------------------------------------------------------------------- trees
#
# One function per node type checks the node itself and returns its children. Names and
# numbers already found well formed are remembered (a program repeats a few dozen), so the
# check costs little more than the walk.

_GOOD: dict[str, set] = {"num": set(), "var": set(), "tensor": set()}
_BINARY_OPS = frozenset(ARITH_OPS + LOGIC_OPS)


def _good(kind: str, text) -> bool:
    return text in _GOOD[kind]


def _remember(kind: str, text) -> None:
    seen = _GOOD[kind]
    if len(seen) < 100_000:
        seen.add(text)


def _num(n: Num):
    t = n.text
    if t in _GOOD["num"]:
        return ()
    if not (isinstance(t, str) and NUMBER.fullmatch(t)):
        raise _error(f"{quoted(t)} is not a LEIR number (ASCII digits, an optional fraction and exponent, or inf)", n)
    if t.isdigit():
        msg = int_literal_error(t)
        if msg:
            raise _error(msg, n)
    _remember("num", t)
    return ()


def _var_name(name, node):
    if name in _GOOD["var"]:
        return
    if not (isinstance(name, str) and LOOP_VAR.fullmatch(name)) or name in FUNCTIONS or name == "inf":
        raise _error(f"{quoted(name)} is not a valid loop variable name (lowercase letters, not a function name "
                     "or 'inf')", node)
    _remember("var", name)


def _var(v: Var):
    _var_name(v.name, v)
    return ()


def _ref(r: Ref):
    if r.name not in _GOOD["tensor"]:
        msg = tensor_name_error(r.name)
        if msg:
            raise _error(msg, r)
        _remember("tensor", r.name)
    if r.dtype not in DTYPES:
        raise _error(f"unknown dtype code {quoted(r.dtype)} (expected one of {', '.join(DTYPES)})", r)
    if r.scope not in SCOPES:
        raise _error(f"unknown memory scope {quoted(r.scope)} (expected g, s or l)", r)
    return r.index


def _binop(b: BinOp):
    if b.op not in _BINARY_OPS:
        raise _error(f"unknown operator {quoted(b.op)}", b)
    return b.lhs, b.rhs


def _unary(u: Unary):
    if u.op != "-":
        raise _error(f"unknown unary operator {quoted(u.op)} (LEIR has only '-')", u)
    return (u.operand,)


def _call(c: Call):
    if FUNCTIONS.get(c.func) != len(c.args):
        if c.func not in FUNCTIONS:
            raise _error(f"unknown function {quoted(c.func)} (LEIR has {', '.join(FUNCTIONS)})", c)
        raise _error(f"function '{c.func}' takes {FUNCTIONS[c.func]} arguments, got {len(c.args)}", c)
    return c.args


def _compare(c: Compare):
    if not c.ops or len(c.operands) != len(c.ops) + 1 or any(op not in COMPARE_OPS for op in c.ops):
        raise _error(f"malformed comparison {quoted(c.ops)} over {len(c.operands)} operands", c)
    return c.operands


def _equation(e: Equation):
    if not isinstance(e.lhs, Ref):
        raise _error("the left-hand side of an equation must be a tensor reference", e)
    return e.lhs, e.rhs


def _nest(n: Nest):
    if not (n.loops and n.body):
        raise _error("a loop nest needs at least one loop and one statement in its body", n)
    for l in n.loops:
        if l.kind not in LOOP_KINDS:
            raise _error(f"unknown loop kind {quoted(l.kind)} (expected L, P, V, U or B)", l)
        _var_name(l.var, l)
        msg = extent_error(l.extent, "loop extent")
        if msg:
            raise _error(msg, l)
    return n.body


_NODES = {Num: _num, Var: _var, Ref: _ref, BinOp: _binop, Unary: _unary, Call: _call, Compare: _compare,
          Equation: _equation, Nest: _nest}


# Top-level statements already checked, by identity (kept alive, so an id is never reused).
# Trees are immutable and a rewritten program shares all but a statement or two with the one
# it came from, so each is checked once, not once per neighbour.
_CHECKED: dict[int, Nest] = {}
_CHECKED_MAX = 4096


def mark_checked(body) -> None:
    """Remember the statements of ``body`` as checked (``analyze`` marks the body it returns,
    which differs from its checked input only in explicit inits)."""
    if len(_CHECKED) > _CHECKED_MAX:
        _CHECKED.clear()  # bounded; forgetting costs only a re-check (and is safe across threads)
    for n in body:
        _CHECKED[id(n)] = n


def check_tree(body) -> None:
    """Check a program body (a sequence of top-level nests), iteratively: at most ``MAX_DEPTH``
    deep, and every node well formed (names, numbers, extents, operators, arities), so that
    it can be printed and its canonical text parses back. ``LeirError`` at the first
    offending node (in source order)."""
    todo = [n for n in body if _CHECKED.get(id(n)) is not n]
    for n in todo:
        if type(n) is not Nest:
            raise _error(f"a program body is a sequence of loop nests, not of {type(n).__name__}", n)
    if todo:
        _check(todo)
        mark_checked(todo)


def check_expr(expr) -> None:
    """``check_tree`` for one expression (engine.leir.parser.parse_expr)."""
    _check([expr])


def _check(body) -> None:
    stack = [(n, 1) for n in reversed(body)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > MAX_DEPTH:
            raise _error(f"nested more than {MAX_DEPTH} levels deep (each loop nest, equation, operator, call "
                         "and operand on the way down is a level, so a chain of n operators is n levels): split "
                         "it into several statements", node)
        visit = _NODES.get(type(node))
        if visit is None:
            raise _error(f"not a LEIR statement or expression: {type(node).__name__}")
        try:
            kids = reversed(visit(node))
        except TypeError:  # a field of the wrong type (unhashable, not a sequence): built by hand
            raise _error(f"malformed {type(node).__name__}: {quoted(repr(node), 80)}", node) from None
        depth += 1
        for k in kids:
            push((k, depth))
