"""The compute ruleset's helper definitions, evaluated in Python on interned terms.

Rules build their right-hand sides with helper constructors (``SubE``, ``LSet``, ...) that
the ``compute`` ruleset of rules/leir.egg defines by structural rewrites. Saturating that
ruleset in egglog after every step cost more than everything else in a query (it runs all
~160 compute rules for as many iterations as the deepest helper term needs, and leaves every
intermediate result in the e-graph for the decoder to read). The definitions are a
terminating functional program over ground terms, so this module reads them from the rule
files and evaluates the helper applications that a decoded Step row actually contains,
innermost first, memoised.

Faithfulness: egglog unions a helper term with the result of EVERY rule that matches it;
here every rule is tried and, when two match with different results, evaluation gives up
(``Unsupported``) exactly as it does for anything else it cannot state (a relation in a
guard, an unknown primitive, a function lookup on a term the e-graph does not hold, no rule
matching). The caller then saturates the compute ruleset in egglog as before, so results
never differ; only the time does.
"""
from __future__ import annotations

from dataclasses import dataclass

from .rulebook import read_sexps
from .terms import SIGNATURES


class Unsupported(Exception):
    """A helper application this evaluator cannot decide; fall back to egglog's compute."""


@dataclass(frozen=True)
class Sym:
    name: str


def _atom(text: str):
    if text.startswith('"'):
        return bytes(text[1:-1], "utf-8").decode("unicode_escape")
    try:
        return int(text)
    except ValueError:
        return Sym(text)


def _plain(form):
    """An SExp as nested tuples of str literals, ints and Sym (calls are tuples)."""
    if form.is_list:
        return tuple(_plain(x) for x in form.value)
    return _atom(form.value)


def _keyword(form: tuple, key: str):
    for i, x in enumerate(form[:-1]):
        if x == Sym(key):
            return form[i + 1]
    return None


class HelperRule:
    """One definition ``(head args...) -> rhs`` with its guards, compiled to closures."""

    __slots__ = ("head", "args", "guards", "rhs", "ctor0", "match", "check", "build")

    def __init__(self, head: str, args: tuple, guards: tuple, rhs, rules: "ComputeRules"):
        self.head, self.args, self.guards, self.rhs = head, args, guards, rhs
        a0 = args[0] if args else None
        self.ctor0 = a0[0].name if isinstance(a0, tuple) else None
        self.match = _compile_args(args)
        self.check = [_compile_guard(g, rules) for g in guards]
        self.build = _compile_expr(rhs, rules)


# sort kinds: "key" (a schema term), "S" (String), "I" (i64), "set" (Set String)
_SCHEMA_SORTS = {sort for sort, _ in SIGNATURES.values()}


