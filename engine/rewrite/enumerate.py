"""One-step neighbour enumeration: every rule match of every strategy, with provenance.

Pipeline per program: encode (bindings objects) -> insert analysis facts -> run the
analysis ruleset to saturation, the selected strategy rulesets for ONE iteration and the
compute ruleset to saturation -> read Step rows from ``freeze()`` -> expand each row to
every position where its left-hand side occurs -> splice the decoded right-hand side into
the ORIGINAL AST -> give placeholders fresh names -> re-analyse with ``check_inits`` (the
printed neighbour must mean what the rule built) -> merge identical neighbours.

One long-lived EGraph holds the schema and rules; each query runs between push and pop.

"""
from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import dataclass, replace

import egglog.bindings as b

from engine.leir.ast import Equation, Nest, Ref, Var, transform, walk
from engine.rewrite.compute import ComputeRules
from engine.rewrite.schema import Unsupported
from engine.leir.diagnostics import LeirError
from engine.rewrite.analyses.program import program_facts
from engine.leir.printer import Printer
from engine.rewrite.rulebook import Rulebook, load_rulebook
from engine.rewrite.strata import needed, queried_tables, strata
from engine.rewrite.terms import SP, Decoder, ExprParam, Interner, call, encode, lit_i, lit_s

LOOP_LETTERS = "acdfghijklmnopqrsuw"
TENSOR_LETTERS = "ACDEFGHIJKMNOQRSWXYZ"
_AVOID = {"exp", "log", "sqrt", "abs", "erf", "max", "min", "inf", "if_then_else"}


def _bijective(n: int, alphabet: str) -> str:
    """n-th (0-based) word of the bijective base-len(alphabet) sequence a, c, ..., aa, ac."""
    k = len(alphabet)
    out = ""
    n += 1
    while n:
        n, r = divmod(n - 1, k)
        out = alphabet[r] + out
    return out


def loop_names():
    i = 0
    while True:
        yield _bijective(i, LOOP_LETTERS)
        i += 1


def tensor_names():
    i = 0
    while True:
        w = _bijective(i, TENSOR_LETTERS)
        yield w[0] + w[1:].lower()
        i += 1


@dataclass(frozen=True)
class Provenance:
    """How a neighbour was obtained: strategy, rule, site (body path) and parameters."""

    strategy: str
    category: str
    rule: str
    site: tuple
    params: tuple          # ((key, value), ...) in rule order, fresh names resolved
    exactness: str

    def to_json(self) -> dict:
        return {"strategy": self.strategy, "category": self.category, "rule": self.rule,
                "site": list(self.site), "params": dict(self.params), "exactness": self.exactness}

    @property
    def param(self) -> dict:
        return dict(self.params)


def resolve_provenance(p: Provenance, names: dict) -> Provenance:
    """``p`` with every placeholder parameter value (``#...``) replaced through ``names``.

    A placeholder the body does not use cannot be named consistently: it is an error in
    the rule that wrote it, reported rather than printed raw.
    """
    if not any(isinstance(v, str) and "#" in v for _, v in p.params):
        return p
    params = []
    for k, v in p.params:
        if isinstance(v, str) and v.startswith("#"):
            if v not in names:
                raise InvalidNeighbour(f"{p.rule}: parameter {k}={v} names a placeholder the result does not use")
            v = names[v]
        elif isinstance(v, str) and "#" in v:         # an expression's text mentioning a placeholder
            try:
                v = rename_text(v, names)
            except _Uncovered:
                raise InvalidNeighbour(f"{p.rule}: parameter {k}={v} names a placeholder the result does not use") \
                    from None
        params.append((k, v))
    return replace(p, params=tuple(params))


class _Lazy:
    """New top-level statements, decoded from interned keys only when needed."""

    __slots__ = ("dec", "keys", "fn")

    def __init__(self, dec, keys, fn):
        self.dec, self.keys, self.fn = dec, keys, fn

    def __call__(self) -> tuple:
        items = tuple(self.dec.ast_of_key(k) for k in self.keys) if self.keys is not None else None
        return self.fn(items) if self.fn is not None else items


