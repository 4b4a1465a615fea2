"""The code generator: each helper of the compute ruleset compiled to one Python function.

The compute rules of the rule files (rules/leir/helpers.egg) are the only definition of a helper; this
module turns a helper's rules into a function that matches them inline on interned keys (a few
microseconds per application). Whatever it cannot state (a pattern on a non-schema
constructor, an unknown guard or call) is a ``HelperError``: engine.rewrite.compute reports it
when the rules are loaded, and ``engine.lint`` as an error of the rule file.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.rewrite.schema import SIGNATURES, Unsupported


@dataclass(frozen=True)
class Sym:
    name: str


class HelperError(Exception):
    """A compute rule the code generator cannot compile; ``where``: (file, line, col) of
    that rule when known."""

    where: tuple | None = None


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


_TESTS = ("<", ">", "<=", ">=", "=", "!=", "set-contains", "set-not-contains")   # guards the generator states


class _Gen:
    def __init__(self, rules):
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
            if not isinstance(p[0], Sym) or p[0].name not in SIGNATURES:
                raise HelperError(f"pattern on {p[0]!r}: only schema constructors can be matched")
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
                raise HelperError(f"unbound variable {e.name}")
            return env[e.name]
        if not isinstance(e, tuple):
            return repr(e)
        if not e or not isinstance(e[0], Sym):
            raise HelperError(f"{e!r}: not a call")
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
        raise HelperError(f"call of {name}, which is neither a schema constructor, a helper, a primitive "
                          f"nor a function")

    def guard(self, g, env: dict, out: list, ind: str) -> None:
        if not isinstance(g, tuple) or not g or not isinstance(g[0], Sym):
            raise HelperError(f"guard {g!r}: not a call")
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
        if op not in _TESTS or len(g) != 3:
            raise HelperError(f"guard {op} with {len(g) - 1} argument(s): not one the code generator states")
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
            try:
                for p, x in zip(rule.args, params):
                    self.pat(p, x, env, body, ind)
                for g in rule.guards:
                    self.guard(g, env, body, ind)
                body.append(f"{ind}res = {self.expr(rule.rhs, env)}")
            except HelperError as e:
                e.where = getattr(rule, "where", None)
                raise
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


def generate(rules) -> dict:
    """{helper: generated function (ev, *args)} for every helper of ``rules`` (a
    ``ComputeRules``); a helper that cannot be compiled raises ``HelperError`` naming it."""
    gen = _Gen(rules)
    ns: dict = {"Unsupported": Unsupported, "P": _PRIMS}
    table: dict = {}
    ns["H"] = table
    for name in rules.helpers:
        try:
            src = gen.helper(name)
        except HelperError as e:
            err = HelperError(f"helper {name}: {e}")
            err.where = e.where
            raise err from None
        exec(compile(src, f"<compute {name}>", "exec"), ns)
        table[name] = ns[f"h_{name}"]
    return table
