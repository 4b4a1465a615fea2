"""The reference evaluator: a LEIR program run on numpy arrays exactly as it is written, each operation
rounded in its declared type, no compiler in between. It is the oracle that decides ``bitwise``
(``lowering.verify``, exact tolerance): TVM's simplifier rewrites float expressions as if they were real
numbers (``(x+y)-y`` to ``x``, ``x*0.0`` and ``x-x`` to 0), so two TVM builds can agree where the programs
do not. docs/numerics.md says what it decides and what it costs.

The meaning is the lowering's (docs/numerics.md, ``lowering.types``, ``lowering.narrow``):

* types: every operator promotes its operands by ``lowering.types`` (weak literals, loop variables as
  values, ``/`` ``**`` and the real functions on integers in the output's float type), each operation
  computed in numpy in that type (float32 in float32, so rounded once per operation);
* half precision (f16, bf16) is storage: each equation computes in float32 and rounds once when it stores;
  accumulators (``lowering.narrow.accumulators``) are held in float32 and rounded when another equation
  reads them, and into an output after the last statement;
* functions: ``exp`` in float32 is the llvm build's own algorithm (``lowering.vecmath``, the same float32
  operations), ``sqrt`` and ``abs`` are exact IEEE; ``log``, ``erf`` and ``**`` in float32 are computed in
  float64 and rounded once (within an ulp of the C library's); in float64 ``exp``, ``log``, ``erf`` and
  ``**`` are numpy's (``APPROXIMATE`` lists what can differ from a build in the last ulp);
* ``max(a, b)`` is ``a > b ? a : b`` and ``min(a, b)`` ``a < b ? a : b`` (NaN in the second operand wins,
  in the first it is dropped), ``!=`` on floats and a float's truth value are ordered (NaN is not
  non-zero; a cast to bool is ``x != 0``, NaN true, as in the build); NaN and infinities follow IEEE;
* order: statements in order, loops in the order written, a reduction accumulated in the loop order the
  program states; an implied initialisation is stored when every reduction variable is 0 (``T.init``), or,
  where several spatial iterations share an element, at the element's first update;
* memory: outputs and intermediates start zero-filled (as the runner allocates them); reads in a branch of
  ``if_then_else`` that is not taken may fall outside a tensor: they are clamped, the value is discarded.

Speed: loops whose iterations touch disjoint elements of every tensor written under them (decided from
the index expressions, ``_independent``) are evaluated at once as numpy arrays; the others run in order.
A single-equation reduction ``X = X op t`` (``+ - * /`` chains, ``max``, ``min``) over its reduced loops
is a numpy ``accumulate`` along them, which is a sequential loop in the program's order, in chunks of at
most ``CHUNK`` elements.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from engine.leir.ast import DTYPES, BinOp, Call, Compare, Equation, Nest, Num, Ref, Unary, Var, loop_vars, walk

from . import vecmath
from .errors import LoweringError
from .injective import is_injective
from .inputs import numpy_dtype
from .narrow import COMPUTE, HALF, accumulators, compute_type, self_reads
from .types import WEAK_FLOAT, WEAK_INT, concrete, is_float, is_int, promote, real_type

CHUNK = 1 << 22          # elements of one vectorised evaluation (a chunk of a reduction included)
APPROXIMATE = {"float32": ("log", "erf", "**"), "float64": ("exp", "log", "erf", "**")}


class EvaluationError(LoweringError):
    """The reference evaluator cannot run the program (``stage`` is "reference")."""

    def __init__(self, message: str, node=None):
        super().__init__(message, node, stage="reference")


def evaluate(program, inputs: dict) -> dict[str, np.ndarray]:
    """The outputs of ``program`` on ``inputs`` (name -> array), by name, as numpy arrays."""
    with np.errstate(all="ignore"):
        return _Evaluator(program).run(inputs)


SPECIAL_RATE = 16        # special_inputs: one more float element in SPECIAL_RATE on average


def special_inputs(program, seed: int = 0, trial: int = 0) -> dict[str, np.ndarray]:
    """``lowering.inputs.random_inputs`` with special values in every float input: each of +0, -0, +inf,
    -inf, the largest finite value of either sign and the smallest subnormal once (as many as the tensor
    holds) at random places, and about one more element in ``SPECIAL_RATE`` replaced by one of them,
    drawn from ``numpy.random.default_rng([seed, trial, k, 1])`` for input k. Exactness claims are about
    every input: ``x-x`` and ``x*0`` are 0 only for finite ``x``, ``x+0`` is ``x`` only when ``x`` is not
    ``-0``. No NaN among them: what ``max``/``min`` make of a NaN operand differs by target (llvm's
    select keeps it only as the second operand, CUDA's ``fmaxf`` drops it, torch propagates it), so a
    NaN input would hold every reordered max reduction to one target's convention; NaNs a program makes
    (``inf-inf``, ``0*inf``) are compared like any value."""
    from .inputs import random_inputs
    out = random_inputs(program, seed, trial)
    for k, d in enumerate(program.inputs):
        a = out[d.name]
        if a.dtype.kind != "f" and a.dtype.name != "bfloat16":
            continue
        if a.dtype.name == "bfloat16":
            import ml_dtypes
            info = ml_dtypes.finfo(a.dtype)
        else:
            info = np.finfo(a.dtype)
        specials = np.array([0.0, -0.0, np.inf, -np.inf, float(info.max), -float(info.max),
                             float(info.smallest_subnormal)]).astype(a.dtype)
        rng = np.random.default_rng([seed, trial, k, 1])
        hit = rng.integers(0, SPECIAL_RATE, size=a.shape) == 0
        pick = rng.integers(0, len(specials), size=a.shape)
        a = a.copy()
        a[hit] = specials[pick[hit]]
        flat = a.reshape(-1)
        places = rng.permutation(flat.size)[:len(specials)]
        flat[places] = specials[:len(places)]
        out[d.name] = flat.reshape(a.shape)
    return out


def approximate_functions(program) -> set[str]:
    """The functions of ``program`` whose reference value may differ from a build's in the last ulp
    (``APPROXIMATE``, by the type they compute in): where the reference and TVM are compared at a tolerance."""
    out: set[str] = set()
    for ei in program.info.equations:
        comp = _Types(program.info.buffers, program.info.buffers[ei.eq.lhs.name].dtype)
        for e in walk(ei.eq.rhs):
            name = e.func if isinstance(e, Call) else (e.op if isinstance(e, BinOp) else None)
            if name is None or (name == "**" and isinstance(e.rhs, Num) and e.rhs.text in ("2", "2.0")):
                continue          # x**2: the square, rounded once on both sides (LLVM makes it x*x)
            t = concrete(comp.ty(e, "value"), comp.out, False)
            if name in APPROXIMATE.get(t, ()):
                out.add(name)
    return out


# --------------------------------------------------------------------------- numpy types


def _np(name: str):
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _cast(x, name: str):
    dt = _np(name)
    return np.asarray(x).astype(dt) if not isinstance(x, np.generic) else x.astype(dt)


def _literal(text: str, t: str):
    """A LEIR literal as a constant of type ``t`` (``lowering.tir.expressions.literal``)."""
    dt = _np(t)
    if text == "inf":
        if is_float(t):
            return dt.type(np.inf)
        return dt.type(True) if t == "bool" else dt.type(np.iinfo(dt).max)
    integral = text.isdigit()
    if t == "bool":
        return np.bool_(float(text) != 0)
    if is_int(t) and not integral:
        return np.float64(float(text)).astype(dt)
    return dt.type(int(text)) if integral and not is_float(t) else dt.type(float(text))


def _identity(init: str, t: str):
    if init in ("0", "1"):
        return _literal(init, t)
    dt = _np(t)
    if is_float(t):
        return dt.type(float(init))
    if t == "bool":
        return np.bool_(init == "inf")
    return dt.type(np.iinfo(dt).min if init == "-inf" else np.iinfo(dt).max)


# --------------------------------------------------------------------------- functions


def _exp_f32(a):
    """exp in float32 by ``lowering.vecmath``'s algorithm, operation for operation."""
    f = np.float32
    a = np.asarray(a, dtype=np.float32)
    lo = np.where(a < f(89), a, f(89))
    x = np.where(lo > f(vecmath.UNDER), lo, f(vecmath.UNDER))
    q = np.floor(x * f(vecmath.LOG2E) + f(0.5)).astype(np.int32)
    qf = q.astype(np.float32)
    s = x - qf * f(vecmath.L2U) - qf * f(vecmath.L2L)
    poly = f(vecmath.POLY[0])
    for c in vecmath.POLY[1:]:
        poly = poly * s + f(c)
    u = poly * s * s + s + f(1)
    half = q >> 1
    p1 = ((half + 127) << 23).astype(np.int32).view(np.float32)
    p2 = ((q - half + 127) << 23).astype(np.int32).view(np.float32)
    ranged = np.where(x <= f(vecmath.UNDER), f(0), np.where(x >= f(vecmath.OVER), f(np.inf), u * p1 * p2))
    return np.where(np.isnan(a), a, ranged)


_ERF = np.frompyfunc(math.erf, 1, 1)


def _erf64(x):
    return np.asarray(_ERF(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def _via64(fn):
    """A function of float32 computed in float64 and rounded once; numpy's own in float64."""
    def apply(t: str, *args):
        if t == "float64":
            return fn(*args)
        return _cast(fn(*(np.asarray(a, dtype=np.float64) for a in args)), t)
    return apply


_FUNCS = {
    "log": _via64(np.log),
    "erf": _via64(_erf64),
    "**": _via64(np.power),
    "sqrt": lambda t, x: np.sqrt(x),
    "abs": lambda t, x: np.abs(x),
    "exp": lambda t, x: _exp_f32(x) if t == "float32" else np.exp(x),
}


def _max(a, b):
    return np.where(a > b, a, b)


def _min(a, b):
    return np.where(a < b, a, b)


def _ne(a, b):
    if np.asarray(a).dtype.kind == "f":
        return (a < b) | (a > b)           # ordered: NaN != x is false, as in the build
    return a != b


_COMPARE = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
            "==": np.equal, "!=": _ne}


def _float_floordiv(a, b):
    return np.floor(a / b)


def _float_mod(a, b):
    return a - np.floor(a / b) * b


_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}


# --------------------------------------------------------------------------- scopes


@dataclass(frozen=True)
class _Scope:
    """Where an equation is evaluated: the grid of vectorised axes (numpy broadcasting, trailing
    aligned), each loop variable's value there (an int, or an int64 array over the grid) and, for the
    variables that own an axis as 0..n-1, that axis counted from the end (for plain views)."""

    shape: tuple = ()
    values: tuple = ()          # ((var, int | ndarray), ...)
    plain: tuple = ()           # ((var, negative axis, extent), ...)

    def get(self, var: str):
        for v, x in self.values:
            if v == var:
                return x
        raise EvaluationError(f"internal: loop variable '{var}' has no value here")

    def axis_of(self, var: str):
        for v, ax, n in self.plain:
            if v == var:
                return ax, n
        return None

    def with_scalars(self, pairs) -> "_Scope":
        keep = {v for v, _ in pairs}
        return _Scope(self.shape, tuple((v, x) for v, x in self.values if v not in keep) + tuple(pairs), self.plain)

    def extended(self, loops) -> "_Scope":
        """New vectorised axes appended, one per loop (each value 0..n-1 along its axis)."""
        m = len(loops)
        if m == 0:
            return self
        values = tuple((v, x.reshape(x.shape + (1,) * m) if isinstance(x, np.ndarray) else x)
                       for v, x in self.values)
        plain = tuple((v, ax - m, n) for v, ax, n in self.plain)
        new = []
        for k, l in enumerate(loops):
            shape = [1] * m
            shape[k] = l.extent
            new.append((l.var, np.arange(l.extent, dtype=np.int64).reshape(shape)))
        plain += tuple((l.var, k - m, l.extent) for k, l in enumerate(loops))
        return _Scope(self.shape + tuple(l.extent for l in loops), values + tuple(new), plain)

    def chunked(self, loops, start: int, k: int) -> "_Scope":
        """A leading axis over points ``start .. start+k-1`` of ``loops`` in lexicographic order."""
        flat = np.arange(start, start + k, dtype=np.int64)
        coords = np.unravel_index(flat, tuple(l.extent for l in loops)) if loops else ()
        lead = (k,) + (1,) * len(self.shape)
        pairs = tuple((l.var, c.astype(np.int64).reshape(lead)) for l, c in zip(loops, coords))
        keep = {l.var for l in loops}
        return _Scope((k,) + self.shape, tuple((v, x) for v, x in self.values if v not in keep) + pairs, self.plain)


# --------------------------------------------------------------------------- types and expressions


class _Types:
    """The types of one equation's expressions (``lowering.tir.expressions.ExprLowerer.ty``)."""

    def __init__(self, buffers, out_code: str):
        self.buffers = buffers
        self.declared = DTYPES[out_code]
        self.out = compute_type(self.declared)

    def ref_type(self, name: str) -> str:
        return compute_type(DTYPES[self.buffers[name].dtype])

    def ty(self, e, ctx: str) -> str:
        if isinstance(e, Num):
            return WEAK_INT if e.is_int else WEAK_FLOAT
        if isinstance(e, Var):
            return "int32" if ctx != "value" or self.out == "bool" else self.out
        if isinstance(e, Ref):
            return self.ref_type(e.name)
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
            if e.func in ("exp", "log", "sqrt", "erf"):
                return real_type(self.ty(e.args[0], ctx), self.out)
            if e.func == "abs":
                t = self.ty(e.args[0], ctx)
                return "int32" if t == "bool" else t
            if e.func in ("max", "min"):
                return promote(self.ty(e.args[0], ctx), self.ty(e.args[1], ctx))
            if e.func == "if_then_else":
                return promote(self.ty(e.args[1], ctx), self.ty(e.args[2], ctx))
        raise EvaluationError(f"cannot evaluate expression node {type(e).__name__}", e)


Fn = Callable[[_Scope], object]


class _Compiler(_Types):
    """One equation's expressions as closures over a ``_Scope`` (types resolved once)."""

    def __init__(self, ev: "_Evaluator", out_code: str, writes: Optional[str]):
        super().__init__(ev.info.buffers, out_code)
        self.ev = ev
        self.writes = writes   # the tensor the equation writes: its accumulator is read unrounded

    def value(self, e, want: str, ctx: str = "value") -> Fn:
        if isinstance(e, Num):
            c = _literal(e.text, want)
            return lambda s: c
        t = concrete(self.ty(e, ctx), self.out, ctx != "value")
        f = self.bare(e, t, ctx)
        if t == want:
            return f
        return lambda s: _cast(f(s), want)

    def cond(self, e) -> Fn:
        t = concrete(self.ty(e, "cond"), self.out, True)
        if t == "bool":
            return self.value(e, "bool", "cond")
        f, zero = self.value(e, t, "cond"), _literal("0", t)
        return lambda s: _ne(f(s), zero)

    def bare(self, e, t: str, ctx: str) -> Fn:
        if isinstance(e, Var):
            name, dt = e.name, _np(t)
            return lambda s: np.asarray(s.get(name), dtype=np.int32).astype(dt)
        if isinstance(e, Ref):
            return self.read(e)
        if isinstance(e, Unary):
            f = self.value(e.operand, t, ctx)
            return lambda s: np.negative(f(s))
        if isinstance(e, BinOp):
            return self._binop(e, t, ctx)
        if isinstance(e, Compare):
            common = self.ty(e.operands[0], "cond")
            for o in e.operands[1:]:
                common = promote(common, self.ty(o, "cond"))
            common = concrete(common, self.out, True)
            fs = [self.value(o, common, "cond") for o in e.operands]
            ops = [_COMPARE[op] for op in e.ops]

            def compare(s):
                vals = [f(s) for f in fs]
                out = ops[0](vals[0], vals[1])
                for k in range(1, len(ops)):
                    out = np.logical_and(out, ops[k](vals[k], vals[k + 1]))
                return out
            return compare
        if isinstance(e, Call):
            return self._call(e, t, ctx)
        raise EvaluationError(f"cannot evaluate '{type(e).__name__}' here", e)

    def _binop(self, e: BinOp, t: str, ctx: str) -> Fn:
        if e.op in ("&", "|"):
            a, b = self.cond(e.lhs), self.cond(e.rhs)
            op = np.logical_and if e.op == "&" else np.logical_or
            return lambda s: op(a(s), b(s))
        a, b = self.value(e.lhs, t, ctx), self.value(e.rhs, t, ctx)
        if e.op in _ARITH:
            op = _ARITH[e.op]
            return lambda s: op(a(s), b(s))
        if e.op == "**":
            fn = _FUNCS["**"]
            return lambda s: fn(t, a(s), b(s))
        if e.op == "//":
            op = _float_floordiv if is_float(t) else np.floor_divide
            return lambda s: op(a(s), b(s))
        if e.op == "%":
            op = _float_mod if is_float(t) else np.mod
            return lambda s: op(a(s), b(s))
        raise EvaluationError(f"cannot evaluate operator '{e.op}'", e)

    def _call(self, e: Call, t: str, ctx: str) -> Fn:
        f = e.func
        if f in _FUNCS:
            x, fn = self.value(e.args[0], t, ctx), _FUNCS[f]
            return lambda s: fn(t, x(s))
        if f in ("max", "min"):
            a, b = (self.value(x, t, ctx) for x in e.args)
            op = _max if f == "max" else _min
            return lambda s: op(a(s), b(s))
        if f == "if_then_else":
            c, a, b = self.cond(e.args[0]), self.value(e.args[1], t, ctx), self.value(e.args[2], t, ctx)
            return lambda s: np.where(c(s), a(s), b(s))
        raise EvaluationError(f"cannot evaluate function '{f}'", e)

    def read(self, r: Ref) -> Fn:
        """A tensor read in its compute type: half widened, an accumulator rounded to its declared
        type unless the equation writing it reads it (``lowering.narrow``)."""
        declared = self.ev.declared[r.name]
        load = self.ev.loader(r)
        if declared not in HALF:
            return load
        if self.ev.storage[r.name] == COMPUTE and r.name != self.writes:
            return lambda s: _cast(_cast(load(s), declared), COMPUTE)
        return lambda s: _cast(load(s), COMPUTE)


def _index_fn(ev: "_Evaluator", e) -> Fn:
    """An index entry as integers (int, or an int64 array over the grid)."""
    if isinstance(e, Num):
        v = int(e.text)
        return lambda s: v
    if isinstance(e, Var):
        name = e.name
        return lambda s: s.get(name)
    if isinstance(e, Ref):
        load = ev.loader(e)
        return lambda s: _as_index(load(s))
    if isinstance(e, Unary) and e.op == "-":
        f = _index_fn(ev, e.operand)
        return lambda s: -f(s)
    if isinstance(e, BinOp) and e.op in ("+", "-", "*", "//", "%"):
        a, b = _index_fn(ev, e.lhs), _index_fn(ev, e.rhs)
        op = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod}[e.op]
        return lambda s: _int_op(op, a(s), b(s))
    if isinstance(e, Call) and e.func in ("max", "min"):
        a, b = _index_fn(ev, e.args[0]), _index_fn(ev, e.args[1])
        op = np.maximum if e.func == "max" else np.minimum
        return lambda s: _int_op(op, a(s), b(s))
    raise EvaluationError("cannot evaluate this index expression", e)