class _NeedsCompute(Exception):
    """engine.compute could not decide a helper term: re-run the query with egglog's compute."""


class InvalidNeighbour(Exception):
    """A rule built a program that fails re-analysis: a bug in that rule."""


class _Shared:
    """What one enumeration's neighbours share: a printer that remembers the text of every
    node (neighbours share almost all of their nodes with the program and each other)."""

    __slots__ = ("printer",)

    def __init__(self):
        self.printer = Printer({})


class Neighbour:
    """One distinct neighbour and every way it was obtained.

    The body, its text and the fresh names are materialised on first use (most callers
    sample a few neighbours of many): the new statements are printed with their placeholders
    and the fresh names substituted in the text, so listing texts never rebuilds an AST; the
    renamed body is built only when asked for. ``program`` re-analyses the body with
    ``check_inits`` (the printed text must carry the initialisation the rule built);
    failure raises ``InvalidNeighbour``.
    """

    __slots__ = ("base", "lo", "hi", "_new", "_taken", "raw_provenances", "_provs", "_body", "_leir", "_names",
                 "_program", "_shared", "_texts", "_maps")

    def __init__(self, base, lo: int, hi: int, new, taken: set, provenances, shared: "_Shared | None" = None):
        self.base, self.lo, self.hi, self._new, self._taken = base, lo, hi, new, taken
        self._shared = shared or _Shared()     # one enumeration's neighbours share it
        self.raw_provenances = provenances      # as the rules wrote them (placeholders unresolved)
        self._body = self._leir = self._names = self._program = self._provs = self._texts = self._maps = None

    @property
    def provenances(self) -> list:
        """Every way this neighbour was obtained, best first, with fresh-name placeholders
        in the parameters replaced by the names this neighbour actually uses."""
        if self._provs is None:
            names = self.fresh_names
            self._provs = [resolve_provenance(p, names) for p in self.raw_provenances]
        return self._provs

    def _plan(self):
        """Decode the new statements, print them (placeholders and all) and choose names."""
        if self._maps is None:
            if callable(self._new):
                self._new = self._new()
            texts = [self._shared.printer.item(n) for n in self._new]
            self._maps, self._names, self._texts = fresh_plan(self._taken, self._new, texts)

    @property
    def body(self) -> tuple:
        if self._body is None:
            self._plan()
            new = tuple(_rename(n, names) if names else n for n, names in zip(self._new, self._maps))
            self._body = self.base.body[:self.lo] + new + self.base.body[self.hi:]
        return self._body

    @property
    def fresh_names(self) -> dict:
        """{placeholder: fresh name} chosen for this neighbour."""
        self._plan()
        return self._names

    @property
    def leir(self) -> str:
        if self._leir is None:
            self._plan()
            item, body = self._shared.printer.item, self.base.body
            self._leir = ("".join(item(n) for n in body[:self.lo]) +
                          "".join(self._texts) +
                          "".join(item(n) for n in body[self.hi:]))
        return self._leir

    @property
    def program(self):
        if self._program is None:
            try:
                self._program = self.base.with_body(self.body, check_inits=True)
            except LeirError as e:
                raise InvalidNeighbour(f"{self.raw_provenances[0].rule}: {e.message}") from e
        return self._program

    def to_json(self) -> dict:
        d = self.provenances[0].to_json()
        names = self.fresh_names
        if names:
            d["params"]["new_names"] = [names[k] for k in sorted(names)]
        d["leir"] = self.leir
        if len(self.provenances) > 1:
            d["also"] = [p.to_json() for p in self.provenances[1:]]
        return d


@dataclass
class Invalid:
    """A rule result that failed re-analysis: a rule bug, reported, never silently dropped."""

    provenance: Provenance
    leir: str
    error: str


