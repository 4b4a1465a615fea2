"""``python -m engine.lint rules/``: check rule files before they are loaded.

Checks, each reported once as ``file:line:col: error: message``:

* the files read as s-expressions (balanced parentheses, closed strings);
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
* unknown relations: every function a strategy rule uses is declared in some rule file (with a
  "did you mean" and advice that fits where the file is: the schema of the project or of a
  complete rules directory, or a folder of one's own strategy files);
* examples: every block has at least one ``@example`` whose programs parse and are written in
  canonical LEIR (examples.py; ``python -m lowering.rule_examples`` also runs them, example_check.py);
* unused guards: a pattern variable bound once and never used again (prefix it with ``_``
  to mark it deliberately unused);
* egglog accepts every top-level form that has no error of the above (syntax, sorts, arities,
  unbound names), with egglog's own message: the files are loaded in order, one form at a
  time, so each refusal is located at its form and none hides the next.

Relations a strategy file declares and no rule uses are warnings. The schema's relations are
not: they are the vocabulary guards may use, and their facts are computed only when a loaded
rule reads them (engine.rewrite.facts). Every command that loads rules runs the same checks
(errors only) before it does anything (engine.rewrite.validate).
"""
from __future__ import annotations

import difflib
import functools
import re
from pathlib import Path

from engine.leir.diagnostics import shown_path
from engine.rewrite.rulebook import (RANGE_RELATIONS, TEMPLATE_NAMES, SExp, SExpError, keyword,
                                     load_rulebook, read_sexps)

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
    """Located errors and warnings, each reported once, in file order."""

    def __init__(self):
        self.items: list[tuple[str, int, int, str, str]] = []
        self._seen: set = set()

    def _add(self, file, line, col, kind, msg):
        item = (str(file), line or 1, col or 1, kind, msg)
        if item not in self._seen:
            self._seen.add(item)
            self.items.append(item)

    def error(self, file, line, col, msg):
        self._add(file, line, col, "error", msg)

    def warning(self, file, line, col, msg):
        self._add(file, line, col, "warning", msg)

    @property
    def errors(self) -> int:
        return sum(1 for i in self.items if i[3] == "error")

    @property
    def warnings(self) -> int:
        return len(self.items) - self.errors

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
                if sub.is_list and sub.value and not sub.value[0].is_list:
                    out[sub.value[0].value] = (sub.line, sub.col)
                    for v in sub.value[1:]:
                        if v.is_list and v.value and not v.value[0].is_list:
                            out[v.value[0].value] = (v.line, v.col)
            continue
        name = f.value[1]
        if not name.is_list:
            out[name.value] = (f.line, f.col)
        if h == "datatype":
            for v in f.value[2:]:
                if v.is_list and v.value and not v.value[0].is_list:
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


def _end_line(form: SExp, text: str) -> int:
    """The line a top-level form ends on."""
    return form.line + text.count("\n", form.start, form.end) if form.is_list and form.end > 0 else form.line


class _Forms:
    """The top-level forms of each file (as egglog reads them: identities expanded), and which
    of them already have an error: egglog is not asked about those, so that one mistake is
    reported once."""

    def __init__(self, book, rep: Report):
        self.book = book
        self.by_file: dict[str, list[SExp]] = {}
        self.unreadable: set[str] = set()
        for f in book.files:
            try:
                self.by_file[str(f)] = book.forms(f)          # identities expanded, read once
            except SExpError as e:
                rep.error(f, e.line, e.col, str(e))
                self.unreadable.add(str(f))
                self.by_file[str(f)] = []

    def spans(self, file: str) -> list[tuple[int, int]]:
        text = self.book.text(file)
        return [(fm.line, _end_line(fm, text)) for fm in self.by_file.get(file, [])]

    def with_errors(self, rep: Report) -> dict[str, set[int]]:
        """file -> first lines of the top-level forms that hold an error of ``rep``."""
        out: dict[str, set[int]] = {}
        for file, line, _col, kind, _msg in rep.items:
            if kind != "error" or file not in self.by_file:
                continue
            for a, b in self.spans(file):
                if a <= line <= b:
                    out.setdefault(file, set()).add(a)
        return out


def lint(path=None) -> Report:
    """The report of the rules ``path`` names: None (the built-in rules), a folder, a list of
    folders or a ``RuleSources`` (engine.rewrite.rule_sources)."""
    return lint_book(load_rulebook(path))


