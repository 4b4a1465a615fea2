"""Loads the rule files: the schema (rules/leir.egg) and one block per strategy.

A strategy block starts with a metadata header of comment directives and holds the
strategy's rules, up to the next header or the end of the file::

    ;; @strategy loop_split
    ;; @category operator
    ;; @difficulty difficult
    ;; @K 1 @P 3 @S 2
    ;; @inverse loop_fusion
    ;; @exactness bitwise
    ;; @description divides one loop of a nest into two nested loops
    (rule (...) ((Step lhs rhs "loop_split" params)) :ruleset step :name "loop_split")

Required keys: ``strategy category difficulty K P S inverse exactness description``. Optional:

* ``@range WHY``: some rules of the strategy are sound only while the values stay within a
  range that a 16-bit float (f16, bf16) leaves in ordinary use, and those rules are guarded to
  f32 / f64 arithmetic (``WideSite``, ``WideFloat`` or ``PartialsOK`` of rules/leir.egg, the
  ``RANGE_RELATIONS``). WHY says what can overflow or underflow. A rule is range-dependent when
  its result can become inf, NaN or 0 where the original stays finite, because it forms an
  exponential, product or quotient that the original does not and whose magnitude exceeds the
  original's values by a factor that is itself a data value (exp(a) for exp(a-b), b*c for
  a/c + b, V/P for a data pivot P, a running sum of length n), not merely under cancellation
  (a reassociation's hazard, bounded by the tolerance). ``engine.lint`` checks that a block has
  ``@range`` exactly when some rule of it carries the guard.

Rules in a block are written with ``:ruleset step``; the loader moves each block into its
own ruleset ``s_<strategy>`` (same line, so egglog's error spans stay right) and defines
``step`` as the union of all of them, so a query can run any subset for one iteration.
Adding a strategy is adding a block: no Python change.

Value rewrites (the math strategies) are declared as identities instead of rules::

    (identity "powsimp/exp_product" "expand_powsimp/exp_sum" "exp(a)*exp(b)" "exp(a+b)"
              :range "expand_powsimp/exp_sum")

LEFT and RIGHT are LEIR expressions (engine/rewrite/identities.py translates them into terms:
one-letter names are pattern variables, ``:where ((v TERM) ...)`` names a term written in
their place); the constructor terms themselves are accepted too, e.g.
``(Bin "*" (Call "exp" (ECons a (ENil))) (Call "exp" (ECons b (ENil))))``. Inside any rule,
``(leir "TEXT" (NAME TERM) ...)`` is such a term (identities.py).
LEFT = RIGHT holds for real numbers; the first rule rewrites LEFT into RIGHT, the optional
second one (of the inverse strategy) RIGHT into LEFT. Each rule belongs to the block its
name's strategy heads (in the same file). Options: ``:when (GUARD ...)`` extra guards (both
directions), ``:range NAME ...`` the rules that are range-dependent, and, for one-way
identities, ``:let ((VAR TERM) ...)`` terms bound for RIGHT and ``:params P`` (a Params
chain). The loader expands each rule in place (same line) into::

    (rule ((MathSite e s) (= e LEFT) GUARD ... (= s (Eqn lhs r init)))
          (LET ... (Step s (Eqn lhs (RepV r e RIGHT) init) "NAME" (PExpr "expr" e P)))
          :ruleset s_<strategy> :name "NAME")

``(MathSite e s)``: e is a value position of the floating-point equation s whose output may
be rounded differently (rules/leir.egg); a range-dependent rule uses ``(WideSite e s)``, a
MathSite whose arithmetic is f32 / f64. The parameter ``expr`` (the text of e) tells the
rule's matches in one equation apart; P (default ``(PNil)``) follows it. The names ``e s lhs r init`` are the template's:
guards may read ``lhs``, LEFT and RIGHT may not use them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from engine.rewrite.identities import MACRO, expand_macros


def _rules_dir() -> Path:
    """The project's rules: package data of ``engine.rules`` when installed from a wheel, the
    top-level rules/ directory of the source tree otherwise (a checkout, an editable install)."""
    package = Path(__file__).resolve().parent.parent          # engine/
    installed = package / "rules"
    return installed if (installed / "leir.egg").is_file() else package.parent / "rules"


RULES_DIR = _rules_dir()
SCHEMA_FILE = "leir.egg"

# identifier -> (category, paper bucket); strategies.md 1.1 / 1.3 / 1.6
SPEC_STRATEGIES: dict[str, tuple[str, str]] = {
    "operator_fusion": ("graph", "medium"),
    "operator_fission": ("graph", "easy"),
    "compute_inline": ("graph", "medium"),
    "expression_splitting": ("graph", "medium"),
    "tensor_concat_to_fuse_operators": ("graph", "difficult"),
    "tensor_split_to_decouple_operators": ("graph", "difficult"),
    "common_subexpression_elimination": ("graph", "difficult"),
    "expression_reorder": ("graph", "medium"),
    "dead_code_elimination": ("graph", "medium"),  # open decision 2, settled in rules/dce.egg
    "loop_reorder": ("operator", "medium"),
    "loop_tiling": ("operator", "difficult"),
    "loop_split": ("operator", "difficult"),
    "loop_fusion": ("operator", "difficult"),
    "loop_unrolling": ("operator", "medium"),
    "loop_parallelization": ("operator", "medium"),
    "loop_vectorization": ("operator", "medium"),
    "loop_binding": ("operator", "medium"),
    "reduction_factorization": ("operator", "difficult"),
    "cache_read_write": ("memory", "difficult"),
    "layout_transformation": ("memory", "difficult"),
    "set_storage_scope": ("memory", "difficult"),
    "set_storage_layout": ("memory", "difficult"),
    "precompute_indices": ("memory", "difficult"),
    "factorization": ("math", "easy"),
    "expand_factorization": ("math", "easy"),
    "cancellation": ("math", "easy"),
    "expand_cancellation": ("math", "easy"),
    "apart": ("math", "easy"),
    "together": ("math", "easy"),
    "powsimp": ("math", "easy"),
    "expand_powsimp": ("math", "easy"),
    "logsimp": ("math", "easy"),
    "expand_log": ("math", "easy"),
    "collect": ("math", "easy"),
    "expand_collect": ("math", "easy"),
    "partially_equivalent_then_correct": ("math", "difficult"),
    "exponential_split": ("math", "medium"),
    "multiplicative_split": ("math", "medium"),
    "additive_split": ("math", "medium"),
    "normal_loop_max_to_prefix_max": ("math", "difficult"),
    "normal_loop_summation_on_exp_to_prefix_summation_on_exp": ("math", "difficult"),
    "online_softmax": ("math", "difficult"),
    "flashattention_wo_tiling": ("math", "difficult"),
    "normal_matmul_to_prefix_matmul_based_on_online_softmax": ("math", "difficult"),
}
METADATA_KEYS = ("strategy", "category", "difficulty", "K", "P", "S", "inverse", "exactness", "description")
OPTIONAL_KEYS = ("range",)
EXACTNESS = ("bitwise", "reassociating")
# relations whose use in a rule's query makes it range-guarded (f32 / f64 arithmetic only)
RANGE_RELATIONS = ("WideSite", "WideFloat", "PartialsOK")
IDENTITY = "identity"
TEMPLATE_NAMES = ("e", "s", "lhs", "r", "init")      # bound by the identity rule template
IDENTITY_OPTIONS = (":when", ":let", ":params", ":range", ":where")


@dataclass
class Strategy:
    """One strategy block: its metadata and the rules it owns."""

    name: str
    file: str
    line: int
    meta: dict[str, str] = field(default_factory=dict)
    meta_lines: dict[str, int] = field(default_factory=dict)
    rules: list[str] = field(default_factory=list)        # rule :name values, in file order

    @property
    def category(self) -> str:
        return self.meta.get("category", "")

    @property
    def exactness(self) -> str:
        return self.meta.get("exactness", "")

    @property
    def range(self) -> str:
        """Why some rules of the strategy are range-dependent ("" when none is)."""
        return self.meta.get("range", "")

    @property
    def ruleset(self) -> str:
        return "s_" + self.name

    def score(self) -> float:
        """The paper's difficulty score 0.1*K + 0.5*(P-1) + S (dataset.md 2.1)."""
        k, p, s = (int(self.meta[x]) for x in ("K", "P", "S"))
        return 0.1 * k + 0.5 * (p - 1) + s