@dataclass
class Enumeration:
    neighbours: list[Neighbour]
    invalid: list[Invalid]
    step_rows: int


# ------------------------------------------------------------------ body surgery


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


def _nest_vars(n: Nest) -> set[str]:
    out = {l.var for l in n.loops}
    for it in n.body:
        if isinstance(it, Nest):
            out |= _nest_vars(it)
    return out


def _tensor_names(program, body) -> set[str]:
    from engine.leir.ast import equations, refs
    names = {d.name for d in program.known}
    for _, eq in equations(body):
        names.add(eq.lhs.name)
        for r in list(refs(eq.rhs)) + [r for i in eq.lhs.index for r in refs(i)]:
            names.add(r.name)
    return names


def _rename(item, names: dict):
    """``item`` with placeholder loop vars and tensor names replaced through ``names``."""
    def fn(x):
        if isinstance(x, Var) and x.name in names:
            return replace(x, name=names[x.name])
        if isinstance(x, Ref) and x.name in names:
            return replace(x, name=names[x.name])
        return x

    if isinstance(item, Equation):
        return replace(item, lhs=transform(item.lhs, fn), rhs=transform(item.rhs, fn))
    loops = tuple(replace(l, var=names.get(l.var, l.var)) for l in item.loops)
    return replace(item, loops=loops, body=tuple(_rename(it, names) for it in item.body))


def _placeholders(item, loops: set, tensors: set):
    """Every placeholder loop variable and tensor name under ``item`` (a full walk)."""
    if isinstance(item, Equation):
        for e in (item.lhs, item.rhs):
            for x in walk(e):
                if isinstance(x, Var) and x.name.startswith("#"):
                    loops.add(x.name)
                elif isinstance(x, Ref) and x.name.startswith("#"):
                    tensors.add(x.name)
        return
    for l in item.loops:
        if l.var.startswith("#"):
            loops.add(l.var)
    for it in item.body:
        _placeholders(it, loops, tensors)


class _Uncovered(Exception):
    """A placeholder in the text is not among the declared ones (see ``fresh_plan``)."""


def rename_text(text: str, names: dict) -> str:
    """Canonical text with every placeholder replaced through ``names``. ``#`` occurs in
    canonical text only where a placeholder starts; the longest name matching there wins."""
    if "#" not in text:
        return text
    parts = text.split("#")
    out = [parts[0]]
    order = sorted(names, key=len, reverse=True)
    for part in parts[1:]:
        for ph in order:
            if part.startswith(ph[1:]):
                out.append(names[ph] + part[len(ph) - 1:])
                break
        else:
            raise _Uncovered("#" + part[:20])
    return "".join(out)


def fresh_plan(taken_tensors: set, stmts: tuple, texts: list[str]) -> tuple[list[dict], dict, list[str]]:
    """Fresh names for the placeholders of the new top-level statements ``stmts`` (printed as
    ``texts``): ({placeholder: name} per statement, {placeholder: name} over all of them, the
    texts with the names substituted).

    Loop placeholders get the first name unused in their statement; tensor placeholders the
    first capital-sequence name unused anywhere (``taken_tensors`` plus ``stmts``). The
    placeholders are read off the loop headers and equation LHSs (a fresh loop variable is
    bound by a loop of its statement, a fresh tensor written by one); if the text holds one
    they miss, every expression is walked instead.
    """
    if not any("#" in t for t in texts):
        return [{} for _ in stmts], {}, texts
    tensors = {eq.lhs.name for n in stmts for _, eq in _eqs(n) if eq.lhs.name.startswith("#")}
    loops = [{v for v in _nest_vars(n) if v.startswith("#")} for n in stmts]
    try:
        return _plan_names(taken_tensors, stmts, texts, tensors, loops)
    except _Uncovered:
        tensors, loops = set(), []
        for n in stmts:
            lp: set = set()
            _placeholders(n, lp, tensors)
            loops.append(lp)
        return _plan_names(taken_tensors, stmts, texts, tensors, loops)


