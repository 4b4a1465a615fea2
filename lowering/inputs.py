"""Seeded random inputs for a program's known input tensors.

Distributions (documented because every verification result depends on them):

* floats: standard normal N(0, 1), except inputs that occur inside the argument of ``log``
  or ``sqrt``, in a divisor, or as the base of a non-integer power; those are uniform on
  [0.5, 2) so the corpus's logs, square roots and divisions stay finite. No x10 rescaling
  (the reference's rule); unit-scale data keeps ``exp`` far from overflow;
* bool: independent fair coins;
* integer tensors read inside an index (gather targets, precomputed index tables): uniform
  on [0, n) where n is the smallest size of any dimension they index directly;
* other integers: uniform on [1, 8] (small, and never a zero divisor).

Tensor k (inputs in declared order) of trial t uses ``numpy.random.default_rng([seed, t, k])``,
so the inputs depend only on the seed, the trial number and the declarations. f16/bf16 values are drawn as float32
and rounded.
"""
from __future__ import annotations

import numpy as np

from engine.leir.ast import DTYPES, BinOp, Call, Num, Ref, equations, walk

POSITIVE_RANGE = (0.5, 2.0)
SMALL_INT_RANGE = (1, 8)


def numpy_dtype(code: str):
    """numpy dtype of a LEIR dtype code (bfloat16 through ml_dtypes)."""
    name = DTYPES[code]
    if name == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return np.dtype(name)


def _positive_inputs(program) -> set[str]:
    names = {d.name for d in program.inputs}
    out: set[str] = set()
    for _, eq in equations(program.body):
        for n in walk(eq.rhs):
            arg = None
            if isinstance(n, Call) and n.func in ("log", "sqrt"):
                arg = n.args[0]
            elif isinstance(n, BinOp) and n.op in ("/", "//", "%"):
                arg = n.rhs
            elif isinstance(n, BinOp) and n.op == "**":
                if not (isinstance(n.rhs, Num) and n.rhs.text != "inf" and float(n.rhs.value).is_integer()):
                    arg = n.lhs
            if arg is not None:
                out |= {r.name for r in walk(arg) if isinstance(r, Ref) and r.name in names}
    return out


def _index_bounds(program) -> dict[str, int]:
    """For integer inputs used as whole index entries: the smallest dimension they index."""
    info = program.info
    bound: dict[str, int] = {}
    for _, eq in equations(program.body):
        for n in list(walk(eq.lhs)) + list(walk(eq.rhs)):
            if not isinstance(n, Ref):
                continue
            shape = info.buffers[n.name].shape
            for d, sub in enumerate(n.index):
                for r in walk(sub):
                    if isinstance(r, Ref) and d < len(shape):
                        # the entry is the read itself, or arithmetic around it: bound by the dim
                        bound[r.name] = min(bound.get(r.name, shape[d]), shape[d])
    return bound


def random_inputs(program, seed: int = 0, trial: int = 0) -> dict[str, np.ndarray]:
    """One array per input of ``program``, by name, drawn as the module docstring says."""
    positive = _positive_inputs(program)
    index_bound = _index_bounds(program)
    out: dict[str, np.ndarray] = {}
    for k, d in enumerate(program.inputs):
        rng = np.random.default_rng([seed, trial, k])
        shape = tuple(d.shape)
        name = DTYPES[d.dtype]
        if name in ("float16", "bfloat16", "float32", "float64"):
            if d.name in positive:
                a = rng.uniform(*POSITIVE_RANGE, size=shape)
            else:
                a = rng.standard_normal(size=shape)
            a = np.asarray(a, dtype=np.float64 if name == "float64" else np.float32)
        elif name == "bool":
            a = rng.integers(0, 2, size=shape).astype(bool)
        elif d.name in index_bound:
            a = rng.integers(0, index_bound[d.name], size=shape)
        else:
            a = rng.integers(SMALL_INT_RANGE[0], SMALL_INT_RANGE[1] + 1, size=shape)
        out[d.name] = np.asarray(a).astype(numpy_dtype(d.dtype))
    return out