# ------------------------------------------------------------------ s-expressions


@dataclass
class SExp:
    """A parsed form: list items or an atom, with its 1-based line and column."""

    value: object          # list[SExp] | str (atoms keep their source text; strings quoted)
    line: int
    col: int
    start: int = -1        # offsets of the form in its text (lists only): text[start:end]
    end: int = -1

    @property
    def is_list(self) -> bool:
        return isinstance(self.value, list)

    @property
    def head(self) -> str | None:
        if self.is_list and self.value and not self.value[0].is_list:
            return self.value[0].value
        return None


_TOKEN = re.compile(r'\s+|;[^\n]*|"(?:[^"\\]|\\.)*"|[()]|[^\s()";]+')


class SExpError(Exception):
    def __init__(self, msg, line, col):
        super().__init__(msg)
        self.line, self.col = line, col


def read_sexps(text: str) -> list[SExp]:
    """Top-level forms of an egglog file (comments dropped)."""
    stack: list[SExp] = [SExp([], 0, 0)]
    line, lstart = 1, 0
    for m in _TOKEN.finditer(text):
        tok = m.group()
        col = m.start() - lstart + 1
        if tok[0].isspace() or tok[0] == ";":
            n = tok.count("\n")
            if n:
                line += n
                lstart = m.start() + tok.rfind("\n") + 1
            continue
        if tok == "(":
            node = SExp([], line, col, m.start())
            stack[-1].value.append(node)
            stack.append(node)
        elif tok == ")":
            if len(stack) == 1:
                raise SExpError("unbalanced ')'", line, col)
            stack.pop().end = m.end()
        else:
            stack[-1].value.append(SExp(tok, line, col))
    if len(stack) != 1:
        raise SExpError("unclosed '('", stack[-1].line, stack[-1].col)
    return stack[0].value