def lint_book(book, warnings: bool = True) -> Report:
    """Every error (and, with ``warnings``, every warning) of a loaded rule book, each once:
    the loader's problems, the checks below, then egglog's own verdict on every top-level form
    that has no error yet (one form at a time, so that each is located and none hides another)."""
    rep = Report()
    for p in book.problems:
        f, line, msg = p
        rep.error(f, line, getattr(p, "col", 1), msg)
    forms = _Forms(book, rep)
    declared: dict[str, tuple[int, int]] = {}
    for f in book.files:
        declared.update(_declared(forms.by_file[str(f)]))

    # metadata: the values were checked as the rules loaded (book.problems); what spans blocks
    all_rules: dict[str, tuple] = {}
    known = {s.name for s in book.strategies} | _builtin_names()     # --no-builtin-rules may name them
    for s in book.strategies:
        inv = s.meta.get("inverse")
        if inv and inv != "none" and inv not in known:
            rep.error(s.file, s.meta_lines.get("inverse", s.line), 1,
                      f"@inverse '{inv}' is not a strategy of these rules or the built-in ones (or 'none')"
                      f"{_did_you_mean(inv, known)}")
        if warnings and s.metadata is not None and not s.metadata.benefit:
            rep.warning(s.file, s.line, 1, f"strategy '{s.name}' has no @benefit (what it can improve)")
        if not s.rules:
            rep.error(s.file, s.line, 1, f"strategy '{s.name}' has no rules")
        _check_examples(rep, s)

    # identities, then rules: names, rulesets, Step names, unknown relations, unused variables
    strategies = book.by_name()
    for f, idents in book.identities.items():
        for ident in idents:
            _check_identity(rep, f, ident, strategies)
    generated = book.identity_rules()
    guarded: dict[str, list[str]] = {}          # strategy -> its range-guarded rules
    advice = _Advice(book)
    for f in book.files:
        blocks = [s for s in book.strategies if s.file == str(f)]
        for form in forms.by_file[str(f)]:
            if form.head not in ("rule", "rewrite", "birewrite"):
                continue
            name = keyword(form, ":name")
            name = name.value.strip('"') if name is not None and not name.is_list else ""
            if name in generated:
                owner, ruleset = strategies.get(name.split("/")[0]), "s_" + name.split("/")[0]
            else:
                owner, ruleset = None, "step"
                for s in blocks:
                    if s.line < form.line:
                        owner = s
            if owner is None:
                continue
            _check_rule(rep, f, form, owner, declared, all_rules, ruleset, advice)
            if form.head == "rule" and len(form.value) > 1 and \
                    any(h in RANGE_RELATIONS for h, _ in _calls(form.value[1])):
                guarded.setdefault(owner.name, []).append(name)
    for s in book.strategies:
        if s.range and s.name not in guarded:
            rep.error(s.file, s.meta_lines.get("range", s.line), 1,
                      f"@range on '{s.name}', but none of its rules is guarded by {' or '.join(RANGE_RELATIONS)}")
        elif not s.range and s.name in guarded:
            rep.error(s.file, s.line, 1, f"'{s.name}' has range-guarded rules ({', '.join(guarded[s.name])}) but no "
                                         "@range saying what can overflow or underflow")

    # egglog: every form without an error of its own
    for file, line, col, msg in egglog_problems(book, forms.with_errors(rep), forms.unreadable):
        rep.error(file, line, col, msg)

    # relations a strategy file declares and no rule uses (warnings). The schema's relations are
    # the vocabulary guards may use: their facts are computed only when a loaded rule reads them.
    if warnings:
        used = {h for fs in forms.by_file.values() for fm in fs if fm.head not in DECL_HEADS for h, _ in _calls(fm)}
        for f in book.strategy_files:
            for form in forms.by_file[str(f)]:
                if form.head == "relation" and len(form.value) > 1 and not form.value[1].is_list:
                    name = form.value[1].value
                    if name not in STEP_RELATIONS and name not in used:
                        rep.warning(f, form.line, form.col, f"relation '{name}' is declared but no rule uses it")
    return rep


def _builtin_names() -> set[str]:
    """The strategies of the built-in rule files (an @inverse may name one that is not loaded)."""
    from engine.rewrite.meta import scan_headers
    from engine.rewrite.rule_sources import RULES_DIR
    names = set()
    for f in RULES_DIR.glob("*.egg"):
        try:
            names |= {h.name for h in scan_headers(f.read_text(encoding="utf-8"), str(f))[0]}
        except (OSError, UnicodeDecodeError):
            pass
    return names


def _did_you_mean(word: str, candidates) -> str:
    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.75)
    return f" (did you mean '{close[0]}'?)" if close else ""


