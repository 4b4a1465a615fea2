"""Statement emission with the reference translator's naming and loop conventions.

* Tensor names come from the capital sequence ``A C D E … Z Aa Ac …`` (leir.md §4.1).
* Every statement gets fresh loop names: ``tx`` (kind B) on the bound loop, the others
  ``a c d f g …`` in order (leir.md §3.4). A rank-0 statement loops over ``B^{1}_{tx=0}``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from engine.leir.ast import Equation, Loop, Nest, Ref, Var

from .expr import E, ast

_CAPITALS = "ACDEFGHIJKMNOQRSWXYZ"   # no B L P T U V (loop kinds, TVMScript alias)
_LOWER_LOOP = "acdfghijklmnopqrsuw"   # no b e t v x y z


def _bijective(i: int, alphabet: str) -> list[str]:
    digits = []
    i += 1
    while i > 0:
        i -= 1
        digits.append(alphabet[i % len(alphabet)])
        i //= len(alphabet)
    return digits[::-1]


def tensor_name(i: int) -> str:
    """The i-th generated tensor name: A, C, …, Z, Aa, Ac, …"""
    d = _bijective(i, _CAPITALS)
    return d[0] + "".join(c.lower() for c in d[1:])


def loop_name(i: int) -> str:
    """The i-th non-bound loop name: a, c, d, …, w, aa, ac, …"""
    return "".join(_bijective(i, _LOWER_LOOP))


@dataclass(frozen=True)
class TensorVal:
    """A tensor as the translation sees it: its LEIR name, dtype code and shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __call__(self, *index) -> E:
        """A reference ``Name^{dt,g}_{index}`` (no index for rank 0)."""
        if len(index) == 1 and isinstance(index[0], (list, tuple)):
            index = tuple(index[0])
        if len(index) != self.rank:
            raise ValueError(f"{self.name} has rank {self.rank}, indexed with {len(index)}")
        return E(Ref(self.name, self.dtype, "g", tuple(ast(i) for i in index)))


class Emitter:
    """Collects top-level statements and hands out fresh tensor names."""

    def __init__(self):
        self.body: list[Nest] = []
        self._next = 0

    def fresh_name(self) -> str:
        n = tensor_name(self._next)
        self._next += 1
        return n

    def temp(self, dtype: str, shape: Sequence[int]) -> TensorVal:
        return TensorVal(self.fresh_name(), dtype, tuple(int(s) for s in shape))

    @staticmethod
    def loops(extents: Sequence[int], bind: Optional[int] = 0) -> tuple[list[Var], tuple[Loop, ...]]:
        """Loop descriptors over ``extents``; loop ``bind`` is ``B…tx``, the rest ``L`` a, c, d, …

        Returns the loop variables (in ``extents`` order) and the descriptors. With no
        extents the statement is scalar: ``B^{1}_{tx=0}`` and no variables.
        """
        if not extents:
            return [], (Loop("B", "tx", 1),)
        if bind is None or not 0 <= bind < len(extents):
            bind = 0
        names, k = [], 0
        for i in range(len(extents)):
            if i == bind:
                names.append("tx")
            else:
                names.append(loop_name(k))
                k += 1
        loops = tuple(Loop("B" if n == "tx" else "L", n, int(x)) for n, x in zip(names, extents))
        return [Var(n) for n in names], loops

    def stmt(self, loops: tuple[Loop, ...], *equations: tuple[E, object]):
        """Append one top-level statement: ``loops[lhs=rhs;…];``."""
        eqs = []
        for lhs, rhs in equations:
            eqs.append(Equation(ast(lhs), ast(rhs)))
        self.body.append(Nest(tuple(loops), tuple(eqs)))

    def map(self, out: TensorVal, fn, bind: Optional[int] = 0):
        """Element-wise statement over ``out``'s shape: ``out_i = fn(i)``."""
        vs, loops = self.loops(out.shape, bind)
        self.stmt(loops, (out(*vs), fn(vs)))
