"""Identities: value rewrites (the math strategies) declared as ``(identity ...)`` forms and
expanded into egglog rules, in place, by the rule loader.

Value rewrites (the math strategies) are declared as identities instead of rules::

    (identity "powsimp/exp_product" "expand_powsimp/exp_sum" "exp(a)*exp(b)" "exp(a+b)"
              :range "expand_powsimp/exp_sum")

LEFT and RIGHT are LEIR expressions (engine/rewrite/leirterms.py translates them into terms:
one-letter names are pattern variables, ``:where ((v TERM) ...)`` names a term written in
their place); the constructor terms themselves are accepted too, e.g.
``(Bin "*" (Call "exp" (ECons a (ENil))) (Call "exp" (ECons b (ENil))))``.

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
be rounded differently (rules/leir/values.egg); a range-dependent rule uses ``(WideSite e s)``, a
MathSite whose arithmetic is f32 / f64. The parameter ``expr`` (the text of e) tells the
rule's matches in one equation apart; P (default ``(PNil)``) follows it. The names ``e s lhs r init`` are the template's:
guards may read ``lhs``, LEFT and RIGHT may not use them.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.rewrite.sexp import SExp, edit_text, in_place, read_sexps, sexp_text

IDENTITY = "identity"
TEMPLATE_NAMES = ("e", "s", "lhs", "r", "init")      # bound by the identity rule template
IDENTITY_OPTIONS = (":when", ":let", ":params", ":range", ":where")


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
    from engine.rewrite.leirterms import ExprError, leir_term
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
    return edit_text(text, [in_place(text, i.form, " ".join(i.rule_text(*d) for d in i.directions()))
                            for i in identities])
