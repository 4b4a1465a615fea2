"""Single-precision ``exp`` as TIR arithmetic, so a vectorised loop computes it in vector registers.

TVM lowers ``T.exp`` to LLVM's ``llvm.exp`` intrinsic, which LLVM expands to one call of the C
library's ``expf`` per lane: a vectorised softmax row spends almost all of its time in scalar
calls. ``exp_f32`` writes the function as plain arithmetic instead (Cody-Waite range reduction,
a degree-6 minimax polynomial and a scale by 2^q built from the exponent bits, the scheme of
SLEEF's ``expf_u10``), which LLVM vectorises like any other expression. Scalar and vector loops
compute it with the same operations, so vectorising a loop leaves every result bit unchanged.

Accuracy: within 1 ulp of the correctly rounded result over the finite range (checked against
numpy's float64 ``exp`` by tests/test_lowering.py). Special values are exact: ``exp(-inf) = 0``,
``exp(x) = 0`` below -104 (where the true value rounds to 0 in single precision),
``exp(x) = inf`` above ln(FLT_MAX) = 88.7228..., NaN stays NaN; results between 2^-149 and 2^-126
are subnormal, as the C library's, within two units of 2^-149.
"""
from __future__ import annotations

# Cody-Waite split of ln 2 (L2U has 12 trailing zero bits, so q*L2U is exact for |q| < 2^12)
LOG2E = "1.44269504088896341"
L2U = "0.693145751953125"
L2L = "1.428606765330187045e-06"
# minimax coefficients of (exp(s) - 1 - s) / s^2 on [-ln2/2, ln2/2], highest degree first
POLY = ("0.000198527617612853646278381", "0.00139304355252534151077271", "0.00833336077630519866943359",
        "0.0416664853692054748535156", "0.166666671633720397949219", "0.5")
UNDER = "-104"                       # below: 0 (exp(-104) < 2^-150)
OVER = "88.72283935546875"           # above: inf (float32 just above ln(FLT_MAX))


def _f(text: str) -> str:
    return f"T.float32({text})"


VARS = (("a", "float32"), ("x", "float32"), ("q", "int32"), ("s", "float32"))


def exp_f32(arg: str, names: tuple[str, str, str, str]) -> str:
    """TIR text of exp(``arg``) in float32. ``names``: four fresh variables of the types in
    ``VARS`` (a: the argument, x: it clamped to [-104, 89], q: the power of two, s: the reduced
    argument), declared by the caller as ``a = T.float32()``, ``q = T.int32()``, ..."""
    a, x, q, s = names
    clamped = f"T.max(T.min({a}, {_f('89')}), {_f(UNDER)})"
    # q = round(x / ln2); s = x - q*ln2 in two parts
    q_val = f'T.Cast("int32", T.floor({x} * {_f(LOG2E)} + {_f("0.5")}))'
    qf = f'T.Cast("float32", {q})'
    s_val = f"{x} - {qf} * {_f(L2U)} - {qf} * {_f(L2L)}"
    poly = _f(POLY[0])
    for c in POLY[1:]:
        poly = f"({poly}) * {s} + {_f(c)}"
    u = f"({poly}) * {s} * {s} + {s} + {_f('1')}"
    # u * 2^q as u * 2^(q>>1) * 2^(q - q>>1): each factor a normal float for q in [-151, 128]
    half = f"T.shift_right({q}, 1)"
    p1 = f'T.reinterpret("float32", T.shift_left({half} + 127, 23))'
    p2 = f'T.reinterpret("float32", T.shift_left({q} - {half} + 127, 23))'
    scaled = f"({u}) * {p1} * {p2}"
    inner = f"T.Let(T.Let({scaled}, where={{{s}: {s_val}}}), where={{{q}: {q_val}}})"
    ranged = (f"T.if_then_else({x} <= {_f(UNDER)}, {_f('0')}, "
              f"T.if_then_else({x} >= {_f(OVER)}, T.float32(\"inf\"), {inner}))")
    # NaN: every comparison is false and the clamps return a bound, so pass it through
    body = f"T.Let(T.if_then_else(T.isnan({a}), {a}, {ranged}), where={{{x}: {clamped}}})"
    return f"T.Let({body}, where={{{a}: {arg}}})"
