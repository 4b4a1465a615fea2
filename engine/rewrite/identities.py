"""Identities: value rewrites (the math strategies) declared as ``(identity ...)`` forms and
expanded into egglog rules, in place, by the rule loader.

Value rewrites (the math strategies) are declared as identities instead of rules::

    (identity "powsimp/exp_product" "expand_powsimp/exp_sum"
              (Bin "*" (Call "exp" (ECons a (ENil))) (Call "exp" (ECons b (ENil))))
              (Call "exp" (ECons (Bin "+" a b) (ENil)))
              :range "expand_powsimp/exp_sum")

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

from dataclasses import dataclass

from engine.rewrite.sexp import SExp, sexp_text

IDENTITY = "identity"
TEMPLATE_NAMES = ("e", "s", "lhs", "r", "init")      # bound by the identity rule template
IDENTITY_OPTIONS = (":when", ":let", ":params", ":range")


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
    names: list[str] = []
    while items and not items[0].is_list and items[0].value.startswith('"'):
        names.append(items[0].value.strip('"'))
        items = items[1:]
    where = (form.line, form.col)
    if not 1 <= len(names) <= 2:
        return None, [(*where, "an identity names one rule (LEFT to RIGHT) or two (and RIGHT to LEFT)")]
    if len(items) < 2 or not items[0].is_list or not items[1].is_list:
        return None, [(*where, f"identity '{names[0]}' needs two terms, LEFT and RIGHT, after its rule names")]
    left, right, rest = items[0], items[1], items[2:]
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
    if problems:
        return None, problems
    return Identity(names, left, right, when, lets, params[0], rng, form), []


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
