"""Integer interval arithmetic over loop domains, for shape inference and bounds checks.

Ranges are real (min, max) over the iteration space, never the reference's "evaluate at
N-1" monotonicity shortcut, so ``3999-a`` and ``tx%4`` get their true ranges. Conditions
of ``if_then_else`` refine the ranges of loop variables in each branch, which is what
makes padded reads like ``if_then_else(2<=c<258, A_{c-2}, 0)`` provably in bounds.
"""
from __future__ import annotations

from typing import Callable, Optional

from engine.leir.ast import BinOp, Call, Compare, Num, Ref, Unary, Var

Interval = tuple[int, int]
Env = dict[str, Interval]
# Resolves the value range of an integer tensor read used inside an index (None: unknown).
RefRange = Callable[[Ref], Optional[Interval]]


class NotAffine(Exception):
    """The expression is not an integer expression this analysis can bound."""


def _mul(a: Interval, b: Interval) -> Interval:
    prods = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(prods), max(prods)


def interval(e, env: Env, ref_range: RefRange | None = None) -> Optional[Interval]:
    """Range of integer expression ``e``; None when a tensor read makes it unknown."""
    if isinstance(e, Num):
        if not e.is_int:
            raise NotAffine(f"'{e.text}' is not an integer")
        v = int(e.text)
        return v, v
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Ref):
        return ref_range(e) if ref_range else None
    if isinstance(e, Unary):
        r = interval(e.operand, env, ref_range)
        return None if r is None else (-r[1], -r[0])
    if isinstance(e, Call) and e.func in ("max", "min"):
        a, b = (interval(x, env, ref_range) for x in e.args)
        if a is None or b is None:
            return None
        f = max if e.func == "max" else min
        return f(a[0], b[0]), f(a[1], b[1])
    if isinstance(e, BinOp) and e.op in ("+", "-", "*", "//", "%"):
        a = interval(e.lhs, env, ref_range)
        b = interval(e.rhs, env, ref_range)
        if a is None or b is None:
            return None
        if e.op == "+":
            return a[0] + b[0], a[1] + b[1]
        if e.op == "-":
            return a[0] - b[1], a[1] - b[0]
        if e.op == "*":
            return _mul(a, b)
        if b[0] != b[1] or b[0] <= 0:
            raise NotAffine(f"'{e.op}' needs a positive constant divisor")
        k = b[0]
        if e.op == "//":
            return a[0] // k, a[1] // k
        if a[1] - a[0] + 1 >= k or a[0] // k != a[1] // k:
            return 0, k - 1
        return a[0] % k, a[1] % k
    raise NotAffine("not an integer index expression")


# --------------------------------------------------------------------------- refinement

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def _var_offset(e) -> Optional[tuple[str, int]]:
    """``v``, ``v+k`` or ``v-k`` as (v, k); otherwise None."""
    if isinstance(e, Var):
        return e.name, 0
    if isinstance(e, BinOp) and e.op in ("+", "-") and isinstance(e.lhs, Var) \
            and isinstance(e.rhs, Num) and e.rhs.is_int:
        k = int(e.rhs.text)
        return e.lhs.name, k if e.op == "+" else -k
    return None


def _const(e) -> Optional[int]:
    if isinstance(e, Num) and e.is_int:
        return int(e.text)
    if isinstance(e, Unary) and isinstance(e.operand, Num) and e.operand.is_int:
        return -int(e.operand.text)
    return None


def _apply(env: Env, lhs, op: str, rhs) -> Optional[Env]:
    """Refine ``env`` by ``lhs op rhs``; None when the condition is unsatisfiable."""
    vo, c = _var_offset(lhs), _const(rhs)
    if vo is None or c is None:
        vo, c = _var_offset(rhs), _const(lhs)
        if vo is None or c is None:
            return env
        op = _FLIP[op]
    var, k = vo
    if var not in env:
        return env
    lo, hi = env[var]
    bound = c - k  # v op bound
    if op == "<":
        hi = min(hi, bound - 1)
    elif op == "<=":
        hi = min(hi, bound)
    elif op == ">":
        lo = max(lo, bound + 1)
    elif op == ">=":
        lo = max(lo, bound)
    elif op == "==":
        lo, hi = max(lo, bound), min(hi, bound)
    if lo > hi:
        return None
    new = dict(env)
    new[var] = (lo, hi)
    return new


def refine(env: Env, cond, truth: bool) -> Optional[Env]:
    """Loop-variable ranges under which ``cond`` has the given truth value (None: never)."""
    if isinstance(cond, Compare):
        if truth:
            for op, a, b in zip(cond.ops, cond.operands, cond.operands[1:]):
                env = _apply(env, a, op, b)
                if env is None:
                    return None
            return env
        if len(cond.ops) == 1:
            return _apply(env, cond.operands[0], _NEGATE[cond.ops[0]], cond.operands[1])
        return env
    if isinstance(cond, BinOp) and cond.op in ("&", "|"):
        if (cond.op == "&") == truth:  # both sides hold (a&b true, or a|b false)
            env = refine(env, cond.lhs, truth)
            return None if env is None else refine(env, cond.rhs, truth)
        return env
    return env