def _as_index(x):
    a = np.asarray(x)
    if a.ndim == 0:
        return int(a)
    return a.astype(np.int64)


def _int_op(op, a, b):
    if isinstance(a, int) and isinstance(b, int):
        return int(op(a, b))
    return op(a, b)


# --------------------------------------------------------------------------- independence


def _accesses(items):
    """(ref, written) for every tensor access of the equations under ``items``."""
    for it in items:
        if isinstance(it, Nest):
            yield from _accesses(it.body)
            continue
        yield it.lhs, True
        for e in (*it.lhs.index, it.rhs):
            for n in walk(e):
                if isinstance(n, Ref):
                    yield n, False


def _reads_tensor(e) -> bool:
    return any(isinstance(n, Ref) for n in walk(e))


def _independent(chosen: set[str], items, extents: dict[str, int]) -> bool:
    """Iterations that differ in the ``chosen`` loop variables touch disjoint elements of every tensor
    written under ``items``: for each such tensor, the index entries all its accesses share determine
    the chosen variables (one-to-one: ``lowering.injective``)."""
    acc = list(_accesses(items))
    for name in dict.fromkeys(r.name for r, w in acc if w):
        idxs = [r.index for r, _ in acc if r.name == name]
        first = idxs[0]
        shared = [first[d] for d in range(len(first))
                  if all(len(ix) == len(first) and ix[d] == first[d] for ix in idxs) and not _reads_tensor(first[d])]
        own = [e for e in shared if loop_vars(e) and loop_vars(e) <= chosen]
        ok = False
        for entries in (own, shared):
            names = set().union(*(loop_vars(e) for e in entries)) if entries else set()
            if chosen <= names and is_injective(tuple(entries), extents):
                ok = True
                break
        if not ok:
            return False
    return True