class _Advice:
    """What to tell the author of a rule that names an undeclared relation: it depends on
    where the file is (the project's rules or a complete rules directory of one's own declare
    their relations in their schema; a folder of one's own strategy files adds to the
    package's schema, and may declare relations of its own)."""

    def __init__(self, book):
        self.schema = book.schema_place                 # rules/leir/, or a single leir.egg
        self.rules_dir = book.files[0].parent.parent if book.schema_count > 1 else book.files[0].parent

    def unknown(self, file, name: str, declared) -> str:
        hint = _did_you_mean(name, declared)
        if Path(file).parent in (self.rules_dir, self.schema):
            where = f"a relations file of {shown_path(self.schema)}/" if self.schema.is_dir() else shown_path(self.schema)
            return f"unknown relation or function '{name}'{hint}: declare it in {where}"
        return (f"unknown relation or function '{name}'{hint}: guards may use the relations of the schema "
                f"({shown_path(self.schema)}{'/' if self.schema.is_dir() else ''}) and those your own rule files "
                f"declare with (relation {name} (...))")


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BASES: dict[tuple, object] = {}     # the built-in files' chunks (names, digests) -> an EGraph holding them


def egglog_problems(book, skip: dict | None = None, unreadable=()) -> list[tuple[str, int, int, str]]:
    """(file, line, col, message) of each top-level form egglog refuses, the files loaded in
    order into one e-graph, one form at a time (a refused form is left out and the next one
    goes on). ``skip``: file -> first lines of forms not to run (they have an error already).

    The e-graph holding the schema and built-in files is kept per process (by their names and
    contents) and the user's files run between a push and a pop on it: checking a folder of
    one's own costs its own forms."""
    from egglog.bindings import EGraph, Pop, Push

    from engine.rewrite.rule_sources import RULES_DIR, SCHEMA_DIR, digest
    from engine.rewrite.terms import SP
    skip = skip or {}
    chunks = _egglog_chunks(book)
    builtin = RULES_DIR.resolve()
    n = 0
    while n < len(chunks) and chunks[n][2] is not None and Path(chunks[n][2]).resolve().parent in (builtin, builtin / SCHEMA_DIR):
        n += 1
    key = tuple((f, digest(t)) for f, t, _ in chunks[:n])
    base = _BASES.get(key)
    out: list = []
    if base is None:
        base = EGraph()
        out += _run_chunks(base, chunks[:n], skip, unreadable)
        if out or any(f in skip for _, _, f in chunks[:n]):
            out += _run_chunks(base, chunks[n:], skip, unreadable)
            return out
        if len(_BASES) >= 2:
            _BASES.clear()
        _BASES[key] = base
    base.run_program(Push(1))
    try:
        out += _run_chunks(base, chunks[n:], skip, unreadable)
    finally:
        base.run_program(Pop(SP, 1))
    return out


def _egglog_chunks(book) -> list[tuple[str, str, str | None]]:
    """(name, egglog text, rule file or None) in load order: the schema; per strategy file, its
    blocks' rulesets, then the file (each block's rules moved into its own ruleset, as
    ``Rulebook.programs`` does); the combined ``step`` ruleset."""
    from engine.rewrite.rulebook import ruleset_edits
    from engine.rewrite.sexp import edit_text
    out = [(str(f), book.texts[str(f)], str(f)) for f in book.schema_files]
    declared: set[str] = set()
    for f in book.strategy_files:
        blocks = [s for s in book.strategies if s.file == str(f)]
        lines: list[str] = []
        for s in blocks:                  # each on its @strategy line; a name met before: once
            if _NAME.fullmatch(s.name) and s.ruleset not in declared:
                declared.add(s.ruleset)
                lines += [""] * (s.line - 1 - len(lines))
                lines.append(f"(ruleset {s.ruleset})")
        out.append((str(f), "\n".join(lines), str(f)))
        unnamed = {s.ruleset for s in blocks if not _NAME.fullmatch(s.name)}     # its name is the error
        text = book.text(f)
        try:
            text = edit_text(text, ruleset_edits(text, book.forms(f), blocks, drop=unnamed))
        except SExpError:
            pass                   # an unreadable file: reported by the loader, never run
        out.append((str(f), text, str(f)))
    combined = " ".join(sorted(declared, key=[s.ruleset for s in book.strategies].index))
    out.append(("<rulesets>", f"(unstable-combined-ruleset step {combined})\n" if combined else "(ruleset step)\n",
                None))
    return out


