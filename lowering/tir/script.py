"""The TVMScript the lowering writes, as data: a list of ``(depth, statement)`` whose expressions
are small trees. It is the one source of both renderings: ``render`` gives the text (``Built.text``,
``python -m lowering.tir``), ``lowering.tir.builder`` the same PrimFunc through TVM's IR builder
without writing or parsing text. A node is what one piece of the text says, no more: parentheses
are nodes (``Paren``) so the text is exact, and the builder passes through them as Python does."""
from __future__ import annotations

from dataclasses import dataclass

from .names import INDENT


@dataclass(frozen=True, slots=True)
class Const:
    """A Python constant: ``src`` as written, ``value`` as Python reads it ("True", True)."""

    src: str
    value: object

    def render(self) -> str:
        return self.src


@dataclass(frozen=True, slots=True)
class Number:
    """A numeric literal in its LEIR spelling ("1e-05", "2"), read as Python reads it."""

    src: str

    def render(self) -> str:
        return self.src


@dataclass(frozen=True, slots=True)
class Name:
    """A name bound earlier in the script: a parameter, loop or block variable, buffer."""

    id: str

    def render(self) -> str:
        return self.id


@dataclass(frozen=True, slots=True)
class Call:
    """``fn(args, key=value)``; ``fn`` as written: ``T.Cast``, ``T.axis.remap``, ``range``."""

    fn: str
    args: tuple = ()
    kwargs: tuple = ()   # (key, node) pairs

    def render(self) -> str:
        parts = [a.render() for a in self.args] + [f"{k}={v.render()}" for k, v in self.kwargs]
        return f"{self.fn}({', '.join(parts)})"


@dataclass(frozen=True, slots=True)
class Bin:
    """``lhs op rhs``: arithmetic, a comparison, ``and`` or ``or``."""

    op: str
    lhs: object
    rhs: object

    def render(self) -> str:
        return f"{self.lhs.render()} {self.op} {self.rhs.render()}"


@dataclass(frozen=True, slots=True)
class Neg:
    operand: object

    def render(self) -> str:
        return f"-{self.operand.render()}"


@dataclass(frozen=True, slots=True)
class Paren:
    inner: object

    def render(self) -> str:
        return f"({self.inner.render()})"


@dataclass(frozen=True, slots=True)
class Index:
    """``base[i, j]`` (``base[()]`` without entries): a load, a store target or a region."""

    base: object
    index: tuple

    def render(self) -> str:
        return f"{self.base.render()}[{', '.join(i.render() for i in self.index) if self.index else '()'}]"


@dataclass(frozen=True, slots=True)
class Slice:
    lo: object
    hi: object

    def render(self) -> str:
        return f"{self.lo.render()}:{self.hi.render()}"


@dataclass(frozen=True, slots=True)
class ListOf:
    items: tuple

    def render(self) -> str:
        return f"[{', '.join(i.render() for i in self.items)}]"


@dataclass(frozen=True, slots=True)
class TupleOf:
    items: tuple

    def render(self) -> str:
        if len(self.items) == 1:
            return f"({self.items[0].render()},)"
        return f"({', '.join(i.render() for i in self.items)})"


@dataclass(frozen=True, slots=True)
class DictOf:
    items: tuple   # (key node, value node) pairs

    def render(self) -> str:
        return "{" + ", ".join(f"{k.render()}: {v.render()}" for k, v in self.items) + "}"


@dataclass(frozen=True, slots=True)
class ExpF32:
    """``exp`` in float32 as ``lowering.vecmath`` writes it, its variables named ``names``."""

    arg: object
    names: tuple

    def render(self) -> str:
        from ..vecmath import exp_f32
        return exp_f32(self.arg.render(), self.names)


# -- statements: one line each (``Func`` two), nested by depth as Python nests by indentation -----

@dataclass(frozen=True, slots=True)
class Func:
    """``@T.prim_func(s_tir=True) def main(params):`` with (name, ``T.Buffer`` call) params."""

    params: tuple

    def render(self) -> str:
        params = ", ".join(f"{n}: {ann.render()}" for n, ann in self.params)
        return f"@T.prim_func(s_tir=True)\ndef main({params}):"


@dataclass(frozen=True, slots=True)
class For:
    targets: tuple   # loop variable names
    iter: Call

    def render(self) -> str:
        return f"for {', '.join(self.targets)} in {self.iter.render()}:"


@dataclass(frozen=True, slots=True)
class With:
    frame: Call

    def render(self) -> str:
        return f"with {self.frame.render()}:"


@dataclass(frozen=True, slots=True)
class Assign:
    targets: tuple   # names
    value: object

    def render(self) -> str:
        return f"{', '.join(self.targets)} = {self.value.render()}"


@dataclass(frozen=True, slots=True)
class Store:
    target: Index
    value: object

    def render(self) -> str:
        return f"{self.target.render()} = {self.value.render()}"


@dataclass(frozen=True, slots=True)
class Eval:
    call: Call

    def render(self) -> str:
        return self.call.render()


def render(script) -> str:
    """The TVMScript text of ``script`` (``(depth, statement)`` pairs)."""
    return "\n".join(INDENT * d + s.render() for d, s in script) + "\n"


# -- shorthands the emitters use --------------------------------------------------------------

def num(n: int) -> Const:
    return Const(str(n), n)


def string(s: str) -> Const:
    return Const(f'"{s}"', s)


def T(fn: str, *args, **kwargs) -> Call:
    """``T.fn(args, key=value)``."""
    return Call("T." + fn, args, tuple(kwargs.items()))


def name_nodes(ids) -> tuple:
    return tuple(Name(i) for i in ids)
