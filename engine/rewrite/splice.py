"""Splicing: each Step row's right-hand side put into the ORIGINAL program at every position
where its left-hand side occurs, identical results merged into one ``Neighbour``.

Input: the program, its encoding (where each interned key occurs), the decoder of the query
and its Step rows; output: the ``Enumeration``, neighbours in a stable order (best provenance
first: strategy in rule-file order, rule, site, parameters; then text).
"""
from __future__ import annotations

from dataclasses import replace

from engine.leir.ast import Nest
from engine.leir.diagnostics import LeirError
from engine.rewrite.decode import ExprParam
from engine.rewrite.names import taken_tensor_names
from engine.rewrite.neighbour import Enumeration, Invalid, InvalidNeighbour, Match, Neighbour, Shared


class _Lazy:
    """New top-level statements, decoded from interned keys only when needed."""

    __slots__ = ("dec", "keys", "fn")

    def __init__(self, dec, keys, fn):
        self.dec, self.keys, self.fn = dec, keys, fn

    def __call__(self) -> tuple:
        items = tuple(self.dec.ast_of_key(k) for k in self.keys) if self.keys is not None else None
        return self.fn(items) if self.fn is not None else items


def _replace_item(items: tuple, path: tuple, new, owner: Nest) -> Nest:
    """``owner`` (whose body is ``items``) with the item at ``path`` replaced by ``new``."""
    i = path[0]
    if len(path) == 1:
        return replace(owner, body=items[:i] + (new,) + items[i + 1:])
    n = items[i]
    return replace(owner, body=items[:i] + (_replace_item(n.body, path[1:], new, n),) + items[i + 1:])


def _replace_suffix(items: tuple, parent: tuple, start: int, new: tuple, owner: Nest) -> Nest:
    """``owner`` with the body list at ``parent`` cut at ``start`` and continued by ``new``."""
    if not parent:
        return replace(owner, body=items[:start] + new)
    i = parent[0]
    n = items[i]
    return replace(owner, body=items[:i] + (_replace_suffix(n.body, parent[1:], start, new, n),) + items[i + 1:])


class Splicer:
    """Splices the rows of queries against one rule book: ``owner`` maps a rule to its
    strategy block, ``order`` a strategy to its rule-file position (the listing order)."""

    def __init__(self, owner: dict, order: dict[str, int]):
        self.owner, self.order = owner, order

    def expand(self, program, enc, dec, rows: list, validate: bool) -> Enumeration:
        """Splice each Step into the original body at every occurrence; merge identical ones.

        Identity is structural: the interned keys of the whole new top-level body (fresh
        names are a deterministic function of that structure), so nothing is printed here.
        """
        body = program.body
        top = [enc.path_key[(i,)] for i in range(len(body))]
        taken = taken_tensor_names(program, body)
        found: dict[tuple, Neighbour] = {}
        shared = Shared()
        printed: dict[tuple, tuple] = {}
        for rel, lhs_key, rhs_value, rule, params in rows:
            if params and any(type(v) is ExprParam for _, v in params):
                got = printed.get(params)
                if got is None:
                    got = printed[params] = _print_params(params, dec, shared.printer)
                params = got
            strat = self.owner.get(rule)
            if strat is None:
                raise LeirError(f"Step row names rule '{rule}', which no strategy block owns")
            exact = dict(params).get("exactness", strat.exactness)
            rhs_key = rhs_value
            if rel == "Step":
                if rhs_key == lhs_key:
                    continue
                for path in enc.item_paths.get(lhs_key, ()):
                    lo = path[0]
                    if len(path) == 1:
                        ident = (lo, lo + 1, rhs_key)
                        new = _Lazy(dec, (rhs_key,), None)
                    else:
                        ident = (lo, lo + 1, path, rhs_key)
                        new = _Lazy(dec, (rhs_key,), lambda n, o=body[lo], p=path: (_replace_item(o.body, p[1:], n[0], o),))
                    self._add(found, ident, program, lo, lo + 1, new, taken,
                              (strat.name, strat.category, rule, path, params, exact), shared)
            elif rel == "StepItems":
                for parent, start in enc.list_sites.get(lhs_key, ()):
                    if parent:
                        lo = parent[0]
                        ident = (lo, lo + 1, parent, start, rhs_key)
                        new = _Lazy(dec, None, lambda n, o=body[lo], p=parent, s=start, k=rhs_key:
                                    (_replace_suffix(o.body, p[1:], s, tuple(dec.ast_of_key(k)), o),))
                        self._add(found, ident, program, lo, lo + 1, new, taken,
                                  (strat.name, strat.category, rule, parent + (start,), params, exact), shared)
                        continue
                    keys = dec.list_keys(rhs_key)
                    lo, hi = start, len(body)
                    while keys and hi > lo and keys[-1] == top[hi - 1]:
                        keys, hi = keys[:-1], hi - 1
                    while keys and lo < hi and keys[0] == top[lo]:
                        keys, lo = keys[1:], lo + 1
                    if not keys and lo == hi:
                        continue
                    new = _Lazy(dec, tuple(keys), None)
                    self._add(found, (lo, hi) + tuple(keys), program, lo, hi, new, taken,
                              (strat.name, strat.category, rule, (start,), params, exact), shared)
            else:
                raise LeirError("StepExpr rows are not supported yet by the expander")
        for nb in found.values():
            if len(nb.matches) > 1:
                nb.matches.sort(key=self._prov_key)
        first = {id(nb): self._prov_key(nb.matches[0]) for nb in found.values()}
        out = sorted(found.values(), key=lambda n: first[id(n)])
        # equal first provenances cannot be told apart by key: order those by text
        i = 0
        while i < len(out):
            j = i + 1
            k = first[id(out[i])]
            while j < len(out) and first[id(out[j])] == k:
                j += 1
            if j - i > 1:
                out[i:j] = sorted(out[i:j], key=lambda n: n.leir)
            i = j
        invalid: list[Invalid] = []
        if validate:
            good = []
            for nb in out:
                try:
                    _ = nb.program
                    good.append(nb)
                    _ = nb.provenances
                except InvalidNeighbour as e:
                    invalid.append(Invalid(nb.raw_provenances[0].detached(), nb.leir, str(e)))
            out = good
        return Enumeration(out, invalid, len(rows))

    @staticmethod
    def _add(found, ident, program, lo, hi, new, taken, match: Match, shared):
        nb = found.get(ident)
        if nb is None:
            found[ident] = Neighbour(program, lo, hi, new, taken, [match], shared)
        else:
            nb.matches.append(match)

    def _prov_key(self, m: Match):
        params = tuple((k, (0, v, "") if isinstance(v, int) else (1, 0, str(v))) for k, v in m[4])
        return (self.order.get(m[0], 1 << 30), m[2], m[3], params)


def _print_params(params: tuple, dec, printer) -> tuple:
    """``params`` with each term value (``ExprParam``) as the canonical LEIR text of its
    expression (without outer parentheses): a readable record of which sub-expression the rule
    chose, fixed by the program alone."""
    return tuple((k, printer.bare(dec.ast_of_key(v.key)) if type(v) is ExprParam else v) for k, v in params)
