"""egglog terms -> LEIR AST: reading a query's results back from the frozen e-graph.

For each e-class the decoder picks the node built from a schema constructor (rules/leir/terms.egg).
When the compute ruleset was not run, helper applications (``SubE``, ``LSet``, ...) are read
too and evaluated in Python (engine.rewrite.compute). Every decoded term is interned with the
encoder's keys (engine.rewrite.terms), so a decoded subterm equal to an input subterm is
returned as the ORIGINAL AST node: untouched parentheses and number spellings survive.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.leir.ast import BinOp, Call, Compare, Equation, Loop, Nest, Num, Ref, Unary, Var
from engine.rewrite.schema import SIGNATURES, Unsupported
from engine.rewrite.terms import Interner

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
            from engine.rewrite.compute import HelperEvaluator
            self.ev = HelperEvaluator(compute, interner, self._lookup)
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