def _plan_names(taken_tensors, stmts, texts, tensors: set, loops: list[set]):
    tensor_map: dict = {}
    if tensors:
        taken = set(taken_tensors)
        for n in stmts:
            for _, eq in _eqs(n):
                taken.add(eq.lhs.name)
        gen = (t for t in tensor_names() if t not in taken and t[0] not in "LPVBUT")
        for ph in sorted(tensors):
            tensor_map[ph] = next(gen)
    mapping = dict(tensor_map)
    per_stmt, renamed = [], []
    for n, phs, text in zip(stmts, loops, texts):
        names = dict(tensor_map)
        if phs:
            taken = {v for v in _nest_vars(n) if not v.startswith("#")} | _AVOID
            for ph in sorted(phs):
                prefix, _, hint = ph[1:].partition(".")
                if prefix and prefix + hint not in taken:
                    name = prefix + hint
                else:
                    name = next(prefix + w for w in loop_names() if prefix + w not in taken)
                taken.add(name)
                names[ph] = name
                mapping.setdefault(ph, name)
        per_stmt.append(names)
        renamed.append(rename_text(text, names))
    return per_stmt, mapping, renamed


def _eqs(n):
    from engine.leir.ast import equations
    return equations((n,))


# ------------------------------------------------------------------ the engine

_ACTIONS: dict = {}

# Python-computed relations that are pure functions of their integer arguments (the divisors
# and cut points of an extent): true in every program, so a fact stays in the base e-graph
# once inserted and later queries skip it (every rule joins them to an extent of the query's
# own loops). Each action of a query's insert rule costs egglog tens of microseconds.
STATIC_RELATIONS = frozenset({"Divisor", "Cut"})


def _fact_action(fact: tuple, items: tuple):
    """The action inserting ``fact`` (relation, literal args...) about the nests bound to the
    variables ``items``. Shared across queries, like ``lit_s``: item variables are named
    after small interned keys, so the same few thousand facts recur from query to query, and
    building the pyo3 objects was most of the facts phase."""
    k = (fact, items)
    got = _ACTIONS.get(k)
    if got is None:
        if len(_ACTIONS) > 200_000:
            _ACTIONS.clear()
        rel, *args = fact
        vals = [b.Var(SP, v) for v in items] + [lit_i(a) if isinstance(a, int) else lit_s(a) for a in args]
        if rel == "ThreadProduct":       # a function: its value is the last argument
            got = b.Set(SP, rel, vals[:-1], vals[-1])
        else:
            got = b.Expr_(SP, call(rel, vals))
        _ACTIONS[k] = got
    return got