class ComputeRules:
    """Helper definitions of the ``compute`` ruleset, read from the rule files' text."""

    def __init__(self, texts):
        self.helpers: dict[str, tuple[tuple[str, ...], str]] = {}   # name -> (arg sorts, sort)
        self.functions: dict[str, tuple[tuple[str, ...], str]] = {}
        self.sorts: dict[str, str] = {"String": "S", "i64": "I"}
        self.sorts.update({s: "key" for s in _SCHEMA_SORTS})
        self.rules: dict[str, list[HelperRule]] = {}
        self.opaque: set[str] = set()      # helpers with a compute rule this module cannot state
        self.pending: list = []
        self._dispatch: dict = {}
        for text in texts:
            for form in read_sexps(text):
                if form.is_list and form.value:
                    self._declare(_plain(form))
        self._compile()

    # -- loading
    def _declare(self, f: tuple) -> None:
        head = f[0]
        if head == Sym("sort") and len(f) >= 3 and isinstance(f[2], tuple):
            if f[2] in ((Sym("Set"), Sym("String")),):
                self.sorts[f[1].name] = "set"
        elif head == Sym("constructor") and len(f) >= 4:
            self.helpers[f[1].name] = (tuple(s.name for s in f[2]), f[3].name)
        elif head == Sym("function") and len(f) >= 4:
            self.functions[f[1].name] = (tuple(s.name for s in f[2]), f[3].name)
        elif head == Sym("rewrite") and _keyword(f, ":ruleset") == Sym("compute"):
            lhs, rhs = f[1], f[2]
            when = _keyword(f, ":when") or ()
            self._add(lhs, tuple(when), rhs)
        elif head == Sym("rule") and _keyword(f, ":ruleset") == Sym("compute"):
            query, actions = f[1], f[2]
            ok = (query and isinstance(query[0], tuple) and query[0][0] == Sym("=") and
                  isinstance(query[0][1], Sym) and isinstance(query[0][2], tuple) and len(actions) == 1 and
                  isinstance(actions[0], tuple) and actions[0][0] == Sym("union") and actions[0][1] == query[0][1])
            if not ok:
                for q in query:
                    if isinstance(q, tuple) and len(q) == 3 and q[0] == Sym("=") and isinstance(q[2], tuple):
                        self.opaque.add(q[2][0].name)
                return
            t = query[0][1]
            if _mentions(actions[0][2], t) or any(_mentions(g, t) for g in query[1:]):
                self.opaque.add(query[0][2][0].name)
                return
            self._add(query[0][2], tuple(query[1:]), actions[0][2])

    def _add(self, lhs, guards, rhs) -> None:
        if not isinstance(lhs, tuple) or not isinstance(lhs[0], Sym):
            return
        self.pending.append((lhs[0].name, lhs[1:], guards, rhs))

    def _compile(self) -> None:
        self.first_is_term = {h: bool(sorts) and self.kind(sorts[0]) == "key" for h, (sorts, _) in self.helpers.items()}
        for head, args, guards, rhs in self.pending:
            try:
                rule = HelperRule(head, args, guards, rhs, self)
            except Unsupported:
                self.opaque.add(head)
                continue
            self.rules.setdefault(head, []).append(rule)
        self.pending = []

    def candidates(self, head: str, ctor0) -> list:
        """The rules of ``head`` whose first pattern may match a term built by ``ctor0``,
        in file order."""
        k = (head, ctor0)
        got = self._dispatch.get(k)
        if got is None:
            got = self._dispatch[k] = [r for r in self.rules.get(head, ()) if r.ctor0 is None or r.ctor0 == ctor0]
        return got

    def kind(self, sort: str) -> str | None:
        return self.sorts.get(sort)


class Evaluator:
    """Evaluates helper applications for one query (memoised), on the query's interner.

    ``lookup(name, args)`` answers a function lookup (an analysis function such as ``VSets``
    in a compute rule's query) for terms the e-graph holds, or raises ``Unsupported``.
    """

    def __init__(self, rules: ComputeRules, interner, lookup=None):
        self.r = rules
        self.key = interner
        self.keys = interner.keys
        self.lookup = lookup
        self.memo: dict[tuple, object] = {}

    def apply(self, name: str, args: tuple):
        """The value of the helper application ``(name args...)``."""
        memo_key = (name, args)
        got = self.memo.get(memo_key)
        if got is not None:
            return got
        if name in self.r.opaque:
            raise Unsupported(name)
        a0 = args[0] if args else None
        ctor0 = self.keys[a0][0] if type(a0) is int and self.r.first_is_term.get(name) else None
        out = None
        keys = self.keys
        for rule in self.r.candidates(name, ctor0):
            env: dict = {}
            if not rule.match(args, env, keys):
                continue
            if rule.check and not all(g(env, self) for g in rule.check):
                continue
            res = rule.build(env, self)
            if out is None:
                out = res
            elif res != out:
                raise Unsupported(f"{name}: two compute rules give different results")
        if out is None:
            raise Unsupported(f"{name}: no compute rule applies")
        self.memo[memo_key] = out
        return out


# ------------------------------------------------------------------ compilation to closures


def _compile_pat(p):
    if isinstance(p, Sym):
        n = p.name

        def var(v, env, keys):
            if n in env:
                return env[n] == v
            env[n] = v
            return True
        return var
    if isinstance(p, tuple):
        ctor = p[0].name
        if ctor not in SIGNATURES:
            raise Unsupported(f"pattern on {ctor}")
        subs = tuple(_compile_pat(x) for x in p[1:])
        n = len(subs)

        def app(v, env, keys):
            if type(v) is not int:
                return False
            node = keys[v]
            if node[0] != ctor or len(node) != n + 1:
                return False
            for i in range(n):
                if not subs[i](node[i + 1], env, keys):
                    return False
            return True
        return app

    def lit(v, env, keys):
        return type(v) is type(p) and v == p
    return lit


