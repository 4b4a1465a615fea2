"""Helpers shared by the rules: broadcasting, dimension normalisation, literal operands."""
from __future__ import annotations

from typing import Sequence

from ..emitter import TensorVal
from ..expr import E, lit


def norm_dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def norm_dims(dims, rank: int) -> list[int]:
    """Reduction dims as sorted non-negative ints (None or [] means all dims)."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({norm_dim(int(d), max(rank, 1)) for d in dims})


def bidx(t: TensorVal, vs: Sequence, out_shape: Sequence[int]) -> list:
    """``t``'s subscript when broadcast to ``out_shape`` indexed by ``vs``: trailing alignment,
    a size-1 dimension against a larger one is indexed by 0."""
    off = len(out_shape) - t.rank
    idx = []
    for j, s in enumerate(t.shape):
        k = off + j
        idx.append(lit(0) if s == 1 and out_shape[k] != 1 else vs[k])
    return idx


def operand(v, vs: Sequence, out_shape: Sequence[int]) -> E:
    """A tensor read (broadcast) or a Python scalar literal."""
    if isinstance(v, TensorVal):
        return v(*bidx(v, vs, out_shape))
    if isinstance(v, (int, float, bool)):
        return E(lit(v))
    raise TypeError(f"cannot use {v!r} as an operand")
