"""LEIR AST <-> egglog terms of the schema in rules/leir.egg.

Encoding builds ``egglog.bindings`` call objects (never text: text insertion is quadratic,
stack.md 2.7) and hash-conses on the Python side, so every distinct subterm gets one
integer *key* and the positions where it occurs are recorded. Each distinct Nest item is
bound to a global ``$iK`` so analysis facts can name it.

Decoding reads ``EGraph.freeze()``: for each e-class it picks the node built from a schema
constructor (helper applications such as ``SubE`` are unioned with their result by the
compute ruleset and are skipped). A decoded subterm whose key equals an input subterm is
returned as the ORIGINAL AST node, so untouched parentheses and number spellings survive.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import egglog.bindings as b

from engine.leir.ast import BinOp, Call, Compare, Equation, Loop, Nest, Num, Ref, Unary, Var
from engine.rewrite.schema import SIGNATURES, Unsupported

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
    actions are run as the actions of one rule (engine.enumerate inserts a query
    that way: one rule with hundreds of actions is much cheaper than as many commands)."""
    enc = Encoder(interner, prefix)
    root = enc.items(body, ())
    actions = enc.lets + [b.Let(SP, root_name, enc.exprs[root])]
    return Encoded(actions, root, enc.nest_globals, enc.orig, enc.item_paths, enc.list_sites, enc.loop_lists,
                   enc.path_key, enc.exprs, enc.counts)


_PRIM_KINDS = frozenset(("S", "I", "set", None))


@dataclass(frozen=True)
class ExprParam:
    """A parameter value that is a term (``PExpr``): the interned key of the expression. The
    enumerator prints it as canonical LEIR text before the parameter leaves the engine."""

    key: int


