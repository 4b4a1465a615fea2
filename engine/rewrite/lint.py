"""``python -m engine.lint rules/``: check rule files before they are loaded.

Checks, each reported as ``file:line:col: error: message``:

* the files load into egglog (syntax, types, unbound names), with egglog's own message;
* strategy metadata (read by engine.rewrite.meta when the rules load): every required key
  present, no unknown one, each value valid (category, bucket, integer K/P/S, exactness,
  benefits, origin); one block per strategy across all loaded folders; an inverse that is a
  loaded strategy (or ``none``); ``@range`` exactly on the blocks that have a range-guarded
  rule (one whose query uses a relation of ``RANGE_RELATIONS``: ``WideSite``, ``WideFloat``,
  ``PartialsOK``). A block without ``@benefit`` is a warning. Any strategy whose block is
  complete is accepted: the paper's 43 are checked against the paper by the tests;
* identities (rulebook.py): the two rules of a pair belong to strategies that name each other
  as @inverse, each direction binds every variable it uses, no term uses a name of the rule
  template;
* rule names: present, unique, ``<strategy>`` or ``<strategy>/<variant>``, in ruleset
  ``step`` (an identity's rules: in their strategy's own ruleset), and the Step row the rule
  inserts names the rule itself;
* unknown relations: every function a strategy rule uses is declared in some rule file;
* examples: every block has at least one ``@example`` whose programs parse and are written in
  canonical LEIR (examples.py; ``python -m lowering.rule_examples`` also runs them, example_check.py);
* unused guards: a pattern variable bound once and never used again (prefix it with ``_``
  to mark it deliberately unused). Analysis relations no rule uses are warnings.

Exit status 2 when there is an error, else 0.
"""
from __future__ import annotations

import re

from engine.rewrite.rulebook import (RANGE_RELATIONS, SCHEMA_FILE, TEMPLATE_NAMES, SExp, SExpError, keyword,
                                     load_rulebook)

STEP_RELATIONS = ("Step", "StepItems", "StepExpr")
# egglog primitives and action keywords that may appear in rules
PRIMITIVES = {
    "=", "!=", "<", ">", "<=", ">=", "+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "not", "and", "or",
    "min", "max", "abs", "log2", "to-string", "to-i64", "to-f64", "from-string", "replace", "count-matches",
    "let", "set", "union", "delete", "subsume", "panic", "extract", "bool-=", "bool-<", "bool->",
    "vec-of", "vec-empty", "vec-push", "vec-get", "vec-length", "vec-contains", "vec-append", "vec-set",
    "set-of", "set-empty", "set-insert", "set-contains", "set-not-contains", "set-union", "set-remove",
    "set-length", "set-diff", "set-intersect", "map-empty", "map-insert", "map-get", "map-contains",
    "map-not-contains", "map-remove", "map-length", "unstable-fn", "unstable-app", "str-len",
}
DECL_HEADS = {"relation", "function", "constructor", "sort", "datatype", "datatype*", "let"}


class Report:
    def __init__(self):
        self.items: list[tuple[str, int, int, str, str]] = []

    def error(self, file, line, col, msg):
        self.items.append((str(file), line or 1, col or 1, "error", msg))

    def warning(self, file, line, col, msg):
        self.items.append((str(file), line or 1, col or 1, "warning", msg))

    @property
    def errors(self) -> int:
        return sum(1 for i in self.items if i[3] == "error")

    def lines(self) -> list[str]:
        return [f"{f}:{l}:{c}: {kind}: {m}" for f, l, c, kind, m in sorted(self.items)]


def _declared(forms: list[SExp]) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for f in forms:
        h = f.head
        if h not in DECL_HEADS or len(f.value) < 2:
            continue
        if h == "datatype*":
            for sub in f.value[1:]:
                if sub.is_list and sub.value:
                    out[sub.value[0].value] = (sub.line, sub.col)
                    for v in sub.value[1:]:
                        if v.is_list and v.value:
                            out[v.value[0].value] = (v.line, v.col)
            continue
        name = f.value[1]
        if not name.is_list:
            out[name.value] = (f.line, f.col)
        if h == "datatype":
            for v in f.value[2:]:
                if v.is_list and v.value:
                    out[v.value[0].value] = (v.line, v.col)
    return out


def _calls(x: SExp):
    """Every list form (head symbol, form) inside x."""
    if x.is_list:
        if x.value and not x.value[0].is_list:
            yield x.value[0].value, x
        for c in x.value[1:] if x.value and not x.value[0].is_list else x.value:
            yield from _calls(c)


def _vars(x: SExp, out: list):
    """Pattern variables (bare symbols that are not literals) in argument positions."""
    if not x.is_list:
        return
    items = x.value[1:] if x.value and not x.value[0].is_list else x.value
    for c in items:
        if c.is_list:
            _vars(c, out)
        elif not (c.value.startswith('"') or c.value.startswith(":") or c.value.startswith("$")
                  or re.fullmatch(r"-?\d+(\.\d+)?", c.value) or c.value in ("true", "false")):
            out.append(c)


