"""LEIR AST -> egglog terms of the schema in rules/leir/terms.egg (decoding: engine.rewrite.decode).

Encoding builds ``egglog.bindings`` call objects (never text: text insertion is quadratic,
stack.md 2.7) and hash-conses on the Python side, so every distinct subterm gets one
integer *key* and the positions where it occurs are recorded. Each distinct Nest item is
bound to a global ``$iK`` so analysis facts can name it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import egglog.bindings as b

from engine.leir.ast import BinOp, Call, Compare, Equation, Num, Ref, Unary, Var

SP = b.PanicSpan()



_LITS: dict = {}


def lit_s(s: str):
    """A String literal object (shared: egglog copies what it inserts, so one object serves
    every query; building pyo3 objects dominated the cost of listing a query's facts)."""
    got = _LITS.get(s)
    if got is None:
        if len(_LITS) > 100_000:
            _LITS.clear()
        got = _LITS[s] = b.Lit(SP, b.String(s))
    return got


def lit_i(n: int):
    k = ("i", n)
    got = _LITS.get(k)
    if got is None:
        if len(_LITS) > 100_000:
            _LITS.clear()
        got = _LITS[k] = b.Lit(SP, b.Int(n))
    return got


def call(name: str, args: list):
    return b.Call(SP, name, args)


@dataclass
class Encoded:
    """An inserted program: keys of its subterms and where they occur."""

    actions: list                       # bindings actions (lets) that insert the program
    root: int                           # key of the top-level Items list
    nest_globals: dict[int, str]        # key of a Nest item -> its global "$iK"
    orig: dict[int, Any] = field(default_factory=dict)          # key -> first original AST node
    item_paths: dict[int, list] = field(default_factory=dict)   # Item key -> [path]
    list_sites: dict[int, list] = field(default_factory=dict)   # Items key -> [(parent path, start)]
    loop_lists: dict[int, list] = field(default_factory=dict)   # Loops key -> [nest path]
    path_key: dict[tuple, int] = field(default_factory=dict)    # item path -> Item key
    exprs: dict[int, Any] = field(default_factory=dict)         # key -> bindings expression
    counts: dict[int, int] = field(default_factory=dict)        # non-leaf Expr key -> occurrences

    @property
    def commands(self) -> list:
        """The actions as top-level commands (every bindings wrapper deep-copies its
        argument, so build them only when top-level commands are wanted)."""
        return [b.ActionCommand(a) for a in self.actions]


class _Table(dict):
    """key tuple -> int; a missing tuple gets the next int (``table[t]`` interns at C speed)."""

    __slots__ = ("keys",)

    def __missing__(self, key: tuple) -> int:
        k = self[key] = len(self.keys)
        self.keys.append(key)
        return k


class Interner:
    """Structural keys: (constructor, primitives..., child keys...) -> small int."""

    def __init__(self):
        self.keys: list[tuple] = []
        self.table = _Table()
        self.table.keys = self.keys

    def __call__(self, key: tuple) -> int:
        return self.table[key]


class Encoder:
    """Encodes one program body; the interner is shared with the decoder of the same query."""

    def __init__(self, interner: Interner, prefix: str = "$"):
        self.key = interner
        self.prefix = prefix
        self.exprs: dict[int, Any] = {}       # key -> bindings expression (shared objects)
        self.orig: dict[int, Any] = {}
        self.item_paths: dict[int, list] = {}
        self.list_sites: dict[int, list] = {}
        self.loop_lists: dict[int, list] = {}
        self.nest_globals: dict[int, str] = {}
        self.path_key: dict[tuple, int] = {}
        self.counts: dict[int, int] = {}
        self.lets: list = []

    # -- expressions
    def expr(self, e) -> int:
        if isinstance(e, Num):
            k = self.key(("Num", e.text))
            if k not in self.exprs:
                self.exprs[k] = call("Num", [lit_s(e.text)])
        elif isinstance(e, Var):
            k = self.key(("Var", e.name))
            if k not in self.exprs:
                self.exprs[k] = call("Var", [lit_s(e.name)])
        elif isinstance(e, Ref):
            ix = self.exprs_list(e.index)
            k = self.key(("Ref", e.name, e.dtype, e.scope, ix))
            if k not in self.exprs:
                self.exprs[k] = call("Ref", [lit_s(e.name), lit_s(e.dtype), lit_s(e.scope), self.exprs[ix]])
        elif isinstance(e, Unary):
            a = self.expr(e.operand)
            k = self.key(("Un", e.op, a))
            if k not in self.exprs:
                self.exprs[k] = call("Un", [lit_s(e.op), self.exprs[a]])
        elif isinstance(e, BinOp):
            a, c = self.expr(e.lhs), self.expr(e.rhs)
            k = self.key(("Bin", e.op, a, c))
            if k not in self.exprs:
                self.exprs[k] = call("Bin", [lit_s(e.op), self.exprs[a], self.exprs[c]])
        elif isinstance(e, Compare):
            xs = self.exprs_list(e.operands)
            ops = ",".join(e.ops)
            k = self.key(("Cmp", ops, xs))
            if k not in self.exprs:
                self.exprs[k] = call("Cmp", [lit_s(ops), self.exprs[xs]])
        elif isinstance(e, Call):
            xs = self.exprs_list(e.args)
            k = self.key(("Call", e.func, xs))
            if k not in self.exprs:
                self.exprs[k] = call("Call", [lit_s(e.func), self.exprs[xs]])
        else:
            raise TypeError(f"not an expression: {e!r}")
        if not isinstance(e, (Num, Var, Ref)):
            self.counts[k] = self.counts.get(k, 0) + 1
        self.orig.setdefault(k, e)
        return k

    def exprs_list(self, xs) -> int:
        k = self.key(("ENil",))
        if k not in self.exprs:
            self.exprs[k] = call("ENil", [])
        for x in reversed(xs):
            xk = self.expr(x)
            nk = self.key(("ECons", xk, k))
            if nk not in self.exprs:
                self.exprs[nk] = call("ECons", [self.exprs[xk], self.exprs[k]])
            k = nk
        return k

    # -- statements
    def loops(self, loops, path) -> int:
        k = self.key(("LNil",))
        if k not in self.exprs:
            self.exprs[k] = call("LNil", [])
        for lp in reversed(loops):
            lk = self.key(("Lp", lp.kind, lp.var, lp.extent))
            if lk not in self.exprs:
                self.exprs[lk] = call("Lp", [lit_s(lp.kind), lit_s(lp.var), lit_i(lp.extent)])
            self.orig.setdefault(lk, lp)
            nk = self.key(("LCons", lk, k))
            if nk not in self.exprs:
                self.exprs[nk] = call("LCons", [self.exprs[lk], self.exprs[k]])
            k = nk
        self.loop_lists.setdefault(k, []).append(path)
        return k

    def item(self, it, path) -> int:
        if isinstance(it, Equation):
            l, r = self.expr(it.lhs), self.expr(it.rhs)
            init = it.init or ""
            k = self.key(("Eqn", l, r, init))
            if k not in self.exprs:
                self.exprs[k] = call("Eqn", [self.exprs[l], self.exprs[r], lit_s(init)])
        else:
            ls = self.loops(it.loops, path)
            body = self.items(it.body, path)
            k = self.key(("Nest", ls, body))
            if k not in self.exprs:
                name = f"{self.prefix}i{k}"
                self.lets.append(b.Let(SP, name, call("Nest", [self.exprs[ls], self.exprs[body]])))
                self.nest_globals[k] = name
                self.exprs[k] = b.Var(SP, name)
        self.orig.setdefault(k, it)
        self.item_paths.setdefault(k, []).append(path)
        self.path_key[path] = k
        return k

    def items(self, items, path) -> int:
        k = self.key(("INil",))
        if k not in self.exprs:
            self.exprs[k] = call("INil", [])
        keys = [self.item(it, path + (i,)) for i, it in enumerate(items)]
        self.list_sites.setdefault(k, []).append((path, len(items)))
        for i in range(len(items) - 1, -1, -1):
            nk = self.key(("ICons", keys[i], k))
            if nk not in self.exprs:
                self.exprs[nk] = call("ICons", [self.exprs[keys[i]], self.exprs[k]])
            self.list_sites.setdefault(nk, []).append((path, i))
            k = nk
        return k


def encode(body, interner: Interner, root_name: str = "$prog", prefix: str = "$") -> Encoded:
    """Actions inserting ``body`` (a tuple of Nest) as ``root_name``, with its key maps.

    Nest items are bound to ``prefix + "iK"``: ``$`` for globals; a plain prefix when the
    actions are run as the actions of one rule (engine.rewrite.enumerator inserts a query
    that way: one rule with hundreds of actions is much cheaper than as many commands)."""
    enc = Encoder(interner, prefix)
    root = enc.items(body, ())
    actions = enc.lets + [b.Let(SP, root_name, enc.exprs[root])]
    return Encoded(actions, root, enc.nest_globals, enc.orig, enc.item_paths, enc.list_sites, enc.loop_lists,
                   enc.path_key, enc.exprs, enc.counts)