def _run_chunks(eg, chunks, skip: dict, unreadable) -> list[tuple[str, int, int, str]]:
    out = []
    for filename, text, file in chunks:
        if file in unreadable:
            continue
        try:
            forms = read_sexps(text)
        except SExpError:
            continue               # reported by the loader
        left_out = skip.get(filename, ())
        for fm in forms:
            if fm.line in left_out:
                continue
            source = "\n" * (fm.line - 1) + " " * (fm.col - 1) + (text[fm.start:fm.end] if fm.is_list else fm.value)
            try:
                eg.run_program(*eg.parse_program(source, filename=filename))
            except BaseException as e:             # EggSmolError, or a panic in egglog's Rust code
                if isinstance(e, (KeyboardInterrupt, SystemExit, MemoryError)):
                    raise
                line, col, msg = _egglog_message(e, fm)
                out.append((file or filename, line, col, f"egglog: {msg}"))
    return out


_SPAN = re.compile(r"In (\d+):(\d+)-\S* of \S+?:\s*")


def _egglog_message(e: BaseException, form: SExp) -> tuple[int, int, str]:
    """(line, col, one-line message) of an egglog error about ``form``: egglog's own span when
    it gives one inside the form, else the form's start."""
    ctx = str(getattr(e, "context", None) or e).strip()
    lines = [l for l in ctx.splitlines() if l.strip()]
    detail = lines[-1].strip() if lines else type(e).__name__
    m = _SPAN.search(ctx)
    if m and int(m.group(1)) >= form.line:
        return int(m.group(1)), int(m.group(2)), detail
    return form.line, form.col, detail


def _check_examples(rep: Report, s) -> None:
    """At least one ``@example`` per block, each parsing, its bodies in canonical LEIR
    (examples.py; running them needs TVM: ``python -m lowering.rule_examples``)."""
    if not s.examples:
        rep.error(s.file, s.line, 1, f"strategy '{s.name}' has no @example (a small program and the neighbour "
                                     "it gives, just before the block's first rule; see engine/rewrite/examples.py)")
    for ex in s.examples:
        for line, col, msg in _example_problems(ex):        # a BEFORE error repeats for each @after: once
            rep.error(ex.file, line, col, f"example of '{s.name}': {msg}")


@functools.lru_cache(maxsize=4096)
def _example_problems(ex) -> tuple[tuple[int, int, str], ...]:
    """``Example.check_text`` of an example (frozen: its file, lines and texts), once per process."""
    return tuple((e.line, e.col, e.message) for e in ex.check_text())


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


def _check_rule(rep: Report, f, form: SExp, owner, declared, all_rules, ruleset: str, advice: "_Advice"):
    name_x = keyword(form, ":name")
    items = form.value
    if name_x is None:
        rep.error(f, form.line, form.col, f"rule in block '{owner.name}' has no :name")
        return
    if name_x.is_list or not name_x.value.startswith('"'):
        rep.error(f, name_x.line, name_x.col, f"a rule's :name is a string, e.g. :name \"{owner.name}\"")
        return
    name = name_x.value.strip('"')
    if name in all_rules:
        rep.error(f, name_x.line, name_x.col, f"rule name '{name}' is already used at {all_rules[name]}")
    all_rules[name] = f"{f}:{name_x.line}"
    if name != owner.name and not name.startswith(owner.name + "/"):
        rep.error(f, name_x.line, name_x.col,
                  f"rule '{name}' in block '{owner.name}' must be named '{owner.name}' or '{owner.name}/<variant>'")
    rs = keyword(form, ":ruleset")
    if rs is None or rs.is_list or rs.value != ruleset:
        rep.error(f, form.line, form.col, f"rule '{name}' must be in ':ruleset {ruleset}'")
    if form.head != "rule":
        rep.error(f, form.line, form.col, f"strategy rule '{name}' must be a (rule ...) inserting a Step row "
                                          "(step mode: no rewrite/union of program terms)")
        return
    if len(items) < 3 or not items[1].is_list or not items[2].is_list:
        rep.error(f, form.line, form.col, f"rule '{name}' must be (rule (QUERY...) (ACTIONS...) :ruleset "
                                          f"{ruleset} :name \"{name}\")")
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
            rep.error(f, c.line, c.col, advice.unknown(f, h, declared))
    # unused variables: bound in the query, used nowhere else
    qv: list = []
    _vars(query, qv)
    av: list = []
    _vars(actions, av)
    lets = {c.value[1].value for h, c in _calls(actions) if h == "let" and len(c.value) > 1 and not c.value[1].is_list}
    counts: dict[str, int] = {}
    for v in qv + av:
        counts[v.value] = counts.get(v.value, 0) + 1
    reported = set()
    for v in qv:
        if counts[v.value] == 1 and not v.value.startswith("_") and v.value not in lets and v.value not in reported:
            reported.add(v.value)
            rep.error(f, v.line, v.col, f"pattern variable '{v.value}' of rule '{name}' is bound but never used "
                                        "(unused guard; write _name if intended)")