def sexp_text(x: SExp) -> str:
    """The form on one line (atoms as written, one space between items)."""
    if not x.is_list:
        return x.value
    return "(" + " ".join(sexp_text(c) for c in x.value) + ")"


def keyword(form: SExp, key: str) -> SExp | None:
    """The value after ``:key`` in a form, if present."""
    items = form.value
    for i, it in enumerate(items[:-1]):
        if not it.is_list and it.value == key:
            return items[i + 1]
    return None


# ------------------------------------------------------------------ blocks


_DIRECTIVE = re.compile(r"@(\w+)\s*((?:(?!\s@\w).)*)")


@dataclass
class Identity:
    """One ``(identity NAME [NAME] LEFT RIGHT options...)`` form of a rule file."""

    names: list[str]                  # the rule rewriting LEFT into RIGHT, then the reverse one if any
    left: SExp
    right: SExp
    when: list[SExp]
    lets: list[SExp]                  # (VAR TERM) pairs
    params: SExp | None
    range: list[str]                  # rule names (of ``names``) that are range-dependent
    form: SExp
    leir: tuple[str, str] | None = None   # LEFT and RIGHT as written, when written in LEIR

    def directions(self) -> list[tuple[str, SExp, SExp]]:
        """(rule name, pattern, replacement) of each rule the identity declares."""
        out = [(self.names[0], self.left, self.right)]
        if len(self.names) > 1:
            out.append((self.names[1], self.right, self.left))
        return out

    def rule_text(self, name: str, pattern: SExp, replacement: SExp) -> str:
        """The egglog rule of one direction, on one line (see the module docstring)."""
        site = "WideSite" if name in self.range else "MathSite"
        guards = "".join(" " + sexp_text(g) for g in self.when)
        lets = "".join(f"(let {sexp_text(v.value[0])} {sexp_text(v.value[1])}) " for v in self.lets)
        params = f'(PExpr "expr" e {sexp_text(self.params) if self.params is not None else "(PNil)"})'
        ruleset = "s_" + name.split("/")[0]
        return (f"(rule (({site} e s) (= e {sexp_text(pattern)}){guards} (= s (Eqn lhs r init))) "
                f"({lets}(Step s (Eqn lhs (RepV r e {sexp_text(replacement)}) init) \"{name}\" {params})) "
                f":ruleset {ruleset} :name \"{name}\")")


