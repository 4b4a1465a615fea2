"""Which tensor elements the equations under a loop touch: the independence test behind
parallel and vectorised loops, and the private dimension behind placing a shared/local buffer."""
from __future__ import annotations

from typing import Optional

from engine.leir.ast import Equation, Num, Ref, Var, walk


def _items_equations(items):
    for it in items:
        if isinstance(it, Equation):
            yield it
        else:
            yield from _items_equations(it.body)


def accesses(items):
    """(ref, is_write) for every tensor access of the equations under ``items``."""
    for eq in _items_equations(items):
        yield eq.lhs, True
        for sub in eq.lhs.index:
            for n in walk(sub):
                if isinstance(n, Ref):
                    yield n, False
        for n in walk(eq.rhs):
            if isinstance(n, Ref):
                yield n, False


def private_dim(var: str, refs: list[Ref], taken: set[int] = frozenset()) -> Optional[int]:
    """A dimension that every ref indexes by exactly ``var`` (None if there is none)."""
    if not refs:
        return None
    rank = len(refs[0].index)
    for d in range(rank):
        if d in taken:
            continue
        if all(len(r.index) == rank and r.index[d] == Var(var) for r in refs):
            return d
    return None


def independent(var: str, items) -> bool:
    """Iterations of loop ``var`` over ``items`` touch disjoint elements of everything written:
    every access to a written tensor indexes it by ``var`` alone in one fixed dimension, or
    every access uses one and the same index, an entry of which is affine in ``var`` with a
    nonzero coefficient (``D_{tx*4+d, a*16+f}`` after a tile: each iteration of ``f`` reads and
    writes its own element)."""
    acc = list(accesses(items))
    written = dict.fromkeys(r.name for r, w in acc if w)
    for name in written:
        rs = [r for r, _ in acc if r.name == name]
        if private_dim(var, rs) is None and not _owned_by_one_index(var, rs):
            return False
    return True


def _owned_by_one_index(var: str, refs_: list[Ref]) -> bool:
    """All ``refs_`` share one index tuple and one of its entries determines ``var`` (the
    others held fixed)."""
    from engine.leir.affine import radix_vars
    index = refs_[0].index
    if any(r.index != index for r in refs_):
        return False
    for entry in index:
        names = {n.name for n in walk(entry) if isinstance(n, Var)}
        if var in names and var in radix_vars(entry, dict.fromkeys(names, 2), among={var}):
            return True
    return False


def plain_entry(e) -> bool:
    """An index entry that is a loop variable or an integer literal."""
    return isinstance(e, Var) or (isinstance(e, Num) and e.is_int)
