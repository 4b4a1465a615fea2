"""Python definitions of the hottest compute helpers, used instead of evaluating their rules.

engine.compute evaluates a helper application by trying each of its compute rules, the way
egglog would. For the substitution family (SubE / SubEs / SubI / SubIs) and the loop-list
surgery (LGet / LSet / LIns / LDel) that costs a rule dispatch, a memo entry and a rebuilt
intermediate term per list cell or tree node, and these helpers were most of a query's decode
time (loop tiling alone applies them twice per factor pair). Each definition here states the
same function as its rules in rules/leir.egg, directly on interned keys; where the rules have
no case (an index past the end) it gives up the same way (``Unsupported``).
tests/test_enumerate.py::test_name_map_shortcut_matches_full_evaluation compares every
neighbour of a corpus sample with pure rule evaluation (``ComputeRules(shortcuts=False)``).
"""
from __future__ import annotations

from engine.rewrite.schema import TERM_ARGS, Unsupported


def substitute(ev, k: int, v: str, r: int) -> int:
    """``k`` with every (Var v) replaced by the term ``r`` (SubE, SubEs, SubI, SubIs: their
    rules map every term child, and a Nest's loops hold no variable terms)."""
    if type(k) is not int or type(v) is not str or type(r) is not int:
        raise Unsupported("Sub*: argument of an unexpected sort")
    if v not in ev.names(k)[0]:
        return k
    memo = ev.memo
    mk = ("Sub", k, v, r)
    got = memo.get(mk)
    if got is not None:
        return got
    node = ev.keys[k]
    if node[0] == "Var":                 # it mentions v, so it is (Var v)
        out = r
    else:
        parts = list(node)
        for i in TERM_ARGS[node[0]]:
            parts[i] = substitute(ev, node[i], v, r)
        out = ev.key.table[tuple(parts)]
    memo[mk] = out
    return out


def _spine(ev, ls: int, i: int) -> list[tuple]:
    """The first ``i`` cells of a Loops list (LCons keys), or Unsupported if it is shorter."""
    if type(ls) is not int or type(i) is not int or i < 0:
        raise Unsupported("L*: argument of an unexpected sort")
    keys = ev.keys
    cells = []
    for _ in range(i):
        node = keys[ls]
        if node[0] != "LCons":
            raise Unsupported("L*: index past the end of the list")
        cells.append(node)
        ls = node[2]
    cells.append(ls)
    return cells


def _rebuild(ev, cells: list, tail: int) -> int:
    table = ev.key.table
    for node in reversed(cells):
        tail = table[("LCons", node[1], tail)]
    return tail


def _cons_at(ev, ls: int, i: int):
    cells = _spine(ev, ls, i)
    rest = cells.pop()
    node = ev.keys[rest]
    if node[0] != "LCons":
        raise Unsupported("L*: index past the end of the list")
    return cells, node


def list_get(ev, ls: int, i: int) -> int:
    """(LGet ls i): element i."""
    return _cons_at(ev, ls, i)[1][1]


def list_set(ev, ls: int, i: int, x: int) -> int:
    """(LSet ls i x): element i replaced by x."""
    cells, node = _cons_at(ev, ls, i)
    return _rebuild(ev, cells, ev.key.table[("LCons", x, node[2])])


def list_insert(ev, ls: int, i: int, x: int) -> int:
    """(LIns ls i x): x inserted before element i (i may equal the length)."""
    cells = _spine(ev, ls, i)
    rest = cells.pop()
    return _rebuild(ev, cells, ev.key.table[("LCons", x, rest)])


def list_delete(ev, ls: int, i: int) -> int:
    """(LDel ls i): element i removed."""
    cells, node = _cons_at(ev, ls, i)
    return _rebuild(ev, cells, node[2])


NATIVE = {"SubE": substitute, "SubEs": substitute, "SubI": substitute, "SubIs": substitute,
          "LGet": list_get, "LSet": list_set, "LIns": list_insert, "LDel": list_delete}