@dataclass(frozen=True)
class _Plan:
    """How one nest runs: ``vector`` loops evaluated at once, ``outer`` independent loops that did not fit
    a chunk run first, then ``ordered`` (the rest, in the program's order); ``scan``: the single
    equation's reduction runs as an accumulate over ``ordered``."""

    vector: tuple
    outer: tuple
    ordered: tuple
    scan: Optional["_Scan"] = None


@dataclass(frozen=True)
class _Scan:
    op: str                    # "+", "*", "/", "max", "min"
    terms: tuple               # (expression, negate) in the order they combine
    dtype: str


def _chain(eq: Equation, t: str, types: _Types) -> Optional[tuple[str, tuple]]:
    """``X = X op t1 op t2 ...`` (left-deep; ``+``/``-`` mixed, or all ``*``, or all ``/``) or
    ``max(X, t)`` / ``min(X, t)``, with no term reading X: (op, ((term, negate), ...)); else None."""
    x = eq.lhs

    def clean(e) -> bool:
        return not any(isinstance(n, Ref) and n.name == x.name for n in walk(e))

    e = eq.rhs
    if isinstance(e, Call) and e.func in ("max", "min"):
        a, b = e.args
        if a == x and clean(b):
            return e.func, ((b, False),)
        return None
    terms = []
    ops = set()
    while isinstance(e, BinOp) and e.op in ("+", "-", "*", "/"):
        if concrete(types.ty(e, "value"), types.out, False) != t or not clean(e.rhs):
            return None
        terms.append((e.rhs, e.op == "-"))
        ops.add("+" if e.op in "+-" else e.op)
        e = e.lhs
    if e != x or len(ops) != 1 or not terms:
        return None
    return ops.pop(), tuple(reversed(terms))


