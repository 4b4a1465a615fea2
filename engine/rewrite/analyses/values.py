"""Which floating-point values may change by rounding (rules/math.egg, the reassociating
operator and attention rules): the InexactOK fact; and which tensors can never hold an
infinity (FiniteTensor: the exponential and pivot splits need finite operands).
"""
from __future__ import annotations

import math

from engine.leir.ast import BinOp, Call, Compare, Nest, Num, Ref, Unary, equations, refs, walk
from engine.rewrite.analyses.common import nest_equations


FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")


def exact_uses(program) -> set[str]:
    """Tensors whose values flow, through def-use, into an exact use: a comparison operand,
    an index, or the right-hand side of an equation with a non-floating-point result.

    Rounding such a value can flip a comparison (argmax: A >= max(A) holds only for the
    element the max was taken from, bit for bit) or an integer result, so the change is
    not bounded by any tolerance."""
    info = program.info
    eqs = [eq for _, eq in equations(program.body)]
    exact: set[str] = set()
    for eq in eqs:
        for node in [eq.rhs, *eq.lhs.index]:
            for n in walk(node):
                if isinstance(n, Compare):
                    exact |= {r.name for r in refs(n)}
                elif isinstance(n, Ref):
                    exact |= {r.name for i in n.index for r in refs(i)}
        exact |= {r.name for i in eq.lhs.index for r in refs(i)}
        if info.buffers[eq.lhs.name].dtype not in FLOAT_DTYPES:
            exact |= {r.name for r in refs(eq.rhs)}
    grown = True
    while grown:  # backward closure: whatever a statement writing an exact tensor reads
        grown = False
        for eq in eqs:
            if eq.lhs.name in exact:
                new = {r.name for r in refs(eq.rhs)} - exact
                if new:
                    exact |= new
                    grown = True
    return exact


def inexact_ok(program) -> list[str]:
    """(InexactOK X): floating-point tensors none of whose values reach an exact use
    (``exact_uses``), so a reassociating rewrite of an equation writing X changes outputs by
    rounding only. Sorted."""
    exact = exact_uses(program)
    return sorted(name for name, buf in program.info.buffers.items()
                  if buf.dtype in FLOAT_DTYPES and name not in exact)


_BOTH = frozenset("+-")
_NONE = frozenset()
_FLIP = {frozenset("+"): frozenset("-"), frozenset("-"): frozenset("+")}


def _infinities(e, env) -> frozenset:
    """The infinities (subset of {"+", "-"}) e can take when every input is finite and the
    tensors hold what ``env`` says: an ``inf`` literal is the only source, arithmetic carries
    it (signs tracked through - , max, min, exp: exp(-inf) = 0, max(-inf, x) = x), a
    comparison stops it. Overflow of finite values is the range guards' business (@range)."""
    t = type(e)
    if t is Num:
        return frozenset("+") if e.text == "inf" else _NONE
    if t is Ref:
        return env.get(e.name, _NONE)
    if t is Unary:
        a = _infinities(e.operand, env)
        return _FLIP.get(a, a)
    if t is BinOp:
        if e.op in ("&", "|"):
            return _NONE
        a, b = _infinities(e.lhs, env), _infinities(e.rhs, env)
        if e.op == "+":
            return a | b
        if e.op == "-":
            return a | _FLIP.get(b, b)
        return _BOTH if a or (b and e.op != "/") else _NONE
    if t is Call:
        xs = [_infinities(a, env) for a in e.args]
        f = e.func
        if f in ("max", "min"):
            up, down = ("+", "-") if f == "max" else ("-", "+")
            grows = any(up in x for x in xs)          # max(x, +inf) = +inf; max(x, -inf) = x
            return frozenset(([up] if grows else []) + ([down] if all(down in x for x in xs) else []))
        if f == "if_then_else":
            return xs[1] | xs[2]
        if f in ("exp", "sqrt"):
            return frozenset("+") if "+" in xs[0] else _NONE
        if f == "erf":
            return _NONE
        return _BOTH if any(xs) else _NONE       # log(0) = -inf once an infinity made a 0
    return _NONE                                  # Var, Compare


def possibly_infinite(program) -> dict[str, frozenset]:
    """Tensor -> the infinities some element of it can hold (fixpoint over the equations in
    program order; a reduction's identity init such as -inf is overwritten by its first
    step, every loop running at least once). Tensors absent can hold none."""
    eqs = [eq for _, eq in equations(program.body)]
    env: dict[str, frozenset] = {}
    grown = True
    while grown:
        grown = False
        for eq in eqs:
            old = env.get(eq.lhs.name, _NONE)
            new = old | _infinities(eq.rhs, env)
            if new != old:
                env[eq.lhs.name] = new
                grown = True
    return env


def value_facts(program, enc, found) -> None:
    """(InexactOK X) for each such tensor; (InexactWrites s) for each nest every tensor of which
    is InexactOK (the reassociating operator and attention rules); (FiniteTensor X) for each
    tensor that can hold no infinity."""
    glob, per_key = found.glob, found.nests
    inf = possibly_infinite(program)
    glob.extend(("FiniteTensor", name) for name in sorted(program.info.buffers) if not inf.get(name))
    inexact = inexact_ok(program)
    glob.extend(("InexactOK", name) for name in inexact)
    inexact = set(inexact)
    for key, node in enc.orig.items():
        if isinstance(node, Nest) and key in enc.item_paths and \
                all(eq.lhs.name in inexact for _, eq in nest_equations(node, ())):
            per_key.setdefault(key, set()).add(("InexactWrites",))


def size_facts(program, enc, found) -> None:
    """(TensorElems X n): the element count of each tensor, so that a rule making a fresh tensor
    from X can keep it within what TVM's int32 indexing reaches."""
    for name, buf in sorted(program.info.buffers.items()):
        found.glob.append(("TensorElems", name, math.prod(buf.shape)))