def lint(path=None) -> Report:
    """The report of the rules ``path`` names: None (the built-in rules), a folder, a list of
    folders or a ``RuleSources`` (engine.rewrite.sources)."""
    rep = Report()
    book = load_rulebook(path)
    for p in book.problems:
        f, line, msg = p
        rep.error(f, line, getattr(p, "col", 1), msg)

    # 1. egglog accepts the files
    from egglog.bindings import EGraph, EggSmolError
    eg = EGraph()
    for filename, text in book.programs():
        try:
            eg.run_program(*eg.parse_program(text, filename=filename))
        except EggSmolError as e:
            ctx = str(getattr(e, "context", e))
            m = re.search(r"In (\d+):(\d+)-\S* of (\S+?):\s*(.*)", ctx, re.S)
            if m:
                detail = ctx.strip().splitlines()[-1]
                rep.error(m.group(3), int(m.group(1)), int(m.group(2)), f"egglog: {detail}")
            else:
                rep.error(filename, 1, 1, f"egglog: {ctx.strip().splitlines()[-1] if ctx.strip() else ctx}")
            break

    # declarations across all files
    forms_by_file: dict[str, list[SExp]] = {}
    declared: dict[str, tuple[int, int]] = {}
    for f in book.files:
        try:
            forms = book.forms(f)                   # identities expanded into their rules
        except SExpError as e:
            rep.error(f, e.line, e.col, str(e))
            forms = []
        forms_by_file[str(f)] = forms
        declared.update(_declared(forms))

    # 2. metadata: the values were checked as the rules loaded (book.problems); what spans blocks
    all_rules: dict[str, tuple] = {}
    known = {s.name for s in book.strategies}
    for s in book.strategies:
        inv = s.meta.get("inverse")
        if inv and inv != "none" and inv not in known:
            rep.error(s.file, s.meta_lines.get("inverse", s.line), 1,
                      f"@inverse '{inv}' is not a loaded strategy (or 'none')")
        if s.metadata is not None and not s.metadata.benefit:
            rep.warning(s.file, s.line, 1, f"strategy '{s.name}' has no @benefit (what it can improve)")
        if not s.rules:
            rep.error(s.file, s.line, 1, f"strategy '{s.name}' has no rules")
        _check_examples(rep, s)

    # 3. identities, then rules: names, rulesets, Step names, unknown relations, unused variables
    strategies = book.by_name()
    for f, idents in book.identities.items():
        for ident in idents:
            _check_identity(rep, f, ident, strategies)
    generated = book.identity_rules()
    guarded: dict[str, list[str]] = {}          # strategy -> its range-guarded rules
    used_relations: set[str] = set()
    for f in book.files:
        blocks = [s for s in book.strategies if s.file == str(f)]
        for form in forms_by_file[str(f)]:
            for h, sub in _calls(form):
                used_relations.add(h)
            if form.head not in ("rule", "rewrite", "birewrite"):
                continue
            name = keyword(form, ":name")
            name = name.value.strip('"') if name is not None else ""
            if name in generated:
                owner, ruleset = strategies.get(name.split("/")[0]), "s_" + name.split("/")[0]
            else:
                owner, ruleset = None, "step"
                for s in blocks:
                    if s.line < form.line:
                        owner = s
            if owner is None:
                continue
            _check_rule(rep, f, form, owner, declared, all_rules, ruleset)
            if form.head == "rule" and any(h in RANGE_RELATIONS for h, _ in _calls(form.value[1])):
                guarded.setdefault(owner.name, []).append(name)
    for s in book.strategies:
        if s.range and s.name not in guarded:
            rep.error(s.file, s.meta_lines.get("range", s.line), 1,
                      f"@range on '{s.name}', but none of its rules is guarded by {' or '.join(RANGE_RELATIONS)}")
        elif not s.range and s.name in guarded:
            rep.error(s.file, s.line, 1, f"'{s.name}' has range-guarded rules ({', '.join(guarded[s.name])}) but no "
                                         "@range saying what can overflow or underflow")

    # 4. analysis relations nobody uses (warnings)
    schema = next((f for f in book.files if f.name == SCHEMA_FILE), None)
    if schema is not None:
        for form in forms_by_file[str(schema)]:
            if form.head == "relation" and len(form.value) > 1:
                name = form.value[1].value
                uses = sum(1 for ff in book.files for fm in forms_by_file[str(ff)]
                           for h, _ in _calls(fm) if h == name and fm is not form)
                if name not in STEP_RELATIONS and uses == 0:
                    rep.warning(schema, form.line, form.col, f"relation '{name}' is declared but no rule uses it")
    return rep


def _check_examples(rep: Report, s) -> None:
    """At least one ``@example`` per block, each parsing, its bodies in canonical LEIR
    (examples.py; running them needs TVM: ``python -m lowering.rule_examples``)."""
    if not s.examples:
        rep.error(s.file, s.line, 1, f"strategy '{s.name}' has no @example (a small program and the neighbour "
                                     "it gives, just before the block's first rule; see engine/rewrite/examples.py)")
    seen = set()
    for ex in s.examples:
        for e in ex.check_text():
            if (e.line, e.col, e.message) not in seen:         # a BEFORE error repeats for each @after
                seen.add((e.line, e.col, e.message))
                rep.error(ex.file, e.line, e.col, f"example of '{s.name}': {e.message}")


