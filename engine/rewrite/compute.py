"""The compute ruleset's helper definitions, evaluated in Python on interned terms.

Rules build their right-hand sides with helper constructors (``SubE``, ``LSet``, ...) that
the ``compute`` ruleset of rules/leir/helpers.egg defines by structural rewrites. Saturating that
ruleset in egglog after every step cost more than everything else in a query (it runs all
~160 compute rules for as many iterations as the deepest helper term needs, and leaves every
intermediate result in the e-graph for the decoder to read). The definitions are a
terminating functional program over ground terms, so this module reads them from the rule
files, compiles every helper to Python (engine.rewrite.codegen) and evaluates the helper
applications that a decoded Step row actually contains, innermost first, memoised.

The rules are the one definition of a helper. A compute rule the code generator cannot state
is a load-time error (``ComputeRules.problems``: the engine refuses the rule book,
``engine.lint`` reports it), never a silent fallback. Faithfulness at run time: egglog unions
a helper term with the result of EVERY rule that matches it; here every rule is tried and,
when two match with different results, evaluation gives up (``Unsupported``), as it does for
what depends on the query (a function lookup on a term the e-graph does not hold, no rule
matching, an i64 overflow). The caller then saturates the compute ruleset in egglog, so
results never differ; only the time does.
"""
from __future__ import annotations

from engine.rewrite.codegen import NAME_MAPS, HelperError, Sym, generate
from engine.rewrite.rulebook import SExpError, load_rulebook, read_sexps
from engine.rewrite.schema import SIGNATURES, TERM_ARGS, Unsupported

__all__ = ["NAME_MAPS", "ComputeRules", "HelperEvaluator", "HelperRule", "Sym", "Unsupported", "helper_problems"]



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
    """One definition ``(head args...) -> rhs`` with its guards, as read from the rule file."""

    __slots__ = ("head", "args", "guards", "rhs", "ctor0", "where")

    def __init__(self, head: str, args: tuple, guards: tuple, rhs, where: tuple = ("<rules>", 1, 1)):
        self.head, self.args, self.guards, self.rhs, self.where = head, args, guards, rhs, where
        a0 = args[0] if args else None
        self.ctor0 = a0[0].name if isinstance(a0, tuple) and a0 and isinstance(a0[0], Sym) else None

# sort kinds: "key" (a schema term), "S" (String), "I" (i64), "set" (Set String)
_SCHEMA_SORTS = {sort for sort, _ in SIGNATURES.values()}


class ComputeRules:
    """Helper definitions of the ``compute`` ruleset, read from the rule files' text and
    compiled (``generated``: helper name -> function)."""

    def __init__(self, texts, shortcuts: bool = True):
        """``texts``: rule file texts, or (file name, text) pairs (problems then name the file).

        ``shortcuts``: the helpers of ``NAME_MAPS`` return a term that does not mention their
        name argument unchanged, without descending into it (tests compare both ways).

        ``problems``: (file, line, col, message) of every compute rule the code generator
        cannot state; the helpers are generated only when there are none."""
        self.shortcuts = shortcuts
        self.helpers: dict[str, tuple[tuple[str, ...], str]] = {}   # name -> (arg sorts, sort)
        self.functions: dict[str, tuple[tuple[str, ...], str]] = {}
        self.sorts: dict[str, str] = {"String": "S", "i64": "I"}
        self.sorts.update({s: "key" for s in _SCHEMA_SORTS})
        self.rules: dict[str, list[HelperRule]] = {}
        self.problems: list[tuple[str, int, int, str]] = []
        self.mentioned: set[str] = set()   # every name a compute rule mentions (tables it may look up)
        for item in texts:
            file, text = item if isinstance(item, tuple) else ("<rules>", item)
            for form in read_sexps(text):
                if form.is_list and form.value:
                    self._declare(_plain(form), (str(file), form.line, form.col))
        self.first_is_term = {h: bool(sorts) and self.kind(sorts[0]) == "key"
                              for h, (sorts, _) in self.helpers.items()}
        self.generated: dict = {}
        if not self.problems:
            try:
                self.generated = generate(self)
            except HelperError as e:
                self.problems.append((*(e.where or ("<rules>", 1, 1)), str(e)))

    # -- loading
    def _declare(self, f: tuple, where: tuple) -> None:
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
            self._add(lhs, tuple(when), rhs, where)
        elif head == Sym("rule") and _keyword(f, ":ruleset") == Sym("compute"):
            query, actions = f[1], f[2]
            ok = (query and isinstance(query[0], tuple) and query[0][0] == Sym("=") and
                  isinstance(query[0][1], Sym) and isinstance(query[0][2], tuple) and len(actions) == 1 and
                  isinstance(actions[0], tuple) and actions[0][0] == Sym("union") and actions[0][1] == query[0][1])
            if not ok:
                self.problems.append((*where, "a compute rule must read (rule ((= t (Helper args...)) guards...) "
                                      "((union t result))): the code generator cannot compile this one"))
                return
            t = query[0][1]
            if _mentions(actions[0][2], t) or any(_mentions(g, t) for g in query[1:]):
                self.problems.append((*where, f"a compute rule's guards and result cannot use the helper term "
                                      f"{t.name} itself: the code generator cannot compile this one"))
                return
            self._add(query[0][2], tuple(query[1:]), actions[0][2], where)

    def _add(self, lhs, guards, rhs, where: tuple) -> None:
        if not isinstance(lhs, tuple) or not lhs or not isinstance(lhs[0], Sym):
            self.problems.append((*where, "a compute rule must rewrite a helper application"))
            return
        self.rules.setdefault(lhs[0].name, []).append(HelperRule(lhs[0].name, lhs[1:], guards, rhs, where))

    def kind(self, sort: str) -> str | None:
        return self.sorts.get(sort)


class HelperEvaluator:
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


def _symbols(e) -> set[str]:
    if isinstance(e, Sym):
        return {e.name}
    return set().union(*(_symbols(x) for x in e)) if isinstance(e, tuple) else set()


def _mentions(e, sym: Sym) -> bool:
    if e == sym:
        return True
    return isinstance(e, tuple) and any(_mentions(x, sym) for x in e)


def helper_problems(path=None) -> list[tuple[str, int, int, str]]:
    """(file, line, col, message) of every compute rule of the rules at ``path`` (a directory,
    default the project's) that the code generator cannot compile: ``engine.lint`` reports
    them as errors, and an engine refuses such a rule book when it loads it."""
    try:
        return ComputeRules(load_rulebook(path).programs()).problems
    except SExpError:               # unreadable text: the rule-file lint reports it
        return []
