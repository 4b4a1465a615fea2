"""Loads the rule files: the schema (the folder rules/leir/) and one block per strategy.

A strategy block starts with a metadata header of comment directives and holds the
strategy's rules, up to the next header or the end of the file::

    ;; @strategy loop_split
    ;; @category operator
    ;; @difficulty difficult
    ;; @K 1 @P 3 @S 2
    ;; @inverse loop_fusion
    ;; @exactness bitwise
    ;; @benefit parallelism, vector_width
    ;; @origin paper
    ;; @description divides one loop of a nest into two nested loops
    (rule (...) ((Step lhs rhs "loop_split" params)) :ruleset step :name "loop_split")

The header's directives (engine.rewrite.meta: required ``strategy category difficulty K P S
inverse exactness description``, optional ``range benefit origin cot``) are read into a typed
``StrategyMeta``. ``@cot [RULE:] TEMPLATE`` (repeatable) is the instance part of the strategy's
chain-of-thought traces, with slots for the step's facts and the rule's parameters
(engine.rewrite.cot_template); examples (``@example`` / ``@after``, at least one per block)
are read into ``Strategy.examples`` by examples.py. A bad value is a located problem of the
rulebook, and an engine refuses to load it.

``@range WHY``: some rules of the strategy are sound only while the values stay within a range that a 16-bit float (f16, bf16) leaves in ordinary use, and those rules are
guarded to f32 / f64 arithmetic (``WideSite``, ``WideFloat`` or ``PartialsOK`` of
rules/leir/values.egg, the ``RANGE_RELATIONS``). WHY says what can overflow or underflow. A rule is
range-dependent when its result can become inf, NaN or 0 where the original stays finite,
because it forms an exponential, product or quotient that the original does not and whose
magnitude exceeds the original's values by a factor that is itself a data value (exp(a) for
exp(a-b), b*c for a/c + b, V/P for a data pivot P, a running sum of length n), not merely
under cancellation (a reassociation's hazard, bounded by the tolerance). ``engine.lint``
checks that a block has ``@range`` exactly when some rule of it carries the guard.

Rules in a block are written with ``:ruleset step``; the loader moves each block into its
own ruleset ``s_<strategy>`` (same line, so egglog's error spans stay right) and defines
``step`` as the union of all of them, so a query can run any subset for one iteration.
Value rewrites are declared as identities (engine.rewrite.identities), expanded into rules
in place; their LEFT and RIGHT are LEIR expressions, and inside any rule ``(leir "TEXT" (NAME
TERM) ...)`` is such a term (engine.rewrite.leirterms translates both into the schema's
terms). Adding a strategy is adding a block: no Python change. Which files are loaded:
engine.rewrite.rule_sources.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from engine.rewrite.examples import KEYS as EXAMPLE_KEYS, read_examples
# names of the modules this one was split into, re-exported for the code that imports them from here
from engine.rewrite.identities import (IDENTITY, IDENTITY_OPTIONS, TEMPLATE_NAMES, Identity,  # noqa: F401
                                       expand_identities, parse_identity)
from engine.rewrite.meta import (EXACTNESS, OPTIONAL, REQUIRED, StrategyMeta, read_meta,  # noqa: F401
                                 scan_headers)
from engine.rewrite.sexp import SExp, SExpError, edit_text, keyword, read_sexps, sexp_text  # noqa: F401
from engine.rewrite.rule_sources import RULES_DIR, RuleSources, manifest  # noqa: F401
from engine.rewrite.cot_template import check_templates, parse_template
from engine.rewrite.leirterms import MACRO, expand_macros

METADATA_KEYS = REQUIRED
OPTIONAL_KEYS = OPTIONAL
# relations whose use in a rule's query makes it range-guarded (f32 / f64 arithmetic only)
RANGE_RELATIONS = ("WideSite", "WideFloat", "PartialsOK")


class Problem(tuple):
    """A problem of the rule files: unpacks as (file, line, message); ``col`` is its column."""

    def __new__(cls, file: str, line: int, msg: str, col: int = 1):
        p = super().__new__(cls, (file, line, msg))
        p.col = col
        return p


@dataclass
class Strategy:
    """One strategy block: its metadata and the rules it owns."""

    name: str
    file: str
    line: int
    meta: dict[str, str] = field(default_factory=dict)           # each directive's text as written
    meta_lines: dict[str, int] = field(default_factory=dict)
    rules: list[str] = field(default_factory=list)        # rule :name values, in file order
    metadata: StrategyMeta | None = None                  # the typed header (None: it has problems)
    examples: list = field(default_factory=list)          # examples.Example cases, in file order
    cot: list = field(default_factory=list)               # CotTemplate of each @cot line, in file order

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
    def origin(self) -> str:
        return self.metadata.origin if self.metadata else self.meta.get("origin", "user")

    @property
    def benefit(self) -> tuple[str, ...]:
        return self.metadata.benefit if self.metadata else ()

    @property
    def ruleset(self) -> str:
        return "s_" + self.name

    def score(self) -> float:
        """The paper's difficulty score 0.1*K + 0.5*(P-1) + S (dataset.md 2.1)."""
        k, p, s = (int(self.meta[x]) for x in ("K", "P", "S"))
        return 0.1 * k + 0.5 * (p - 1) + s


