"""The translator's op registry: the rule modules (``rules/``) register one function per ATen op
packet here, the graph walk (``graph.py``) looks them up; neither imports the other."""
from __future__ import annotations

from typing import Callable

from .emitter import TensorVal

RULES: dict[str, Callable] = {}


def rule(*names: str):
    """Register a translation rule for the ATen op packets ``names`` (e.g. "softmax")."""
    def deco(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return deco


class StackedPiece:
    """Element ``index`` of a stacked split result (read as ``base_{index,…}``): what a split rule
    returns for each piece and the walk's ``getitem`` copies out."""

    def __init__(self, base: TensorVal, index: int):
        self.base, self.index = base, index
        self.dtype, self.shape = base.dtype, base.shape[1:]
