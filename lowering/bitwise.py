"""A bitwise claim decided by the reference evaluator (``lowering.reference``): the program and its
candidate evaluated on the same inputs, without a compiler that could fold their difference away, and
compared bit for bit. ``lowering.verify`` asks for it at the exact tolerance when the two builds agree
(docs/numerics.md, "The oracle for bitwise")."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from engine.leir.ast import DTYPES
from engine.plumbing.records import json_safe

from .errors import LoweringError

BITWISE_FORMULA = ("reference evaluator (lowering.reference) on both programs: outputs identical bit for bit "
                   "(-0.0 is not 0.0; any NaN equals any NaN) on every trial's inputs and on one of special values")


@dataclass
class Bits:
    """One output compared bit for bit (the fields of ``lowering.verify.Comparison`` that apply)."""

    equal: bool
    max_abs_err: float
    max_rel_err: float
    mismatches: int          # elements not identical (NaN matches NaN)
    nonfinite_match: bool    # NaN and +-inf at the same positions
    dtype: str
    mode: str = "bitwise"

    def to_dict(self) -> dict:
        return json_safe(asdict(self))


def compare_bits(actual, expected, dtype: str) -> Bits:
    """The reference evaluator's comparison of one output: identical bit for bit, except that any two
    NaNs are equal (their payloads are not part of a program's meaning); ``mismatches`` counts the rest."""
    name = DTYPES.get(dtype, dtype)
    a, e = np.asarray(actual), np.asarray(expected)
    if a.shape != e.shape:
        return Bits(False, math.inf, math.inf, int(max(a.size, e.size)), False, name)
    if a.dtype.kind == "f" or name in ("float16", "bfloat16", "float32", "float64"):
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        same = ((a64 == e64) & (np.signbit(a64) == np.signbit(e64))) | (np.isnan(a64) & np.isnan(e64))
        fin = np.isfinite(a64) & np.isfinite(e64)
        d = np.abs(a64[fin] - e64[fin])
        max_abs = float(d.max()) if d.size else 0.0
        max_rel = float((d / np.maximum(np.abs(e64[fin]), np.finfo(np.float64).tiny)).max()) if d.size else 0.0
        nonfinite = all(np.array_equal(f(a64), f(e64)) for f in (np.isnan, np.isposinf, np.isneginf))
    else:
        same = a == e
        diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
        max_abs = float(diff.max()) if diff.size else 0.0
        max_rel = float((diff / np.maximum(np.abs(e.astype(np.float64)), 1.0)).max()) if diff.size else 0.0
        nonfinite = True
    bad = int(np.count_nonzero(~same))
    return Bits(bad == 0, max_abs, max_rel, bad, nonfinite, name)


def _first_difference(actual, expected) -> str:
    a, e = np.asarray(actual), np.asarray(expected)
    if a.shape != e.shape:
        return f"shape {list(a.shape)} vs {list(e.shape)}"
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    same = ((a64 == e64) & (np.signbit(a64) == np.signbit(e64))) | (np.isnan(a64) & np.isnan(e64))
    at = tuple(int(i) for i in np.argwhere(~same)[0]) if a.ndim else ()
    return f"first at {list(at)}: {str(a[at])} instead of {str(e[at])}"


_ORIGINALS: dict = {}          # (program text and declarations, seed, trial) -> reference outputs
_ORIGINALS_BYTES = 256 << 20   # held at most (an original is verified against many candidates)


def _reference_outputs(program, inputs: dict, key: tuple) -> dict:
    from .reference import evaluate
    full = (program.to_leir(), tuple((d.name, d.dtype, tuple(d.shape)) for d in program.known)) + key
    hit = _ORIGINALS.get(full)
    if hit is None:
        hit = evaluate(program, inputs)
        size = sum(a.nbytes for a in hit.values())
        while _ORIGINALS and size + sum(a.nbytes for v in _ORIGINALS.values() for a in v.values()) > _ORIGINALS_BYTES:
            _ORIGINALS.pop(next(iter(_ORIGINALS)))
        if size <= _ORIGINALS_BYTES:
            _ORIGINALS[full] = hit
    return hit


def reference_verdict(program, candidate, trials: int, seed: int):
    """The reference evaluator's verdict on a bitwise claim (``lowering.reference``): both programs on the
    inputs of each trial and on one more set with special values (``special_inputs``), every output
    compared with ``compare_bits``. ({"formula", "equal", "trials": [...]}, None), or (None, (who,
    error)) when the evaluator cannot run one of them."""
    from .inputs import random_inputs
    from .reference import evaluate, special_inputs
    out = {"formula": BITWISE_FORMULA, "equal": True, "trials": []}
    for t in range(trials + 1):
        special = t == trials
        inputs = (special_inputs if special else random_inputs)(program, seed, t)
        try:
            want = _reference_outputs(program, inputs, (seed, t, special))
        except LoweringError as e:
            return None, ("original", e)
        try:
            got = evaluate(candidate, inputs)
        except LoweringError as e:
            return None, ("candidate", e)
        outs, equal = {}, True
        for d in program.outputs:
            c = compare_bits(got[d.name], want[d.name], d.dtype)
            outs[d.name] = c.to_dict()
            if not c.equal:
                outs[d.name]["first"] = _first_difference(got[d.name], want[d.name])
            equal &= c.equal
        out["equal"] &= equal
        out["trials"].append({"trial": t, "seed": [seed, t], "inputs": "special values" if special else "random",
                              "equal": equal, "outputs": outs})
    return out, None