def parse_identity(form: SExp) -> tuple[Identity | None, list[tuple[int, int, str]]]:
    """The identity a form declares, or None and the problems (line, col, message)."""
    items = form.value[1:]
    strings: list[SExp] = []
    while items and not items[0].is_list and items[0].value.startswith('"'):
        strings.append(items[0])
        items = items[1:]
    texts = None
    if not (items and items[0].is_list) and len(strings) >= 3:      # LEFT and RIGHT written in LEIR
        texts, strings = strings[-2:], strings[:-2]
    names = [x.value.strip('"') for x in strings]
    where = (form.line, form.col)
    if not 1 <= len(names) <= 2:
        return None, [(*where, "an identity names one rule (LEFT to RIGHT) or two (and RIGHT to LEFT)")]
    if texts is None and (len(items) < 2 or not items[0].is_list or not items[1].is_list):
        return None, [(*where, f"identity '{names[0]}' needs two terms, LEFT and RIGHT, after its rule names: "
                               "two LEIR strings or two constructor terms")]
    left, right, rest = (None, None, items) if texts else (items[0], items[1], items[2:])
    opts: dict[str, list[SExp]] = {}
    problems = []
    i = 0
    while i < len(rest):
        k = rest[i]
        if k.is_list or k.value not in IDENTITY_OPTIONS:
            problems.append((k.line, k.col, f"identity '{names[0]}': expected one of {', '.join(IDENTITY_OPTIONS)}"))
            break
        vals = []
        i += 1
        while i < len(rest) and (rest[i].is_list or not rest[i].value.startswith(":")):
            vals.append(rest[i])
            i += 1
        if k.value in opts:
            problems.append((k.line, k.col, f"identity '{names[0]}': {k.value} given twice"))
        opts[k.value] = vals
    when = [g for v in opts.get(":when", []) for g in (v.value if v.is_list else [v])]
    lets = [lt for v in opts.get(":let", []) for lt in (v.value if v.is_list else [v])]
    params = opts.get(":params", [None])
    rng = [v.value.strip('"') for v in opts.get(":range", []) if not v.is_list]
    for g in when:
        if not g.is_list:
            problems.append((g.line, g.col, f"identity '{names[0]}': :when takes a list of guards, (GUARD ...)"))
    for lt in lets:
        if not lt.is_list or len(lt.value) != 2 or lt.value[0].is_list:
            problems.append((lt.line, lt.col, f"identity '{names[0]}': :let takes (VAR TERM) pairs"))
    if len(params) != 1 or (params[0] is not None and not params[0].is_list):
        problems.append((form.line, form.col, f"identity '{names[0]}': :params takes one Params term"))
    if len(names) == 2 and (lets or params[0] is not None):
        problems.append((form.line, form.col, f"identity '{names[0]}': :let and :params need a one-way identity "
                                              "(the reverse rule could not bind them)"))
    for n in opts.get(":range", []):
        if n.is_list or n.value.strip('"') not in names:
            problems.append((n.line, n.col, f"identity '{names[0]}': :range names a rule of this identity"))
    if texts and not problems:
        declared = {lt.value[0].value for lt in lets}
        left, right = _leir_sides(names[0], texts, opts.get(":where", []), declared, problems)
    if problems:
        return None, problems
    return Identity(names, left, right, when, lets, params[0], rng, form,
                    tuple(t.value[1:-1] for t in texts) if texts else None), []


def _leir_sides(name: str, texts: list[SExp], where: list[SExp], declared: set[str], problems: list):
    """LEFT and RIGHT of an identity written in LEIR, as terms (at the strings' positions)."""
    from engine.rewrite.identities import ExprError, leir_term
    binds: dict[str, str] = {}
    for b in [x for v in where for x in (v.value if v.is_list else [v])]:
        if not b.is_list or len(b.value) != 2 or b.value[0].is_list:
            problems.append((b.line, b.col, f"identity '{name}': :where takes (NAME TERM) pairs"))
            return None, None
        binds[b.value[0].value] = sexp_text(b.value[1])
    sides = []
    for t in texts:
        try:
            term, _ = leir_term(t.value[1:-1], t.line, t.col, binds, TEMPLATE_NAMES, declared)
        except ExprError as e:
            problems.append((e.line, e.col, f"identity '{name}': {e}"))
            return None, None
        sides.append(_placed(read_sexps(term)[0], t.line, t.col))
    return sides


def _placed(x: SExp, line: int, col: int) -> SExp:
    """x with every node at (line, col): a translated term is located at its string."""
    x.line, x.col = line, col
    if x.is_list:
        for c in x.value:
            _placed(c, line, col)
    return x


