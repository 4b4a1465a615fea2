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

from engine.rewrite.rulebook import read_sexps
from engine.rewrite.schema import SIGNATURES, TERM_ARGS, Unsupported


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

    def __init__(self, texts, shortcuts: bool = True):
        """``shortcuts``: the helpers of engine.native run as Python functions, and the other
        helpers of ``NAME_MAPS`` return a term that does not mention their
        name argument unchanged, without descending into it (tests compare both ways)."""
        self.shortcuts = shortcuts
        self.helpers: dict[str, tuple[tuple[str, ...], str]] = {}   # name -> (arg sorts, sort)
        self.functions: dict[str, tuple[tuple[str, ...], str]] = {}
        self.sorts: dict[str, str] = {"String": "S", "i64": "I"}
        self.sorts.update({s: "key" for s in _SCHEMA_SORTS})
        self.rules: dict[str, list[HelperRule]] = {}
        self.opaque: set[str] = set()      # helpers with a compute rule this module cannot state
        self.pending: list = []
        self.mentioned: set[str] = set()   # every name a compute rule mentions (tables it may look up)
        self._dispatch: dict = {}
        for text in texts:
            for form in read_sexps(text):
                if form.is_list and form.value:
                    self._declare(_plain(form))
        self._compile()
        self.generated = _generate(self)
        if shortcuts:                      # generated helpers call each other through this table
            from engine.rewrite.native import NATIVE
            self.generated.update({n: f for n, f in NATIVE.items() if n in self.generated and n not in self.opaque})

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
        elif head in (Sym("rewrite"), Sym("rule")) and _keyword(f, ":ruleset") == Sym("compute"):
            self.mentioned |= _symbols(f)
        if head == Sym("rewrite") and _keyword(f, ":ruleset") == Sym("compute"):
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
        self._names: dict[int, tuple] = {}

    def names(self, k: int) -> tuple:
        """(loop variables read, tensors referenced) anywhere in the term ``k`` (memoised)."""
        memo = self._names
        got = memo.get(k)
        if got is not None:
            return got
        keys = self.keys
        stack = [k]
        while stack:   # iterative post-order: long statement lists are deep terms
            x = stack[-1]
            if x in memo:
                stack.pop()
                continue
            node = keys[x]
            kids = TERM_ARGS.get(node[0], ())
            pending = False
            for i in kids:
                c = node[i]
                if c not in memo:
                    stack.append(c)
                    pending = True
            if pending:
                continue
            stack.pop()
            name = node[0]
            if name == "Var":
                memo[x] = (frozenset((node[1],)), _EMPTY)
                continue
            vs, ts = (_EMPTY, frozenset((node[1],))) if name == "Ref" else _NONE
            for i in kids:
                cv, ct = memo[node[i]]
                if cv:
                    vs = vs | cv if vs else cv
                if ct:
                    ts = ts | ct if ts else ct
            memo[x] = (vs, ts)
        return memo[k]

    def apply(self, name: str, args: tuple):
        """The value of the helper application ``(name args...)``."""
        fn = self.r.generated.get(name)
        if fn is None:
            raise Unsupported(name)
        try:
            return fn(self, *args)
        except (TypeError, ValueError, ZeroDivisionError, IndexError, RecursionError) as ex:
            raise Unsupported(f"{name}: {ex}") from None


_EMPTY = frozenset()
_NONE = (_EMPTY, _EMPTY)
# Name-keyed structural maps of the helper library: every compute rule of these helpers
# rebuilds the constructor it matched with the helper applied to the children, except on
# the trigger (a (Var v) for the Sub* family, a (Ref X ...) for the tensor maps), where v / X
# is the helper's second argument. On a term without the trigger the result is therefore the
# term itself, so evaluation can return it without descending into it (a substitution inside
# one statement otherwise rebuilt every untouched subterm). tests/test_enumerate.py checks
# that evaluation with and without this shortcut agrees on the corpus.
NAME_MAPS: dict[str, int] = {}      # helper -> 0 (its name argument is a loop variable) / 1 (a tensor)
for _fam, _which in (("Sub", 0), ("Scope", 1), ("Swap", 1), ("Split", 1)):
    for _suffix in ("E", "Es", "I", "Is"):
        NAME_MAPS[_fam + _suffix] = _which


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


def _symbols(e) -> set[str]:
    if isinstance(e, Sym):
        return {e.name}
    return set().union(*(_symbols(x) for x in e)) if isinstance(e, tuple) else set()


def _mentions(e, sym: Sym) -> bool:
    if e == sym:
        return True
    return isinstance(e, tuple) and any(_mentions(x, sym) for x in e)


# ------------------------------------------------------------------ code generation
# The closures above define the semantics and validate each rule (unsupported constructs make
# the helper opaque); for speed every helper is also compiled to one Python function that
# matches its rules inline (a few microseconds per application instead of tens).