def _compile_args(pats):
    subs = tuple(_compile_pat(p) for p in pats)
    n = len(subs)

    def match(args, env, keys):
        if len(args) != n:
            return False
        for i in range(n):
            if not subs[i](args[i], env, keys):
                return False
        return True
    return match


def _compile_expr(e, rules: ComputeRules):
    """A closure (env, evaluator) -> value for the expression ``e``."""
    if isinstance(e, Sym):
        n = e.name

        def var(env, ev):
            try:
                return env[n]
            except KeyError:
                raise Unsupported(f"unbound {n}") from None
        return var
    if not isinstance(e, tuple):
        return lambda env, ev: e
    name = e[0].name
    subs = tuple(_compile_expr(x, rules) for x in e[1:])
    if name in SIGNATURES:
        def ctor(env, ev):
            return ev.key((name,) + tuple(f(env, ev) for f in subs))
        return ctor
    if name in rules.helpers:
        def helper(env, ev):
            return ev.apply(name, tuple(f(env, ev) for f in subs))
        return helper
    prim = _PRIMS.get(name)
    if prim is not None:
        def primitive(env, ev):
            try:
                return prim(*(f(env, ev) for f in subs))
            except (TypeError, ZeroDivisionError, ValueError) as ex:
                raise Unsupported(f"{name}: {ex}") from None
        return primitive
    if name in rules.functions:
        def lookup(env, ev):
            if ev.lookup is None:
                raise Unsupported(f"lookup {name}")
            return ev.lookup(name, tuple(f(env, ev) for f in subs))
        return lookup
    raise Unsupported(f"call {name}")


def _compile_guard(g, rules: ComputeRules):
    if not isinstance(g, tuple):
        raise Unsupported(f"guard {g!r}")
    op = g[0].name
    if op == "=" and isinstance(g[1], Sym):
        n = g[1].name
        rhs = _compile_expr(g[2], rules)

        def bind(env, ev):
            v = rhs(env, ev)
            if n in env:
                return env[n] == v
            env[n] = v
            return True
        return bind
    args = tuple(_compile_expr(x, rules) for x in g[1:])
    test = _TESTS.get(op)
    if test is None or len(args) != 2:
        raise Unsupported(f"guard {op}")
    a, b = args

    def guard(env, ev):
        return test(a(env, ev), b(env, ev))
    return guard


def _add(*xs):
    if all(isinstance(x, str) for x in xs):
        return "".join(xs)
    if all(isinstance(x, int) and not isinstance(x, (str, frozenset)) for x in xs):
        return _wrap(sum(xs))
    raise TypeError("+ on mixed arguments")


def _wrap(n: int) -> int:
    if not -(1 << 63) <= n < (1 << 63):
        raise ValueError("i64 overflow")
    return n


def _div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return _wrap(q if (a >= 0) == (b >= 0) else -q)


def _mod(a: int, b: int) -> int:
    return a - b * _div(a, b)


def _ints(fn):
    def f(*xs):
        if not all(isinstance(x, int) for x in xs):
            raise TypeError("integer primitive on non-integers")
        return _wrap(fn(*xs))
    return f


def _to_string(x):
    if isinstance(x, int):
        return str(x)
    raise TypeError("to-string of a non-integer")


_TESTS = {"<": lambda a, b: a < b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b,
          "=": lambda a, b: a == b, "!=": lambda a, b: a != b,
          "set-contains": lambda s, x: x in s, "set-not-contains": lambda s, x: x not in s}
_PRIMS = {
    "+": _add,
    "-": _ints(lambda a, b=None: -a if b is None else a - b),
    "*": _ints(lambda a, b: a * b),
    "/": lambda a, b: _div(a, b),
    "%": lambda a, b: _mod(a, b),
    "min": _ints(min),
    "max": _ints(max),
    "to-string": _to_string,
    "set-empty": lambda: frozenset(),
    "set-of": lambda *xs: frozenset(xs),
    "set-insert": lambda s, x: s | {x},
    "set-union": lambda a, b: a | b,
    "set-intersect": lambda a, b: a & b,
    "set-diff": lambda a, b: a - b,
}


def _mentions(e, sym: Sym) -> bool:
    if e == sym:
        return True
    return isinstance(e, tuple) and any(_mentions(x, sym) for x in e)
