"""Typed, immutable LEIR syntax tree.

One expression type serves both index and value positions (an index may contain tensor
reads, a value may contain loop variables). Redundant parentheses and source positions are
kept for faithful printing and error messages but never take part in equality or hashing,
so two programs that differ only in layout compare equal.

Reduction initialisation is explicit: ``Equation.init`` holds the identity the implicit
form implies ("0", "1", "-inf", "inf") or None. The parser leaves it unset; the semantic
pass (``engine.semantics``) decides it once, by the rules of leir.md section 7.3.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterator, Optional, Union


@dataclass(frozen=True)
class Pos:
    """1-based line and column of a node in its source file."""

    line: int
    col: int


def _pos() -> Optional[Pos]:
    return field(default=None, compare=False, repr=False)


def _paren() -> bool:
    return field(default=False, compare=False, repr=False)


# --------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Num:
    """A numeric literal, kept in its source spelling ("1e-05" stays "1e-05"); "inf" too."""

    text: str
    paren: bool = _paren()
    pos: Optional[Pos] = _pos()

    @property
    def value(self) -> float | int:
        t = self.text
        if t == "inf":
            return float("inf")
        if any(ch in t for ch in ".eE"):
            return float(t)
        return int(t)

    @property
    def is_int(self) -> bool:
        return self.text.isascii() and self.text.isdigit()  # isdigit alone takes '²' and '٣'


@dataclass(frozen=True)
class Var:
    """A loop variable used as a value or inside an index."""

    name: str
    paren: bool = _paren()
    pos: Optional[Pos] = _pos()


@dataclass(frozen=True)
class Ref:
    """A tensor reference ``Name^{dtype,scope}_{i1,...}``; rank 0 when ``index`` is empty."""

    name: str
    dtype: str
    scope: str
    index: tuple["Expr", ...] = ()
    paren: bool = _paren()
    pos: Optional[Pos] = _pos()


@dataclass(frozen=True)
class Unary:
    """Unary minus (the only unary operator in LEIR)."""

    op: str
    operand: "Expr"
    paren: bool = _paren()
    pos: Optional[Pos] = _pos()


@dataclass(frozen=True)
class BinOp:
    """Binary operator: ``+ - * / // % **`` and the logical ``& |``."""

    op: str
    lhs: "Expr"
    rhs: "Expr"
    paren: bool = _paren()
    pos: Optional[Pos] = _pos()


@dataclass(frozen=True)
class Compare:
    """A (possibly chained) comparison: ``2<=c<258`` is ops ("<=", "<") over three operands."""

    ops: tuple[str, ...]
    operands: tuple["Expr", ...]
    paren: bool = _paren()
    pos: Optional[Pos] = _pos()


@dataclass(frozen=True)
class Call:
    """A call of one of the LEIR functions (``FUNCTIONS``)."""

    func: str
    args: tuple["Expr", ...]
    paren: bool = _paren()
    pos: Optional[Pos] = _pos()


Expr = Union[Num, Var, Ref, Unary, BinOp, Compare, Call]

# function name -> arity
FUNCTIONS: dict[str, int] = {
    "exp": 1,
    "log": 1,
    "sqrt": 1,
    "abs": 1,
    "erf": 1,
    "max": 2,
    "min": 2,
    "if_then_else": 3,
}

ARITH_OPS = ("+", "-", "*", "/", "//", "%", "**")
LOGIC_OPS = ("&", "|")
COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")

# --------------------------------------------------------------------------- statements

LOOP_KINDS = ("L", "P", "V", "U", "B")
SCOPES = ("g", "s", "l")

# dtype code -> numpy / TVM dtype name
DTYPES: dict[str, str] = {
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
    "bool": "bool",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
}

INIT_IDENTITIES = ("0", "1", "-inf", "inf")


@dataclass(frozen=True)
class Loop:
    """Loop descriptor ``K^{extent}_{var=0}``; iterates ``var`` over ``0..extent-1``."""

    kind: str
    var: str
    extent: int
    pos: Optional[Pos] = _pos()