# --------------------------------------------------------------------------- the evaluator


class _Evaluator:
    """One evaluation: the tensors (storage types), each nest's plan and each equation's closures."""

    def __init__(self, program):
        self.program = program
        self.info = program.info
        acc = accumulators(program)
        self.declared = {n: DTYPES[b.dtype] for n, b in self.info.buffers.items()}
        self.storage = {n: (COMPUTE if n in acc else d) for n, d in self.declared.items()}
        self.eqs = {ei.path: ei for ei in self.info.equations}
        self.bufs: dict[str, np.ndarray] = {}
        self.masks: dict[tuple, np.ndarray] = {}
        self._plans: dict[tuple, _Plan] = {}
        self._compiled: dict[tuple, tuple] = {}

    def run(self, inputs: dict) -> dict[str, np.ndarray]:
        for d in self.program.inputs:
            if d.name not in inputs:
                raise EvaluationError(f"no input array given for '{d.name}'")
            a = np.asarray(inputs[d.name])
            if tuple(a.shape) != tuple(d.shape):
                raise EvaluationError(f"input '{d.name}' has shape {list(a.shape)}, the program declares "
                                      f"{list(d.shape)}")
            self.bufs[d.name] = np.array(a, dtype=numpy_dtype(d.dtype), copy=True)
        for name, b in self.info.buffers.items():
            if b.role != "input":
                self.bufs[name] = np.zeros(b.shape, dtype=_np(self.storage[name]))
        for i, nest in enumerate(self.program.body):
            self.nest(nest, (), _Scope(), (i,))
        return {d.name: _cast(self.bufs[d.name], self.declared[d.name]).copy() for d in self.program.outputs}

    # -- memory ------------------------------------------------------------------------------
    def loader(self, r: Ref) -> Fn:
        """A read of ``r`` in its storage type; entries outside the tensor are clamped (they only occur in
        a branch that is not taken: the analysis checks every read under its conditions)."""
        fns = [_index_fn(self, e) for e in r.index]
        name = r.name

        def load(s):
            arr = self.bufs[name]
            view = self._view(arr, r, s)
            if view is not None:
                return view
            idx = tuple(_clamp(f(s), n) for f, n in zip(fns, arr.shape))
            return arr[idx]
        return load

    def _view(self, arr, r: Ref, s: _Scope):
        """``r`` as a view over the grid when each entry is an integer literal or a variable owning an
        axis (no copy, and writable); None otherwise."""
        sl, axes = [], []
        for e, n in zip(r.index, arr.shape):
            if isinstance(e, Num):
                v = int(e.text)
                if not 0 <= v < n:
                    return None
                sl.append(v)
                continue
            if not isinstance(e, Var):
                return None
            a = s.axis_of(e.name)
            if a is None:
                v = s.get(e.name)
                if not isinstance(v, int) or not 0 <= v < n:
                    return None
                sl.append(v)
                continue
            ax, ext = a
            if ext > n or ax in axes:
                return None
            sl.append(slice(0, ext))
            axes.append(ax)
        view = arr[tuple(sl)]
        if not axes:
            return view
        order = sorted(range(len(axes)), key=lambda k: axes[k])
        view = view.transpose(order)
        nd = len(s.shape)
        pos = sorted(nd + ax for ax in axes)
        missing = tuple(k - pos[0] for k in range(pos[0], nd) if k not in pos)
        return np.expand_dims(view, missing) if missing else view

    def store(self, r: Ref, fns, value, s: _Scope):
        arr = self.bufs[r.name]
        view = self._view(arr, r, s)
        if view is not None and view.ndim > 0:
            np.copyto(view, value, casting="unsafe")
            return
        idx = tuple(f(s) for f in fns)
        for i, n in zip(idx, arr.shape):
            lo, hi = (np.min(i), np.max(i)) if isinstance(i, np.ndarray) else (i, i)
            if lo < 0 or hi >= n:
                raise EvaluationError(f"write to '{r.name}' out of bounds", r)
        if not idx:
            arr[()] = value
            return
        shape = np.broadcast_shapes(*(np.shape(i) for i in idx))
        if np.shape(value) and np.broadcast_shapes(shape, np.shape(value)) != shape:
            raise EvaluationError(f"internal: the write to '{r.name}' does not cover every vectorised "
                                  "iteration", r)
        arr[idx] = value

    # -- plans ---------------------------------------------------------------------------------
    def plan(self, nest: Nest, outer: tuple, path: tuple) -> _Plan:
        hit = self._plans.get(path)
        if hit is not None:
            return hit
        extents = {l.var: l.extent for l in outer + nest.loops}
        chosen: set[str] = set()
        for l in sorted((l for l in nest.loops if l.extent > 1), key=lambda l: -l.extent):
            if _independent(chosen | {l.var}, nest.body, extents):
                chosen.add(l.var)
        vector, out, size = [], [], 1
        for l in nest.loops:
            if l.var in chosen and size * l.extent <= CHUNK:
                vector.append(l)
                size *= l.extent
            elif l.var in chosen or l.extent == 1:      # one iteration: independent of everything
                out.append(l)
        ordered = tuple(l for l in nest.loops if l.var not in chosen and l.extent > 1)
        p = _Plan(tuple(vector), tuple(out), ordered, self._scan(nest, path, ordered))
        self._plans[path] = p
        return p

    def _scan(self, nest: Nest, path: tuple, ordered: tuple) -> Optional[_Scan]:
        if len(nest.body) != 1 or not isinstance(nest.body[0], Equation) or not ordered:
            return None
        ei = self.eqs[path + (0,)]
        eq = ei.eq
        if not {l.var for l in ordered} <= set(ei.reduction_axes) or self.init_mode(ei) == "first":
            return None
        if _reads_tensor_named(eq.lhs.index, eq.lhs.name):
            return None
        types = _Types(self.info.buffers, self.info.buffers[eq.lhs.name].dtype)
        t = types.out
        if self.storage[eq.lhs.name] != t or types.ref_type(eq.lhs.name) != t or not is_float(t):
            return None
        if concrete(types.ty(eq.rhs, "value"), t, False) != t:
            return None
        found = _chain(eq, t, types)
        if found is None:
            return None
        return _Scan(found[0], found[1], t)

    def init_mode(self, ei) -> Optional[str]:
        """"zero": the identity is stored when every reduction variable is 0 (``T.init``: one spatial
        iteration per element); "first": at each element's first update (several share it)."""
        if ei.eq.init is None:
            return None
        red = set(ei.reduction_axes)
        spatial = {l.var: l.extent for l in ei.loops if l.var not in red}
        index = ei.eq.lhs.index
        plain = all(isinstance(e, Var) or (isinstance(e, Num) and e.is_int) for e in index)
        return "zero" if plain or is_injective(index, spatial) else "first"

    # -- execution -----------------------------------------------------------------------------
    def nest(self, nest: Nest, outer: tuple, scope: _Scope, path: tuple):
        p = self.plan(nest, outer, path)
        loops = outer + nest.loops
        scope = scope.extended(p.vector)
        for point in itertools.product(*(range(l.extent) for l in p.outer)):
            s = scope.with_scalars(tuple((l.var, v) for l, v in zip(p.outer, point)))
            if p.scan is not None:
                self.scan(p.scan, p.ordered, s, path + (0,))
                continue
            for inner in itertools.product(*(range(l.extent) for l in p.ordered)):
                si = s.with_scalars(tuple((l.var, v) for l, v in zip(p.ordered, inner)))
                for j, it in enumerate(nest.body):
                    if isinstance(it, Nest):
                        self.nest(it, loops, si, path + (j,))
                    else:
                        self.equation(path + (j,), si)

    def compiled(self, path: tuple):
        hit = self._compiled.get(path)
        if hit is not None:
            return hit
        ei = self.eqs[path]
        eq = ei.eq
        name = eq.lhs.name
        comp = _Compiler(self, self.info.buffers[name].dtype, name)
        lhs = tuple(_index_fn(self, e) for e in eq.lhs.index)
        value = comp.value(eq.rhs, comp.out)
        stored, declared = self.storage[name], comp.declared
        if stored != comp.out:
            rhs = lambda s: _cast(value(s), stored)  # noqa: E731
        elif declared in HALF and not self_reads(eq):
            rhs = lambda s: _cast(_cast(value(s), declared), COMPUTE)  # noqa: E731
        else:
            rhs = value
        mode = self.init_mode(ei)
        init = None if mode is None else _identity(eq.init, stored)
        out = (ei, lhs, rhs, mode, init, comp)
        self._compiled[path] = out
        return out

    def _init(self, ei, lhs, mode, init, s: _Scope, path: tuple):
        """Store the identity where the equation's implied initialisation says (``init_mode``)."""
        r = ei.eq.lhs
        if mode == "zero":
            vals = [s.get(v) for v in ei.reduction_axes]
            if any(isinstance(v, np.ndarray) for v in vals):
                raise EvaluationError(f"internal: a reduction variable of '{r.name}' is vectorised", r)
            if all(v == 0 for v in vals):
                self.store(r, lhs, init, s)
            return
        arr = self.bufs[r.name]
        mask = self.masks.setdefault(path, np.zeros(arr.shape, dtype=bool))
        idx = tuple(f(s) for f in lhs)
        fresh = ~mask[idx]
        if np.any(fresh):
            arr[idx] = np.where(fresh, init, arr[idx])
            mask[idx] = True

    def equation(self, path: tuple, s: _Scope):
        ei, lhs, rhs, mode, init, _ = self.compiled(path)
        if mode is not None:
            self._init(ei, lhs, mode, init, s, path)
        self.store(ei.eq.lhs, lhs, rhs(s), s)

    def scan(self, sc: _Scan, ordered: tuple, s: _Scope, path: tuple):
        """The single equation ``X = X op t...`` over the ``ordered`` (reduced) loops as accumulates."""
        ei, lhs, _, mode, init, comp = self.compiled(path)
        r = ei.eq.lhs
        terms = self._compiled.get(path + ("scan",))
        if terms is None:
            terms = self._compiled[path + ("scan",)] = [(comp.value(e, sc.dtype), neg) for e, neg in sc.terms]
        cur = np.array(np.broadcast_to(self.loader(r)(s), s.shape), dtype=_np(sc.dtype), copy=True)
        scanned = {l.var for l in ordered}
        if mode is not None and all(s.get(v) == 0 for v in ei.reduction_axes if v not in scanned):
            cur[...] = init          # T.init: the first point of the scanned loops is all zeros
        m = len(terms)
        total = math.prod(l.extent for l in ordered)
        size = max(1, math.prod(s.shape))
        step = max(1, CHUNK // (size * m))
        for start in range(0, total, step):
            k = min(step, total - start)
            cs = s.chunked(ordered, start, k)
            parts = []
            for f, neg in terms:
                v = np.broadcast_to(f(cs), (k,) + s.shape)
                parts.append(np.negative(v) if neg else v)
            seq = (np.stack(parts, axis=1).reshape((k * m,) + s.shape) if m > 1
                   else np.array(parts[0], dtype=_np(sc.dtype), copy=True))
            cur = _accumulate(sc.op, cur, seq)
        self.store(r, lhs, cur, s)


def _accumulate(op: str, cur, seq):
    """``cur`` combined with ``seq[0], seq[1], ...`` in order (each step rounded), the last value."""
    if op in ("max", "min"):
        sel = _max if op == "max" else _min
        seq[0] = sel(cur, seq[0])
        if np.isnan(seq).any():
            acc = seq[0]
            for k in range(1, len(seq)):
                acc = sel(acc, seq[k])
            return np.array(acc, copy=True)
        # without NaN the select keeps the last of the values equal to the extremum: its value is the
        # extremum, and only a zero has two (signs), so take the last zero where the extremum is 0
        best = (np.fmax if op == "max" else np.fmin).reduce(seq, axis=0)
        zero = best == 0
        if np.any(zero):
            last = len(seq) - 1 - np.argmax((seq == 0)[::-1], axis=0)
            best = np.where(zero, np.take_along_axis(seq, np.expand_dims(last, 0), axis=0)[0], best)
        return np.array(best, copy=True)
    else:
        ufunc = {"+": np.add, "*": np.multiply, "/": np.divide}[op]
        seq[0] = ufunc(cur, seq[0])
    ufunc.accumulate(seq, axis=0, out=seq)
    return np.array(seq[-1], copy=True)


def _clamp(i, n: int):
    if isinstance(i, int):
        return min(max(i, 0), n - 1)
    return np.clip(i, 0, n - 1)


def _reads_tensor_named(index, name: str) -> bool:
    return any(isinstance(n, Ref) and n.name == name for e in index for n in walk(e))