@contextlib.contextmanager
def _gc_paused():
    """No cyclic garbage collection during a query. A query allocates hundreds of thousands
    of small objects (interned keys, helper results) and almost no cycles; the collector's
    passes over the engine's long-lived tables it triggers were a quarter of the query time.
    Whatever cycles the query leaves are collected once it returns."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Clock:
    """Adds the time since the previous call to ``acc[phase]`` (benchmarks/enumerate.py)."""

    __slots__ = ("acc", "t")

    def __init__(self, acc: dict):
        self.acc, self.t = acc, time.perf_counter()

    def __call__(self, phase: str) -> None:
        t = time.perf_counter()
        self.acc[phase] = self.acc.get(phase, 0.0) + t - self.t
        self.t = t


class Enumerator:
    """Schema and rules loaded once into a long-lived EGraph; one push/pop per query."""

    def __init__(self, rules_dir=None, rulebook: Rulebook | None = None, python_compute: bool = True,
                 strategies=None, stratified: bool = True):
        """``python_compute``: helper terms are evaluated by engine.compute and the e-graph is
        loaded without the compute ruleset; a query engine.compute cannot decide is re-run on
        a second engine that saturates the compute ruleset in egglog (built on first need).

        ``strategies``: load only these strategies' rules (every query may select only among
        them). Each query clones the e-graph's rules at its push, so an engine for a subset is
        cheaper per query (graph + operator only: push + pop about half).

        ``stratified``: saturate the analysis ruleset stratum by stratum (engine.strata); False
        saturates it as one ruleset (same result, slower: tests compare the two)."""
        self.book = rulebook or load_rulebook(rules_dir)
        if self.book.problems:
            f, line, msg = self.book.problems[0]
            raise LeirError(msg, line, getattr(self.book.problems[0], "col", None), file=f)
        self.strategies = self.book.by_name()
        self.owner = self.book.rule_owner()
        self.order = {s.name: i for i, s in enumerate(self.book.strategies)}
        for st in strategies or ():
            if st not in self.strategies:
                raise LeirError(f"unknown strategy '{st}' (known: {', '.join(sorted(self.strategies))})")
        self.loaded = tuple(s.name for s in self.book.strategies if strategies is None or s.name in strategies)
        drop = {s.ruleset for s in self.book.strategies if s.name not in self.loaded}
        self.eg = b.EGraph()
        self._stripped = python_compute      # self.eg lacks the compute ruleset's rules
        if python_compute:
            drop.add("compute")
        analysis = []                        # the analysis rules, loaded stratified below
        self._static: set[tuple] = set()     # facts of STATIC_RELATIONS already in the base e-graph
        wanted: set[str] = set()             # tables the loaded strategy (and compute) rules read
        for filename, text in self.book.programs(drop):
            cmds = self.eg.parse_program(text, filename=filename)
            rest = []
            for c in cmds:
                if isinstance(c, b.RuleCommand) and c.rule.ruleset == "analysis":
                    analysis.append(c)
                else:
                    rest.append(c)
                    wanted |= queried_tables(c)
            self.eg.run_program(*rest)
        self.compute = ComputeRules(text for _, text in self.book.programs())
        wanted |= self.compute.mentioned     # evaluated in Python, compute rules look functions up
        tables = set(self.eg.freeze().functions)
        kept, self._queried = needed([c.rule for c in analysis], tables, wanted)  # _queried: facts to insert
        if stratified:
            self._analysis_schedule = self._load_strata(kept, tables)
        else:
            self.eg.run_program(*(b.RuleCommand(r) for r in kept))
            self._analysis_schedule = "(run-schedule (saturate (run analysis)))"
        self._run_compute = self.eg.parse_program("(run-schedule (saturate (run compute)))")
        self._run_insert = b.RunSchedule(b.Repeat(SP, 1, b.Run(SP, b.RunConfig("q_insert", None))))
        self.compute_fallbacks = 0           # queries whose helpers needed egglog's compute ruleset
        self.python_compute = python_compute  # False: every query saturates compute in egglog
        self._full: Enumerator | None = None     # the engine with egglog's compute ruleset (fallback)
        self.phase_seconds: dict[str, float] = {}   # seconds spent per query phase, accumulated
        self.rule_matches: dict[str, int] = {}      # egglog matches per strategy rule, accumulated
        self._schedules: dict[tuple | None, list] = {}
        self._combined: set[str] = set()
        self._depth = 0                      # open push scopes on self.eg (queries only)
        self._declared = set(self.eg.freeze().functions)
        self._checked: set[str] = set()

    def _load_strata(self, rules: list, tables: set[str]) -> str:
        """Declare one ruleset per analysis stratum (engine.strata), add its rules and return
        the schedule that saturates them in order."""
        layers = strata(rules, tables)
        runs = []
        for i, (layer, recursive) in enumerate(layers):
            name = f"analysis_{i}"
            self.eg.run_program(b.AddRuleset(SP, name),
                                *(b.RuleCommand(b.Rule(r.span, r.head, r.body, r.name, name)) for r in layer))
            runs.append(f"(saturate (run {name}))" if recursive else f"(run {name})")
        return f"(run-schedule (seq {' '.join(runs)}))" if runs else "(run-schedule (saturate (run analysis)))"

    def _ruleset(self, selected: tuple[str, ...] | None) -> str:
        """The ruleset that runs exactly the selected strategies for one iteration.

        A subset of several strategies needs a combined ruleset. egglog keeps rulesets in
        the e-graph state that push/pop saves and restores, so a ruleset declared inside a
        query's push would vanish at its pop while the schedule cache still named it (the
        "no entry found for key" panic). Combined rulesets are therefore declared only at
        the top level (``self._depth == 0``), once per subset, and live as long as the engine.
        """
        if selected is None:
            return "step"
        if len(selected) == 1:
            return self.strategies[selected[0]].ruleset
        name = "q_" + "_".join(str(self.order[s]) for s in selected)
        if name not in self._combined:
            if self._depth:
                raise RuntimeError("combined rulesets must be declared outside a query's push/pop")
            self.eg.run_program(b.UnstableCombinedRuleset(SP, name, [self.strategies[s].ruleset for s in selected]))
            self._combined.add(name)
        return name

    def _schedule(self, selected: tuple[str, ...] | None) -> list:
        """Commands: saturate analysis, one step of the selected rulesets. The helper terms the
        step built are evaluated in Python while decoding (engine.compute), not by saturating
        the compute ruleset, unless evaluation gives up (then ``_decode_rows`` runs it)."""
        sched = self._schedules.get(selected)
        if sched is None:
            rs = self._ruleset(selected)
            text = self._analysis_schedule + f"(run {rs} 1)"
            sched = self._schedules[selected] = self.eg.parse_program(text)
        return sched

    def select(self, strategies=None, categories=None) -> tuple[str, ...] | None:
        """The selected strategies in rule-file order (None: every strategy, all loaded)."""
        if not strategies and not categories:
            return None if len(self.loaded) == len(self.book.strategies) else self.loaded
        names = []
        for s in self.book.strategies:
            if strategies and s.name not in strategies:
                continue
            if categories and s.category not in categories:
                continue
            names.append(s.name)
        for s in strategies or ():
            if s not in self.strategies:
                raise LeirError(f"unknown strategy '{s}' (known: {', '.join(sorted(self.strategies))})")
        if len(self.loaded) != len(self.book.strategies):
            names = [n for n in names if n in self.loaded]
            missing = sorted(set(strategies or ()) - set(self.loaded))
            if missing:
                raise LeirError(f"strategy '{missing[0]}' is not loaded in this engine "
                                f"(loaded: {', '.join(self.loaded)})")
        return tuple(names)

    def _check_relations(self, names) -> None:
        """Every relation the Python analyses produce must be declared by the rule files:
        egglog itself panics while formatting the error for an unknown one."""
        for rel in names:
            if rel not in self._checked:
                if rel not in self._declared:
                    raise LeirError(f"the Python analyses (engine.rewrite.analyses) produced a fact for '{rel}', which no rule file declares "
                                    f"(declare it in {self.book.files[0]})")
                self._checked.add(rel)

    def _fact_actions(self, program, enc) -> tuple[list, list]:
        """(actions inserting this query's Python-computed facts, facts of STATIC_RELATIONS the
        base e-graph lacks yet). Only facts some loaded rule can read: egglog compiles each
        action of the insert rule at tens of microseconds apiece, so an engine loading a few
        strategies skips the facts only the others use."""
        glob, per_key, pairs, rep = program_facts(program, enc)
        self._check_relations({f[0] for f in glob} | {f[0] for fs in per_key.values() for f in fs} |
                              {f[0] for f in pairs} | ({"Repeated"} if rep else set()))
        used = self._queried
        acts, static = [], []
        for fact in glob:
            if fact[0] in used:
                if fact[0] not in STATIC_RELATIONS:
                    acts.append(_fact_action(fact, ()))
                elif fact not in self._static:
                    static.append(fact)
        for key in sorted(per_key):
            g = (enc.nest_globals[key],)
            for fact in sorted(per_key[key], key=repr):
                if fact[0] in used:
                    acts.append(_fact_action(fact, g))
        for rel, k1, k2, *args in pairs:
            if rel in used:
                acts.append(_fact_action((rel, *args), (enc.nest_globals[k1], enc.nest_globals[k2])))
        for (_, k) in rep if "Repeated" in used else ():
            acts.append(b.Expr_(SP, call("Repeated", [enc.exprs[k]])))
        return acts, static

    def enumerate(self, program, strategies=None, categories=None, validate: bool = False) -> Enumeration:
        """Every one-step neighbour of ``program`` (a ``Program``), merged and sorted.

        With ``validate`` every neighbour is re-analysed now and failures are returned in
        ``invalid``; otherwise ``Neighbour.program`` does it on first use.
        """
        selected = self.select(strategies, categories)
        if selected == ():
            return Enumeration([], [], 0)
        if self._stripped and not self.python_compute:
            self.compute_fallbacks += 1
            return self._egglog_compute().enumerate(program, strategies, categories, validate)
        try:
            with _gc_paused():
                return self._enumerate(program, selected, validate)
        except _NeedsCompute:
            self.compute_fallbacks += 1
            return self._egglog_compute().enumerate(program, strategies, categories, validate)

    def _egglog_compute(self) -> "Enumerator":
        if self._full is None:
            self._full = Enumerator(rulebook=self.book, python_compute=False,
                                strategies=None if len(self.loaded) == len(self.book.strategies) else self.loaded)
        return self._full

    def _enumerate(self, program, selected, validate: bool) -> Enumeration:
        clock = _Clock(self.phase_seconds)
        interner = Interner()
        enc = encode(program.body, interner, "l_prog", "l_")
        clock("encode")
        facts, static = self._fact_actions(program, enc)
        for fact in static:                  # kept for good: inserted at the base level, below the push
            self._static.add(fact)
            self.eg.run_program(b.ActionCommand(_fact_action(fact, ())))
        actions = enc.actions + facts
        # one rule with an empty query whose actions insert everything, run once: egglog
        # handles each top-level command separately, which costs far more
        insert = [b.AddRuleset(SP, "q_insert"),
                  b.RuleCommand(b.Rule(SP, actions, [], "q_insert", "q_insert")),
                  self._run_insert]
        clock("facts")
        eg = self.eg
        schedule = self._schedule(selected)  # before push: a combined ruleset must outlive the pop
        eg.run_program(b.Push(1))
        self._depth += 1
        clock("push")
        try:
            eg.run_program(*insert)
            clock("insert")
            eg.run_program(schedule[0])
            clock("analysis")
            for out in eg.run_program(*schedule[1:]):
                if isinstance(out, b.RunScheduleOutput):
                    self._count(out.report)
            clock("step")
            if self._stripped:
                try:
                    dec, rows = self._decode_rows(interner, enc, compute=True)
                except (Unsupported, KeyError, RecursionError) as e:
                    raise _NeedsCompute(str(e)) from e
            else:
                eg.run_program(*self._run_compute)
                dec, rows = self._decode_rows(interner, enc, compute=False)
            clock("decode")
        finally:
            eg.run_program(b.Pop(SP, 1))
            self._depth -= 1
            clock("pop")
        out = self._expand(program, enc, dec, rows, validate)
        clock("expand")
        return out

    def _count(self, report) -> None:
        """Accumulate egglog's per-rule match counts of a step run. (egglog runs the selected
        rules as one ruleset and times only the whole: ``phase_seconds["step"]``.)"""
        for rule, n in report.num_matches_per_rule.items():
            if n:
                self.rule_matches[rule] = self.rule_matches.get(rule, 0) + n

    def _decode_rows(self, interner, enc, compute: bool):
        """(decoder, [(relation, lhs key, rhs key, rule, params)]) of the Step rows, read while
        the e-graph still holds the query (pop discards it)."""
        eg = self.eg
        frozen = eg.freeze()
        dec = Decoder(eg, frozen, interner, enc.orig, self.compute if compute else None)
        rows = []
        functions = frozen.functions     # a property that converts every table: read it once
        for rel in ("Step", "StepItems", "StepExpr"):
            fn = functions.get(rel)
            if fn is None:
                continue
            for row in fn.rows:
                lhs, rhs, rule, params = row.inputs
                rows.append((rel, dec.key_of(lhs), rhs, dec.prim("S", rule),
                             dec.params(params)))
        rows = [(rel, lk, dec.key_of(rv), rule, ps) for rel, lk, rv, rule, ps in rows]
        dec.release()
        return dec, rows

    def _expand(self, program, enc, dec, rows, validate: bool) -> Enumeration:
        """Splice each Step into the original body at every occurrence; merge identical ones.

        Identity is structural: the interned keys of the whole new top-level body (fresh
        names are a deterministic function of that structure), so nothing is printed here.
        """
        body = program.body
        top = [enc.path_key[(i,)] for i in range(len(body))]
        taken = _tensor_names(program, body)
        found: dict[tuple, Neighbour] = {}
        shared = _Shared()
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
                              Provenance(strat.name, strat.category, rule, path, params, exact), shared)
            elif rel == "StepItems":
                for parent, start in enc.list_sites.get(lhs_key, ()):
                    if parent:
                        lo = parent[0]
                        ident = (lo, lo + 1, parent, start, rhs_key)
                        new = _Lazy(dec, None, lambda n, o=body[lo], p=parent, s=start, k=rhs_key:
                                    (_replace_suffix(o.body, p[1:], s, tuple(dec.ast_of_key(k)), o),))
                        self._add(found, ident, program, lo, lo + 1, new, taken,
                                  Provenance(strat.name, strat.category, rule, parent + (start,), params, exact), shared)
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
                              Provenance(strat.name, strat.category, rule, (start,), params, exact), shared)
            else:
                raise LeirError("StepExpr rows are not supported yet by the expander")
        for nb in found.values():
            if len(nb.raw_provenances) > 1:
                nb.raw_provenances.sort(key=self._prov_key)
        first = {id(nb): self._prov_key(nb.raw_provenances[0]) for nb in found.values()}
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
                    nb.program
                    good.append(nb)
                    nb.provenances
                except InvalidNeighbour as e:
                    invalid.append(Invalid(nb.raw_provenances[0], nb.leir, str(e)))
            out = good
        return Enumeration(out, invalid, len(rows))

    @staticmethod
    def _add(found, ident, program, lo, hi, new, taken, prov, shared):
        nb = found.get(ident)
        if nb is None:
            found[ident] = Neighbour(program, lo, hi, new, taken, [prov], shared)
        else:
            nb.raw_provenances.append(prov)

    def _prov_key(self, p: Provenance):
        params = tuple((k, (0, v, "") if isinstance(v, int) else (1, 0, str(v))) for k, v in p.params)
        return (self.order.get(p.strategy, 1 << 30), p.rule, p.site, params)


def _print_params(params: tuple, dec, printer) -> tuple:
    """``params`` with each term value (``ExprParam``) as the canonical LEIR text of its
    expression (without outer parentheses): a readable record of which sub-expression the rule
    chose, fixed by the program alone."""
    return tuple((k, printer.bare(dec.ast_of_key(v.key)) if type(v) is ExprParam else v) for k, v in params)


_ENGINE: Enumerator | None = None


def default_engine() -> Enumerator:
    """A process-wide engine over the project's rules/ directory."""
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = Enumerator()
    return _ENGINE


def neighbours(program, strategies=None, categories=None) -> list[Neighbour]:
    """Convenience: the valid neighbours of ``program`` under the default engine."""
    return default_engine().enumerate(program, strategies, categories, validate=True).neighbours