def expand_identities(text: str, identities: list[Identity]) -> str:
    """``text`` with each identity form replaced by its rules, on the form's first line (the
    newlines of the form are kept, so every later line keeps its number)."""
    out, pos = [], 0
    for ident in sorted(identities, key=lambda i: i.form.start):
        f = ident.form
        rules = " ".join(ident.rule_text(*d) for d in ident.directions())
        out.append(text[pos:f.start])
        out.append(rules + "\n" * text.count("\n", f.start, f.end))
        pos = f.end
    out.append(text[pos:])
    return "".join(out)


def parse_blocks(text: str, filename: str):
    """(strategies, forms outside any block, problems as (line, message[, col]), identities) of
    one rule file."""
    starts: list[Strategy] = []
    problems: list[tuple[int, str]] = []
    current: Strategy | None = None
    for no, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if not s.startswith(";;") or "@" not in s:
            continue
        body = s.lstrip(";").strip()
        if not body.startswith("@"):
            continue
        for m in _DIRECTIVE.finditer(body):
            key, value = m.group(1), m.group(2).strip()
            if key == "strategy":
                current = Strategy(value, filename, no)
                starts.append(current)
                current.meta["strategy"] = value
                current.meta_lines["strategy"] = no
            elif current is None:
                problems.append((no, f"directive @{key} outside a strategy block"))
            elif key in current.meta:
                problems.append((no, f"duplicate @{key} in block '{current.name}'"))
            else:
                current.meta[key] = value
                current.meta_lines[key] = no
    forms = read_sexps(text)
    outside: list[SExp] = []
    identities: list[Identity] = []
    by_name = {st.name: st for st in starts}
    for f in forms:
        if f.head == IDENTITY:
            ident, probs = parse_identity(f)
            problems.extend((line, msg, col) for line, col, msg in probs)
            if ident is None:
                continue
            for name in ident.names:
                st = by_name.get(name.split("/")[0])
                if st is None or "/" not in name:
                    problems.append((f.line, f"identity rule '{name}' must be named '<strategy>/<variant>' after a "
                                             "strategy block of this file", f.col))
                else:
                    st.rules.append(name)
            identities.append(ident)
            continue
        owner = None
        for st in starts:
            if st.line < f.line:
                owner = st
        if owner is None:
            outside.append(f)
            continue
        if f.head in ("rule", "rewrite", "birewrite"):
            name = keyword(f, ":name")
            owner.rules.append(name.value.strip('"') if name is not None else "")
    return starts, outside, problems, identities


def rewrite_rulesets(text: str, blocks: list[Strategy]) -> str:
    """Move each block's ``:ruleset step`` into the block's own ruleset (line-preserving)."""
    lines = text.split("\n")
    bounds = [b.line for b in blocks] + [len(lines) + 1]
    for b, end in zip(blocks, bounds[1:]):
        for i in range(b.line - 1, end - 1):
            lines[i] = re.sub(r":ruleset\s+step\b", ":ruleset " + b.ruleset, lines[i])
    return "\n".join(lines)


class Problem(tuple):
    """(file, line, message) of a rule file's problem, with its column as ``col`` (1 when only
    the line is known): code that unpacks three fields keeps working."""

    def __new__(cls, file: str, line: int, msg: str, col: int = 1):
        p = super().__new__(cls, (file, line, msg))
        p.col = col
        return p