@dataclass(frozen=True)
class Equation:
    """``lhs = rhs`` executed at every point of the enclosing loops.

    ``init`` is the reduction identity written into ``lhs`` before its first update, or
    None. It is decided by ``engine.semantics`` and printed implicitly.
    """

    lhs: Ref
    rhs: Expr
    init: Optional[str] = None
    pos: Optional[Pos] = _pos()


@dataclass(frozen=True)
class Nest:
    """A perfect loop nest with an ordered body of equations and nested sub-nests."""

    loops: tuple[Loop, ...]
    body: tuple[Union[Equation, "Nest"], ...]
    pos: Optional[Pos] = _pos()


Item = Union[Equation, Nest]


@dataclass(frozen=True)
class TensorDecl:
    """A known tensor: an input (read) or output (written) of the program."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    pos: Optional[Pos] = _pos()


# --------------------------------------------------------------------------- traversal


def children(e: Expr) -> tuple[Expr, ...]:
    """Direct sub-expressions, in source order."""
    if isinstance(e, Ref):
        return e.index
    if isinstance(e, Unary):
        return (e.operand,)
    if isinstance(e, BinOp):
        return (e.lhs, e.rhs)
    if isinstance(e, Compare):
        return e.operands
    if isinstance(e, Call):
        return e.args
    return ()


def with_children(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    """``e`` with its direct sub-expressions replaced (same order as ``children``)."""
    if isinstance(e, Ref):
        return replace(e, index=tuple(kids))
    if isinstance(e, Unary):
        return replace(e, operand=kids[0])
    if isinstance(e, BinOp):
        return replace(e, lhs=kids[0], rhs=kids[1])
    if isinstance(e, Compare):
        return replace(e, operands=tuple(kids))
    if isinstance(e, Call):
        return replace(e, args=tuple(kids))
    return e


def walk(e: Expr) -> Iterator[Expr]:
    """Pre-order traversal of an expression tree."""
    yield e
    for c in children(e):
        yield from walk(c)


def transform(e: Expr, fn) -> Expr:
    """Bottom-up rebuild: ``fn`` sees each node after its children were transformed."""
    kids = children(e)
    if kids:
        new = tuple(transform(k, fn) for k in kids)
        if any(a is not b for a, b in zip(new, kids)):
            e = with_children(e, new)
    return fn(e)


def equations(items) -> Iterator[tuple[tuple[Loop, ...], Equation]]:
    """Every equation under ``items`` (a body or a program body) with its enclosing loops."""
    for it in items:
        yield from _equations(it, ())


def _equations(it: Item, outer: tuple[Loop, ...]):
    if isinstance(it, Equation):
        yield outer, it
    else:
        loops = outer + it.loops
        for sub in it.body:
            yield from _equations(sub, loops)


def refs(e: Expr) -> Iterator[Ref]:
    """Every tensor reference inside ``e`` (nested index reads included)."""
    for n in walk(e):
        if isinstance(n, Ref):
            yield n


def loop_vars(e: Expr) -> set[str]:
    """Loop variables occurring anywhere in ``e``."""
    return {n.name for n in walk(e) if isinstance(n, Var)}


def strip_positions(node):
    """The same tree with no paren flags or positions (useful for display and hashing)."""
    if isinstance(node, (Num, Var)):
        return type(node)(node.text if isinstance(node, Num) else node.name)
    if isinstance(node, (Ref, Unary, BinOp, Compare, Call)):
        e = with_children(node, tuple(strip_positions(c) for c in children(node)))
        return replace(e, paren=False, pos=None)
    if isinstance(node, Loop):
        return replace(node, pos=None)
    if isinstance(node, Equation):
        return replace(node, lhs=strip_positions(node.lhs), rhs=strip_positions(node.rhs), pos=None)
    if isinstance(node, Nest):
        return Nest(tuple(strip_positions(l) for l in node.loops), tuple(strip_positions(b) for b in node.body))
    return node