def block_at(blocks, line: int):
    """The block that a form starting on ``line`` belongs to: the last one whose header is
    above it (None: before the first)."""
    owner = None
    for b in blocks:
        if b.line < line and (owner is None or b.line > owner.line):
            owner = b
    return owner


def parse_blocks(text: str, filename: str, forms: list[SExp] | None = None):
    """(strategies, forms outside any block, problems as (line, col, message), identities) of
    one rule file (``forms``: ``read_sexps(text)``, when the caller has them)."""
    headers, problems = scan_headers(text, filename, foreign=EXAMPLE_KEYS)
    starts: list[Strategy] = []
    for h in headers:
        st = Strategy(h.name, filename, h.line)
        st.meta = {k: v[0][0] for k, v in h.entries.items() if k != "cot"}
        st.meta_lines = {k: v[0][1] for k, v in h.entries.items()}
        st.metadata, probs = read_meta(h)
        problems.extend(probs)
        for value, line, col in h.entries.get("cot", ()):
            template, why = parse_template(value, line, st.name)
            if template is None:
                problems.append((line, col, why))
            else:
                st.cot.append(template)
        starts.append(st)
    forms = read_sexps(text) if forms is None else forms
    outside: list[SExp] = []
    identities: list[Identity] = []
    by_name = {st.name: st for st in starts}
    for f in forms:
        if f.head == IDENTITY:
            ident, probs = parse_identity(f)
            problems.extend(probs)
            if ident is None:
                continue
            for name in ident.names:
                st = by_name.get(name.split("/")[0])
                if st is None or "/" not in name:
                    problems.append((f.line, f.col, f"identity rule '{name}' must be named '<strategy>/<variant>' after a "
                                             "strategy block of this file"))
                else:
                    st.rules.append(name)
            identities.append(ident)
            continue
        owner = block_at(starts, f.line)
        if owner is None:
            outside.append(f)
            continue
        if f.head in ("rule", "rewrite", "birewrite"):
            name = keyword(f, ":name")
            owner.rules.append(name.value.strip('"') if name is not None and not name.is_list else "")
    problems.extend(read_examples(text, filename, starts))
    return starts, outside, problems, identities


RULE_HEADS = ("rule", "rewrite", "birewrite")


def ruleset_edits(text: str, forms: list[SExp], blocks: list[Strategy] = (), drop=()) -> list:
    """The edits (``sexp.edit_text``) that move each block's ``:ruleset step`` forms into the
    block's own ruleset (``:ruleset s_<strategy>``, on the same line) and blank out the rules
    of the rulesets in ``drop`` (their lines and columns kept, so egglog's error spans for the
    rest stay right)."""
    edits = []
    for f in forms:
        ruleset = keyword(f, ":ruleset") if f.is_list else None
        if ruleset is None:
            continue
        name = ruleset.value
        if name == "step":
            owner = block_at(blocks, ruleset.line)
            if owner is not None:
                name = owner.ruleset
        renamed = []
        if name != ruleset.value:
            tag = f.value[f.value.index(ruleset) - 1]           # the :ruleset atom
            renamed = [(tag.start - f.start, ruleset.end - f.start, ":ruleset " + name)]
        if f.head in RULE_HEADS and name in drop:                # the renamed form's characters, blank
            edits.append((f.start, f.end, re.sub(r"[^\n]", " ", edit_text(text[f.start:f.end], renamed))))
        elif renamed:
            edits.append((tag.start, ruleset.end, renamed[0][2]))
    return edits