class _Gen:
    def __init__(self, rules: ComputeRules):
        self.r = rules
        self.n = 0

    def fresh(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def pat(self, p, x: str, env: dict, out: list, ind: str) -> None:
        """Code matching the value expression ``x`` against ``p``; ``break`` on failure."""
        if isinstance(p, Sym):
            if p.name in env:
                out.append(f"{ind}if {x} != {env[p.name]}: break")
            else:
                v = self.fresh("v_")
                env[p.name] = v
                out.append(f"{ind}{v} = {x}")
            return
        if isinstance(p, tuple):
            t = self.fresh("t_")
            out.append(f"{ind}if type({x}) is not int: break")
            out.append(f"{ind}{t} = keys[{x}]")
            out.append(f"{ind}if {t}[0] != {p[0].name!r} or len({t}) != {len(p)}: break")
            for i, sub in enumerate(p[1:]):
                self.pat(sub, f"{t}[{i + 1}]", env, out, ind)
            return
        out.append(f"{ind}if {x} != {p!r}: break")

    def expr(self, e, env: dict) -> str:
        if isinstance(e, Sym):
            if e.name not in env:
                raise Unsupported(f"unbound {e.name}")
            return env[e.name]
        if not isinstance(e, tuple):
            return repr(e)
        name = e[0].name
        args = [self.expr(x, env) for x in e[1:]]
        if name in SIGNATURES:
            return f"K[({name!r}, {''.join(a + ', ' for a in args)})]"
        if name in self.r.helpers:
            return f"H[{name!r}](ev, {', '.join(args)})"
        if name in _PRIMS:
            return f"P[{name!r}]({', '.join(args)})"
        if name in self.r.functions:
            return f"ev.lookup({name!r}, ({''.join(a + ', ' for a in args)}))"
        raise Unsupported(f"call {name}")

    def guard(self, g, env: dict, out: list, ind: str) -> None:
        op = g[0].name
        if op == "=" and isinstance(g[1], Sym):
            x = self.expr(g[2], env)
            if g[1].name in env:
                out.append(f"{ind}if {env[g[1].name]} != {x}: break")
            else:
                v = self.fresh("v_")
                out.append(f"{ind}{v} = {x}")
                env[g[1].name] = v
            return
        a, b = (self.expr(x, env) for x in g[1:])
        test = {"<": f"{a} < {b}", ">": f"{a} > {b}", "<=": f"{a} <= {b}", ">=": f"{a} >= {b}",
                "=": f"{a} == {b}", "!=": f"{a} != {b}", "set-contains": f"{b} in {a}",
                "set-not-contains": f"{b} not in {a}"}[op]
        out.append(f"{ind}if not ({test}): break")

    def helper(self, name: str) -> str:
        sorts, _ = self.r.helpers[name]
        params = [f"a{i}" for i in range(len(sorts))]
        out = [f"def h_{name}(ev, {', '.join(params)}):"]
        which = NAME_MAPS.get(name)
        if (self.r.shortcuts and which is not None and len(sorts) >= 2 and self.r.kind(sorts[0]) == "key"
                and self.r.kind(sorts[1]) == "S"):
            out += ["    if type(a0) is int and type(a1) is str and a1 not in ev.names(a0)[%d]:" % which,
                    "        return a0"]
        out += [f"    mk = ({name!r}, {''.join(p + ', ' for p in params)})",
               "    r = ev.memo.get(mk)",
               "    if r is not None:",
               "        return r",
               "    keys = ev.keys",
               "    K = ev.key.table",
               "    out = None"]
        first_term = self.r.first_is_term.get(name)
        if first_term:
            out.append("    c0 = keys[a0][0] if type(a0) is int else None")
        for rule in self.r.rules.get(name, ()):
            ind = "        "
            body: list = []
            env: dict = {}
            for p, x in zip(rule.args, params):
                self.pat(p, x, env, body, ind)
            for g in rule.guards:
                self.guard(g, env, body, ind)
            body.append(f"{ind}res = {self.expr(rule.rhs, env)}")
            body.append(f"{ind}if out is None:")
            body.append(f"{ind}    out = res")
            body.append(f"{ind}elif res != out:")
            body.append(f"{ind}    raise Unsupported({name!r} + ': two compute rules give different results')")
            body.append(f"{ind}break")
            if first_term and rule.ctor0 is not None:
                out.append(f"    if c0 == {rule.ctor0!r}:")
                out.append("     while True:")
                out.extend(" " + line for line in body)
            else:
                out.append("    while True:")
                out.extend(body)
        out += ["    if out is None:",
                f"        raise Unsupported({name!r} + ': no compute rule applies')",
                "    ev.memo[mk] = out",
                "    return out"]
        return "\n".join(out)


def _generate(rules: ComputeRules) -> dict:
    """{helper: generated function (ev, *args)} for every helper that is not opaque."""
    gen = _Gen(rules)
    ns: dict = {"Unsupported": Unsupported, "P": _PRIMS}
    table: dict = {}
    ns["H"] = table
    for name in rules.helpers:
        if name in rules.opaque:
            continue
        try:
            src = gen.helper(name)
        except (Unsupported, KeyError, ValueError):
            rules.opaque.add(name)
            continue
        exec(compile(src, f"<compute {name}>", "exec"), ns)
        table[name] = ns[f"h_{name}"]

    def opaque(name):
        def fn(ev, *args):
            raise Unsupported(f"{name}: a compute rule this module cannot state")
        return fn
    for name in rules.opaque:
        table[name] = opaque(name)
    return table
