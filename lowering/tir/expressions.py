"""LEIR expressions as typed TVMScript expressions (``lowering.types``; half precision computed in
float32, ``lowering.narrow``), written as ``lowering.tir.script`` trees."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from engine.leir.ast import BinOp, Call, Compare, Num, Ref, Unary, Var

from ..errors import LoweringError
from ..narrow import COMPUTE, HALF, compute_type
from ..types import WEAK_FLOAT, WEAK_INT, concrete, is_float, is_int, promote, real_type
from .names import block_var, py_name, tvm_dtype
from .script import Bin, Const, ExpF32, Index, Name, Neg, Number, Paren, T, string


def literal(text: str, dtype: str):
    """A LEIR literal as a TVMScript constant of ``dtype``."""
    if text == "inf":
        if is_float(dtype):
            return T(dtype, string("inf"))
        return T("max_value", string(dtype))
    integral = text.isdigit()
    if dtype == "int32" and integral:
        return Number(text)
    if dtype == "bool":
        return T("bool", Const("True", True)) if float(text) != 0 else T("bool", Const("False", False))
    if is_int(dtype) and not integral:
        return T("Cast", string(dtype), T("float64", Number(text)))
    return T(dtype, Number(text))


_INIT_TEXT = {"0": "0", "1": "1"}


def init_value(identity: str, dtype: str):
    """The identity as one constant (``T.float16("-inf")``, not a negation TVM could hoist into a
    host-side variable and pass to a kernel as a scalar argument)."""
    if identity in _INIT_TEXT:
        return literal(identity, dtype) if dtype != "int32" else Number(identity)
    if is_float(dtype):
        return T(dtype, string(identity))
    return T("min_value", string(dtype)) if identity == "-inf" else T("max_value", string(dtype))


# Python precedence levels of generated expressions (higher binds tighter).
_OR, _AND, _CMP, _ADD, _MUL, _UNARY, _ATOM = 1, 2, 3, 4, 5, 6, 9


@dataclass(frozen=True)
class Storage:
    """Where and in which type tensors live (``lowering.narrow``): half-precision accumulators
    are stored as float32, an output accumulator under another name."""

    acc: frozenset = frozenset()
    alias: dict = field(default_factory=dict)   # output name -> its float32 accumulator buffer

    def dtype(self, name: str, declared: str) -> str:
        return COMPUTE if name in self.acc else declared

    def buffer(self, name: str) -> str:
        return py_name(self.alias.get(name, name))


class ExprLowerer:
    """Typed translation of one equation's expressions (see ``lowering.types``): values are
    computed in ``compute_type`` of their types (half precision in float32, ``lowering.narrow``)."""

    def __init__(self, buffers, out_dtype: str, elided: dict[str, tuple[int, ...]], axes=None,
                 storage: Optional[Storage] = None, writes: Optional[str] = None, let_vars=None):
        self.let_vars = let_vars  # () -> fresh names of vecmath.VARS (llvm: exp as vector arithmetic)
        self.buffers = buffers
        self.out = compute_type(out_dtype)
        self.elided = elided
        self.axes = axes or {}  # index expression -> the block variable bound to it
        self.var_text = block_var  # how a loop variable is written (block var, or loop var in a binding)
        self.storage = storage or Storage()
        self.writes = writes    # the tensor the equation writes: its accumulator is read unrounded

    # -- types -------------------------------------------------------------------------------
    def ty(self, e, ctx: str) -> str:
        if isinstance(e, Num):
            return WEAK_INT if e.is_int else WEAK_FLOAT
        if isinstance(e, Var):
            if ctx != "value" or self.out == "bool":
                return "int32"
            return self.out
        if isinstance(e, Ref):
            return compute_type(tvm_dtype(self.buffers[e.name].dtype))
        if isinstance(e, Unary):
            t = self.ty(e.operand, ctx)
            return "int32" if t == "bool" else t
        if isinstance(e, BinOp):
            if e.op in ("&", "|"):
                return "bool"
            t = promote(self.ty(e.lhs, ctx), self.ty(e.rhs, ctx))
            if e.op in ("/", "**"):
                return real_type(t, self.out)
            return "int32" if t == "bool" else t
        if isinstance(e, Compare):
            return "bool"
        if isinstance(e, Call):
            f = e.func
            if f in ("exp", "log", "sqrt", "erf"):
                return real_type(self.ty(e.args[0], ctx), self.out)
            if f == "abs":
                t = self.ty(e.args[0], ctx)
                return "int32" if t == "bool" else t
            if f in ("max", "min"):
                return promote(self.ty(e.args[0], ctx), self.ty(e.args[1], ctx))
            if f == "if_then_else":
                return promote(self.ty(e.args[1], ctx), self.ty(e.args[2], ctx))
        raise LoweringError(f"cannot lower expression node {type(e).__name__}", e)

    # -- script trees ------------------------------------------------------------------------
    def cast(self, node, have: str, want: str):
        if have == want:
            return node
        return T("Cast", string(want), node)

    def value(self, e, want: str, ctx: str = "value", need: int = 0):
        """``e`` computed as a value of concrete dtype ``want``, parenthesised if it binds looser
        than Python precedence level ``need``."""
        if isinstance(e, Num):
            return literal(e.text, want)
        t = concrete(self.ty(e, ctx), self.out, ctx != "value")
        node, prec = self._bare(e, t, ctx)
        if t != want:
            return self.cast(node, t, want)
        return Paren(node) if prec < need else node

    def cond(self, e, need: int = 0):
        t = concrete(self.ty(e, "cond"), self.out, True)
        if t == "bool":
            return self.value(e, "bool", "cond", need)
        node = Bin("!=", self.value(e, t, "cond", _ADD), literal("0", t))
        return Paren(node) if _CMP < need else node

    def _bare(self, e, t: str, ctx: str) -> tuple:
        """``e`` computed in its own (concrete) type ``t``, with its precedence level."""
        if isinstance(e, Var):  # block variables are int32
            return self.cast(Name(self.var_text(e.name)), "int32", t), _ATOM
        if isinstance(e, Ref):
            return self.read(e), _ATOM
        if isinstance(e, Unary):
            return Neg(self.value(e.operand, t, ctx, _UNARY)), _UNARY
        if isinstance(e, BinOp):
            if e.op in ("&", "|"):
                word, p = ("and", _AND) if e.op == "&" else ("or", _OR)
                return Bin(word, self.cond(e.lhs, p + 1), self.cond(e.rhs, p + 1)), p
            if e.op in ("+", "-", "*", "/"):
                p = _ADD if e.op in ("+", "-") else _MUL
                return Bin(e.op, self.value(e.lhs, t, ctx, p), self.value(e.rhs, t, ctx, p + 1)), p
            a, b = self.value(e.lhs, t, ctx), self.value(e.rhs, t, ctx)
            if e.op == "**":
                return T("pow", a, b), _ATOM
            if e.op == "//":
                if not is_float(t):
                    return T("floordiv", a, b), _ATOM
                return T("floor", Bin("/", self.value(e.lhs, t, ctx, _MUL), self.value(e.rhs, t, ctx, _MUL + 1))), _ATOM
            if e.op == "%":
                if not is_float(t):
                    return T("floormod", a, b), _ATOM
                la, lb = self.value(e.lhs, t, ctx, _ADD), self.value(e.rhs, t, ctx, _MUL + 1)
                fl = T("floor", Bin("/", self.value(e.lhs, t, ctx, _MUL), lb))
                return Bin("-", la, Bin("*", fl, lb)), _ADD
        if isinstance(e, Compare):
            common = self.ty(e.operands[0], "cond")
            for o in e.operands[1:]:
                common = promote(common, self.ty(o, "cond"))
            common = concrete(common, self.out, True)
            ops = [self.value(o, common, "cond", _ADD) for o in e.operands]
            parts = [Bin(op, ops[k], ops[k + 1]) for k, op in enumerate(e.ops)]
            if len(parts) == 1:
                return parts[0], _CMP
            chain = parts[0]
            for part in parts[1:]:   # a and b and c: Python folds it from the left
                chain = Bin("and", chain, part)
            return chain, _AND
        if isinstance(e, Call):
            f = e.func
            if f == "exp" and t == "float32" and self.let_vars is not None:
                return ExpF32(self.value(e.args[0], t, ctx), self.let_vars()), _ATOM
            if f in ("exp", "log", "sqrt", "erf", "abs"):
                return T(f, self.value(e.args[0], t, ctx)), _ATOM
            if f in ("max", "min"):
                a, b = (self.value(x, t, ctx) for x in e.args)
                return T(f, a, b), _ATOM
            if f == "if_then_else":
                c, a, b = self.cond(e.args[0]), self.value(e.args[1], t, ctx), self.value(e.args[2], t, ctx)
                return T("if_then_else", c, a, b), _ATOM
        raise LoweringError(f"cannot lower '{type(e).__name__}' here", e)

    def read(self, r: Ref):
        """A tensor read as a value of its compute type: half precision widened, an accumulator
        rounded to its declared type unless the equation writing it reads it."""
        declared = tvm_dtype(self.buffers[r.name].dtype)
        node = self.load(r)
        if declared not in HALF:
            return node
        if self.storage.dtype(r.name, declared) == COMPUTE:
            if r.name == self.writes:
                return node
            node = T("Cast", string(declared), node)
        return T("Cast", string(COMPUTE), node)

    def load(self, r: Ref) -> Index:
        """The buffer access of ``r`` (in its storage type)."""
        drop = self.elided.get(r.name, ())
        idx = []
        for d, i in enumerate(r.index):
            if d in drop:
                continue
            if i in self.axes:
                idx.append(Name(self.axes[i]))
                continue
            t = self.ty(i, "index")
            if is_float(t):
                raise LoweringError(f"index '{i}' of '{r.name}' is not an integer", r)
            idx.append(self.value(i, concrete(t, "int32", True), "index"))
        return Index(Name(self.storage.buffer(r.name)), tuple(idx))
