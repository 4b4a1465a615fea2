"""Element types of LEIR expressions during lowering: the promotion rule for mixed dtypes.

LEIR leaves mixed-dtype arithmetic implicit (an f64 scalar times an f32 tensor, a bool
mask times a float, a loop variable used as a value). The lowering makes every conversion
explicit with ``T.Cast`` so the generated TIR never depends on TVM's own operand matching.

The rule (applied bottom-up, one operator at a time):

* a tensor read has the dtype of its buffer (the first occurrence decides, as in
  ``engine.semantics``); a loop variable is an ``int32`` index inside indices and inside
  conditions (operands of comparisons, ``&``, ``|`` and the condition of
  ``if_then_else``), and elsewhere is cast to the equation's output dtype (``int32`` when
  that is ``bool``), as the reference lowering does;
* numeric literals are *weak*: they take the type of the other operand; a literal with no
  typed partner takes the output dtype (``int32`` inside indices and conditions, and a
  float literal in an integer context is ``float64``);
* ``+ - * max min abs if_then_else`` and comparisons promote their operands: two floats ->
  the wider one (``float16`` with ``bfloat16`` -> ``float32``); float with int or bool ->
  the float; two ints -> the wider one (signed with unsigned -> ``int64``); bool with a
  number -> the number (bool arithmetic alone is done in ``int32``);
* ``/`` is true division and ``**``, ``exp log sqrt erf`` are real functions: when the
  promoted operand type is integer or bool they compute in the output dtype if that is a
  float, else in ``float64``;
* ``//`` and ``%`` are Python floor division and modulo (``T.floordiv``/``T.floormod`` on
  integers, ``floor(a/b)`` and ``a - floor(a/b)*b`` on floats);
* the value stored is cast to the output dtype.
"""
from __future__ import annotations

WEAK_INT = "weak_int"
WEAK_FLOAT = "weak_float"

_FLOAT_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64,
             "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


def is_float(t: str) -> bool:
    return t in _FLOAT_BITS or t == WEAK_FLOAT


def is_int(t: str) -> bool:
    return t in _INT_BITS or t == WEAK_INT


def is_weak(t: str) -> bool:
    return t in (WEAK_INT, WEAK_FLOAT)


def promote(a: str, b: str) -> str:
    """Common type of two operand types (weak literals yield to typed operands)."""
    if a == b:
        return a
    if is_weak(a) and is_weak(b):
        return WEAK_FLOAT
    if is_weak(a):
        a, b = b, a
    if is_weak(b):  # a is concrete
        if b == WEAK_FLOAT and not is_float(a):
            return WEAK_FLOAT
        return a
    if a == "bool":
        return b
    if b == "bool":
        return a
    fa, fb = a in _FLOAT_BITS, b in _FLOAT_BITS
    if fa and fb:
        if _FLOAT_BITS[a] == _FLOAT_BITS[b]:  # float16 with bfloat16
            return "float32"
        return a if _FLOAT_BITS[a] > _FLOAT_BITS[b] else b
    if fa:
        return a
    if fb:
        return b
    if a.startswith("u") != b.startswith("u"):
        return "int64"
    return a if _INT_BITS[a] >= _INT_BITS[b] else b


def real_type(t: str, out: str) -> str:
    """The type a real-valued operation (``/``, ``**``, ``exp``...) computes in."""
    if t == WEAK_INT:
        return WEAK_FLOAT
    if is_float(t):
        return t
    return out if out in _FLOAT_BITS else "float64"


def concrete(t: str, out: str, in_condition: bool) -> str:
    """Resolve a weak literal type where a concrete one is needed."""
    if t == WEAK_INT:
        if in_condition or out == "bool":
            return "int32"
        return out
    if t == WEAK_FLOAT:
        return out if (out in _FLOAT_BITS and not in_condition) else "float64"
    return t