@dataclass
class Rulebook:
    """The schema and every strategy block of a rules directory."""

    files: list[Path]
    texts: dict[str, str]               # file -> its text as written
    strategies: list[Strategy]
    problems: list[Problem]             # (file, line, message), .col
    identities: dict[str, list[Identity]] = field(default_factory=dict)   # file -> its identity forms
    expanded: dict[str, str] = field(default_factory=dict)   # file -> text with identities expanded into rules
    sources: RuleSources = field(default_factory=RuleSources)
    schema_count: int = 1               # files[:schema_count] are the schema's, in load order
    _forms: dict[str, list[SExp]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def schema_files(self) -> list[Path]:
        return self.files[:self.schema_count]

    @property
    def strategy_files(self) -> list[Path]:
        return self.files[self.schema_count:]

    @property
    def schema_place(self) -> Path:
        """Where the schema is, for a message: its folder (rules/leir/), or its one file."""
        return self.files[0].parent if self.schema_count > 1 else self.files[0]

    def schema_forms(self) -> list[SExp]:
        """The top-level forms of every schema file, in load order."""
        return [f for s in self.schema_files for f in self.forms(s)]

    def manifest(self) -> list[dict]:
        """The rule files as a result records them: name and sha256 of each (rule_sources.manifest)."""
        return manifest(self.files, self.texts)

    def text(self, f) -> str:
        """The egglog text of a file: identity forms expanded into their rules."""
        return self.expanded.get(str(f), self.texts[str(f)])

    def forms(self, f) -> list[SExp]:
        """The top-level forms of ``text(f)`` (read once)."""
        key = str(f)
        if key not in self._forms:
            self._forms[key] = read_sexps(self.text(f))
        return self._forms[key]

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
        blanked out (the Enumerator evaluates the ``compute`` helpers in Python and may load
        only some strategies; fewer rules make every push/pop of a query cheaper). The
        rulesets themselves stay declared.
        """
        drop = {without_ruleset} if isinstance(without_ruleset, str) else set(without_ruleset or ())
        out = []
        for f in self.schema_files:
            schema = self.texts[str(f)]
            out.append((str(f), edit_text(schema, ruleset_edits(schema, self.forms(f), (), drop))))
        decl = "".join(f"(ruleset {s.ruleset})\n" for s in self.strategies)
        out.append(("<rulesets>", decl))
        for f in self.strategy_files:
            blocks = [s for s in self.strategies if s.file == str(f)]
            text = self.text(f)
            out.append((str(f), edit_text(text, ruleset_edits(text, self.forms(f), blocks, drop))))
        if self.strategies:
            combined = "(unstable-combined-ruleset step " + " ".join(s.ruleset for s in self.strategies) + ")\n"
        else:
            combined = "(ruleset step)\n"
        out.append(("<rulesets>", combined))
        return out


def rule_files(path=None) -> list[Path]:
    """The files ``path`` (None, a folder, a list of folders or a RuleSources) loads: the
    schema first, then the strategy files (engine.rewrite.rule_sources)."""
    return RuleSources.of(path).files()


def load_rulebook(path=None) -> Rulebook:
    """The rulebook of the built-in rules (None), a rules folder, a list of folders (added to
    the built-in rules) or a ``RuleSources``."""
    sources = RuleSources.of(path)
    schema, strategy_files = sources.split_files()
    files = schema + strategy_files
    texts: dict[str, str] = {}
    strategies: list[Strategy] = []
    problems: list[Problem] = []
    identities: dict[str, list[Identity]] = {}
    expanded: dict[str, str] = {}
    parsed: dict[str, list[SExp]] = {}
    seen: dict[str, Strategy] = {}
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            why = "not UTF-8 text" if isinstance(e, UnicodeDecodeError) else (e.strerror or str(e))
            problems.append(Problem(str(f), 1, f"cannot read this rule file: {why}"))
            texts[str(f)] = ""
            continue
        texts[str(f)] = text
        try:
            source = text
            if "(" + MACRO in text and f not in schema:
                source, probs = expand_macros(text, read_sexps(text))
                problems.extend(Problem(str(f), line, msg, col) for line, col, msg in probs)
            forms = read_sexps(source)
            blocks, _, probs, idents = parse_blocks(source, str(f), forms)
        except SExpError as e:
            problems.append(Problem(str(f), e.line, str(e), e.col))
            continue
        if f in schema and (blocks or idents):
            line = blocks[0].line if blocks else idents[0].form.line
            problems.append(Problem(str(f), line, "strategy blocks and identities belong in the strategy files, "
                                    "not the schema"))
            continue
        for b in blocks:
            if b.name in seen:
                first = seen[b.name]
                problems.append(Problem(str(f), b.line, f"strategy '{b.name}' already has a block at "
                                                     f"{first.file}:{first.line}", b.metadata.at("strategy")[1]
                                        if b.metadata else 1))
            seen.setdefault(b.name, b)
        strategies.extend(blocks)
        problems.extend(Problem(str(f), line, msg, col) for line, col, msg in probs)
        if idents:
            identities[str(f)] = idents
        if idents or source is not text:
            expanded[str(f)] = expand_identities(source, idents)
        else:
            parsed[str(f)] = forms
    book = Rulebook(files, texts, strategies, problems, identities, expanded, sources, len(schema), parsed)
    forms_of: dict[str, list[SExp]] = {}
    for f in files:
        try:
            forms_of[str(f)] = book.forms(f)
        except SExpError:                   # reported above
            pass
    problems.extend(Problem(f, line, msg) for f, line, msg in check_templates(strategies, forms_of))
    return book