class Decoder:
    """Reads terms back from a frozen e-graph (schema constructors only)."""

    def __init__(self, egraph, frozen, interner: Interner, orig: dict[int, Any], compute=None):
        """``compute`` (an ``engine.compute.ComputeRules``): the compute ruleset was NOT run;
        helper applications are read too and evaluated in Python (``engine.compute``)."""
        self.eg = egraph
        self.key = interner
        self.orig = orig
        self.nodes: dict = {}
        self.kinds: dict[str, tuple] = {name: kinds for name, (_, kinds) in SIGNATURES.items()}
        names = list(SIGNATURES)
        self.ev = None
        if compute is not None:
            from engine.rewrite.compute import Evaluator
            self.ev = Evaluator(compute, interner, self._lookup)
            for name, (sorts, _) in compute.helpers.items():
                self.kinds[name] = tuple(compute.kind(s) for s in sorts)
                names.append(name)
            self._sort_kind = compute.kind
            self._functions = compute.functions
        functions = frozen.functions     # a property that converts every table: read it once
        for name in names:
            fn = functions.get(name)
            if fn is None:
                continue
            for row in fn.rows:
                if not row.subsumed and row.output not in self.nodes:
                    self.nodes[row.output] = (name, row.inputs)
        self._keys: dict = {}
        self._strs: dict = {}
        self._ints: dict = {}
        self._sets: dict = {}
        self._looked: dict = {}
        self._values: dict[int, Any] = {}    # key -> an e-class holding it (function lookups)
        self._asts: dict[int, Any] = {}
        self._params: dict = {}
        # name -> (schema constructor?, per-argument kind: "K" term / "S" / "I" / other,
        #          indices of the term arguments)
        self._plans: dict[str, tuple] = {}
        for name, kinds in self.kinds.items():
            ctor = name in SIGNATURES
            ks = tuple(("K" if ctor else kd) if kd not in _PRIM_KINDS or kd == "key" else kd for kd in kinds)
            ks = tuple("K" if kd == "key" else kd for kd in ks)
            self._plans[name] = (ctor, ks, tuple(i for i, kd in enumerate(ks) if kd == "K"))

    def _lookup(self, name: str, args: tuple):
        """An egglog function's value on terms the e-graph holds (compute rule queries);
        memoised (helpers look the same sets up many times)."""
        mk = (name, args)
        got = self._looked.get(mk)
        if got is None:
            got = self._looked[mk] = self._lookup_uncached(name, args)
        return got

    def _lookup_uncached(self, name: str, args: tuple):
        sorts, out = self._functions[name]
        vals = []
        for s, a in zip(sorts, args):
            if self._sort_kind(s) != "key" or a not in self._values:
                raise Unsupported(f"lookup {name} on a term the e-graph does not hold")
            vals.append(self._values[a])
        v = self.eg.lookup_function(name, vals)
        if v is None:
            raise Unsupported(f"lookup {name}: no value")
        kind = self._sort_kind(out)
        if kind == "set":
            return self._set(v)
        if kind in ("S", "I"):
            return self.prim(kind, v)
        if kind == "key":
            return self.key_of(v)
        raise Unsupported(f"lookup {name}: result sort {out}")

    def _set(self, v) -> frozenset:
        """A Set String value as a frozenset (cached: converting costs one call per element)."""
        got = self._sets.get(v)
        if got is None:
            to_str = self.eg.value_to_string
            got = self._sets[v] = frozenset(to_str(x) for x in self.eg.value_to_set(v))
        return got

    def _arg(self, kind, v):
        if kind in ("S", "I"):
            return self.prim(kind, v)
        if kind == "set":
            return self._set(v)
        if kind == "key":
            return self._keys[v]
        raise Unsupported("helper argument of an unsupported sort")

    def prim(self, kind: str, v):
        """A String / i64 value (cached: rows repeat the same literals many times)."""
        cache = self._strs if kind == "S" else self._ints   # a Value is raw bits: keep sorts apart
        got = cache.get(v)
        if got is None:
            got = cache[v] = self.eg.value_to_string(v) if kind == "S" else self.eg.value_to_i64(v)
        return got

    def key_of(self, value) -> int:
        """Structural key of the e-class ``value`` (interned with the encoder's keys)."""
        keys = self._keys
        k = keys.get(value)
        if k is not None:
            return k
        nodes, plans, table, values = self.nodes, self._plans, self.key.table, self._values
        strs, ints = self._strs, self._ints
        stack = [value]
        while stack:  # iterative post-order: terms can be deep (long lists)
            v = stack[-1]
            if v in keys:
                stack.pop()
                continue
            node = nodes.get(v)
            if node is None:
                raise KeyError("e-class has no schema constructor (a helper was not computed)")
            name, ins = node
            ctor, kinds, children = plans[name]
            pending = False
            for i in children:
                x = ins[i]
                if x not in keys:
                    stack.append(x)
                    pending = True
            if pending:
                continue
            args = []
            for kd, x in zip(kinds, ins):
                if kd == "K":
                    args.append(keys[x])
                elif kd == "S":
                    got = strs.get(x)
                    args.append(got if got is not None else self.prim("S", x))
                elif kd == "I":
                    got = ints.get(x)
                    args.append(got if got is not None else self.prim("I", x))
                else:
                    args.append(self._arg(kd, x))
            if ctor:
                k = keys[v] = table[(name, *args)]
                if k not in values:
                    values[k] = v
            else:
                keys[v] = self.ev.apply(name, tuple(args))
            stack.pop()
        return keys[value]

    def release(self) -> None:
        """Drop everything that only reading the e-graph needed (its node table, value maps,
        the helper evaluator); the interned terms and their ASTs stay for lazy decoding. The
        evaluator and decoder refer to each other, so without this the whole query's state
        would wait for the cyclic collector."""
        self.eg = self.ev = self.nodes = self._keys = self._values = self._looked = None
        self._sets = self._strs = self._ints = self._params = None

    def ast(self, value):
        """The AST of an Expr / Item / Loop e-class; lists decode to tuples."""
        return self.ast_of_key(self.key_of(value))

    def ast_of_key(self, k: int):
        if k in self.orig:
            return self.orig[k]
        if k in self._asts:
            return self._asts[k]
        key = self.key.keys[k]
        name = key[0]
        if name == "Num":
            out = Num(key[1])
        elif name == "Var":
            out = Var(key[1])
        elif name == "Ref":
            out = Ref(key[1], key[2], key[3], self.ast_of_key(key[4]))
        elif name == "Un":
            out = Unary(key[1], self.ast_of_key(key[2]))
        elif name == "Bin":
            out = BinOp(key[1], self.ast_of_key(key[2]), self.ast_of_key(key[3]))
        elif name == "Cmp":
            out = Compare(tuple(key[1].split(",")), self.ast_of_key(key[2]))
        elif name == "Call":
            out = Call(key[1], self.ast_of_key(key[2]))
        elif name in ("ENil", "LNil", "INil"):
            out = ()
        elif name in ("ECons", "LCons", "ICons"):
            out = (self.ast_of_key(key[1]),) + self.ast_of_key(key[2])
        elif name == "Lp":
            out = Loop(key[1], key[2], key[3])
        elif name == "Eqn":
            out = Equation(self.ast_of_key(key[1]), self.ast_of_key(key[2]), key[3] or None)
        elif name == "Nest":
            out = Nest(self.ast_of_key(key[1]), self.ast_of_key(key[2]))
        else:
            raise ValueError(f"cannot decode {name}")
        self._asts[k] = out
        return out

    def list_keys(self, k: int) -> list[int]:
        """Element keys of an interned Items/Loops/Exprs list key."""
        out = []
        key = self.key.keys[k]
        while key[0] in ("ECons", "LCons", "ICons"):
            out.append(key[1])
            key = self.key.keys[key[2]]
        return out

    def params(self, value) -> tuple:
        """A Params list as a tuple of (key, value) pairs, first key first (a key set twice
        keeps its first position and its last value, as a dict would); a term value is an
        ``ExprParam``. Memoised per list: the rows of one rule share their tails."""
        memo = self._params
        got = memo.get(value)
        if got is not None:
            return got
        chain = []
        v = value
        while v not in memo:
            name, ins = self.nodes[v]
            if name == "PNil":
                memo[v] = ()
                break
            chain.append((v, name, ins))
            v = ins[2]
        for v, name, ins in reversed(chain):
            kind = SIGNATURES[name][1][1]
            key = self.prim("S", ins[0])
            val = self.prim(kind, ins[1]) if kind in ("S", "I") else ExprParam(self.key_of(ins[1]))
            tail = memo[ins[2]]
            for k, x in tail:
                if k == key:
                    val = x
                    tail = tuple(kx for kx in tail if kx[0] != key)
                    break
            memo[v] = ((key, val),) + tail
        return memo[value]