def _check_identity(rep: Report, f, ident, strategies) -> None:
    """An identity's own constraints (rulebook.parse_identity checked its syntax)."""
    form = ident.form
    owners = [strategies.get(n.split("/")[0]) for n in ident.names]
    if len(ident.names) == 2 and all(owners):
        a, b = owners
        if a.meta.get("inverse") != b.name or b.meta.get("inverse") != a.name:
            rep.error(f, form.line, form.col, f"identity '{ident.names[0]}' pairs '{a.name}' with '{b.name}', which do "
                                              "not name each other as @inverse")
    for term in (ident.left, ident.right):
        hits = [v for v in _var_list(term) if v.value in TEMPLATE_NAMES]
        for v in hits[:1]:
            rep.error(f, v.line, v.col, f"identity '{ident.names[0]}' uses '{v.value}', a name of the rule template "
                                        f"({' '.join(TEMPLATE_NAMES)}): rename it")
    bound_by_guards = set()
    for g in ident.when:
        bound_by_guards |= {v.value for v in _var_list(g)}
    lets = {lt.value[0].value for lt in ident.lets}
    for name, pattern, replacement in ident.directions():
        bound = {v.value for v in _var_list(pattern)} | bound_by_guards | lets | set(TEMPLATE_NAMES)
        free = sorted({v.value for v in _var_list(replacement)} - bound)
        if free:
            rep.error(f, form.line, form.col, f"rule '{name}' of an identity uses {', '.join(free)}, which its "
                                              "pattern does not bind (a two-way identity needs the same variables on "
                                              "both sides)")


def _var_list(x: SExp) -> list:
    out: list = []
    if x.is_list:
        _vars(x, out)
    return out


def _check_rule(rep: Report, f, form: SExp, owner, declared, all_rules, ruleset: str = "step"):
    name_x = None
    items = form.value
    for i, it in enumerate(items[:-1]):
        if not it.is_list and it.value == ":name":
            name_x = items[i + 1]
    if name_x is None:
        rep.error(f, form.line, form.col, f"rule in block '{owner.name}' has no :name")
        return
    name = name_x.value.strip('"')
    if name in all_rules:
        rep.error(f, name_x.line, name_x.col, f"rule name '{name}' is already used at {all_rules[name]}")
    all_rules[name] = f"{f}:{name_x.line}"
    if name != owner.name and not name.startswith(owner.name + "/"):
        rep.error(f, name_x.line, name_x.col,
                  f"rule '{name}' in block '{owner.name}' must be named '{owner.name}' or '{owner.name}/<variant>'")
    rs = None
    for i, it in enumerate(items[:-1]):
        if not it.is_list and it.value == ":ruleset":
            rs = items[i + 1]
    if rs is None or rs.value != ruleset:
        rep.error(f, form.line, form.col, f"rule '{name}' must be in ':ruleset {ruleset}'")
    if form.head != "rule":
        rep.error(f, form.line, form.col, f"strategy rule '{name}' must be a (rule ...) inserting a Step row "
                                          "(step mode: no rewrite/union of program terms)")
        return
    query, actions = items[1], items[2]
    steps = [c for h, c in _calls(actions) if h in STEP_RELATIONS]
    if not steps:
        rep.error(f, form.line, form.col, f"rule '{name}' inserts no Step/StepItems/StepExpr row")
    for st in steps:
        if len(st.value) < 5:
            rep.error(f, st.line, st.col, f"{st.value[0].value} needs lhs, rhs, rule name and params")
            continue
        tag = st.value[3]
        if tag.is_list or tag.value.strip('"') != name or not tag.value.startswith('"'):
            rep.error(f, tag.line, tag.col, f"the Step row of rule '{name}' must name it: \"{name}\"")
    for h, c in list(_calls(query)) + list(_calls(actions)):
        if h not in declared and h not in PRIMITIVES:
            rep.error(f, c.line, c.col, f"unknown relation or function '{h}' (declare it in {SCHEMA_FILE})")
    # unused variables: bound in the query, used nowhere else
    qv: list = []
    _vars(query, qv)
    av: list = []
    _vars(actions, av)
    lets = {c.value[1].value for h, c in _calls(actions) if h == "let" and len(c.value) > 1}
    counts: dict[str, int] = {}
    for v in qv + av:
        counts[v.value] = counts.get(v.value, 0) + 1
    reported = set()
    for v in qv:
        if counts[v.value] == 1 and not v.value.startswith("_") and v.value not in lets and v.value not in reported:
            reported.add(v.value)
            rep.error(f, v.line, v.col, f"pattern variable '{v.value}' of rule '{name}' is bound but never used "
                                        "(unused guard; write _name if intended)")