@dataclass
class Rulebook:
    """The schema and every strategy block of a rules directory."""

    files: list[Path]
    texts: dict[str, str]               # file -> its text as written
    strategies: list[Strategy]
    problems: list[tuple[str, int, str]]
    identities: dict[str, list[Identity]] = field(default_factory=dict)   # file -> its identity forms
    expanded: dict[str, str] = field(default_factory=dict)   # file -> text with identities expanded into rules

    def text(self, f) -> str:
        """The egglog text of a file: identity forms expanded into their rules."""
        return self.expanded.get(str(f), self.texts[str(f)])

    def identity_rules(self) -> dict[str, Identity]:
        """rule name -> the identity that declares it."""
        return {n: i for ids in self.identities.values() for i in ids for n in i.names}

    def by_name(self) -> dict[str, Strategy]:
        return {s.name: s for s in self.strategies}

    def rule_owner(self) -> dict[str, Strategy]:
        return {r: s for s in self.strategies for r in s.rules}

    def programs(self, without_ruleset=None) -> list[tuple[str, str]]:
        """(filename, egglog text) chunks to run in order on a fresh e-graph.

        ``without_ruleset`` (a name or a collection of names): the rules of those rulesets are
        blanked out (engine.enumerate evaluates the ``compute`` helpers in Python and may load
        only some strategies; fewer rules make every push/pop of a query cheaper). The
        rulesets themselves stay declared.
        """
        drop = {without_ruleset} if isinstance(without_ruleset, str) else set(without_ruleset or ())
        schema = self.texts[str(self.files[0])]
        if drop:
            schema = blank_ruleset(schema, drop)
        out = [(str(self.files[0]), schema)]
        decl = "".join(f"(ruleset {s.ruleset})\n" for s in self.strategies)
        out.append(("<rulesets>", decl))
        for f in self.files[1:]:
            blocks = [s for s in self.strategies if s.file == str(f)]
            text = rewrite_rulesets(self.text(f), blocks)
            if drop & {b.ruleset for b in blocks}:
                text = blank_ruleset(text, drop)
            out.append((str(f), text))
        if self.strategies:
            combined = "(unstable-combined-ruleset step " + " ".join(s.ruleset for s in self.strategies) + ")\n"
        else:
            combined = "(ruleset step)\n"
        out.append(("<rulesets>", combined))
        return out


def blank_ruleset(text: str, ruleset) -> str:
    """``text`` with every top-level rule / rewrite of ``ruleset`` (a name or a collection of
    names) replaced by spaces (newlines kept, so egglog's error spans for the rest stay right)."""
    names = [ruleset] if isinstance(ruleset, str) else sorted(ruleset)
    out = list(text)
    depth, start = 0, 0
    tag = re.compile(r":ruleset\s+(?:" + "|".join(re.escape(n) for n in names) + r")(?![\w-])")
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok == "(":
            if depth == 0:
                start = m.start()
            depth += 1
        elif tok == ")" and depth:
            depth -= 1
            if depth == 0:
                form = text[start:m.end()]
                if re.match(r"\((rule|rewrite|birewrite)\s", form) and tag.search(form):
                    for i in range(start, m.end()):
                        if out[i] != "\n":
                            out[i] = " "
    return "".join(out)


def rule_files(path: str | Path | None = None) -> list[Path]:
    """leir.egg first, then the other .egg files of the directory in name order."""
    d = Path(path) if path is not None else RULES_DIR
    if d.is_file():
        d = d.parent
    schema = d / SCHEMA_FILE
    if not schema.is_file():
        from engine.leir.diagnostics import LeirError
        hint = " (the installation lacks its rule files: reinstall it, or pass --rules DIR)" if path is None else ""
        raise LeirError(f"no rule schema {SCHEMA_FILE} in {d}{hint}", file=str(d))
    others = sorted(p for p in d.glob("*.egg") if p.name != SCHEMA_FILE)
    return [schema] + others


def load_rulebook(path: str | Path | None = None) -> Rulebook:
    files = rule_files(path)
    texts: dict[str, str] = {}
    strategies: list[Strategy] = []
    problems: list[tuple[str, int, str]] = []
    identities: dict[str, list[Identity]] = {}
    expanded: dict[str, str] = {}
    for f in files:
        text = f.read_text()
        texts[str(f)] = text
        try:
            source = text
            if "(" + MACRO in text and f.name != SCHEMA_FILE:
                source, probs = expand_macros(text, read_sexps(text))
                problems.extend(Problem(str(f), line, msg, col) for line, col, msg in probs)
            blocks, _, probs, idents = parse_blocks(source, str(f))
        except SExpError as e:
            problems.append(Problem(str(f), e.line, str(e), e.col))
            continue
        if f.name == SCHEMA_FILE and (blocks or idents):
            line = blocks[0].line if blocks else idents[0].form.line
            problems.append(Problem(str(f), line, "strategy blocks and identities belong in the strategy files, not the schema"))
            continue
        strategies.extend(blocks)
        problems.extend(Problem(str(f), *p) for p in probs)
        if idents:
            identities[str(f)] = idents
        if idents or source is not text:
            expanded[str(f)] = expand_identities(source, idents)
    return Rulebook(files, texts, strategies, problems, identities, expanded)
