"""The ``@cot`` lines of a strategy block: templates of the instance part of its chain-of-thought.

A trace is the block's ``@description`` sentence, then `` Under the given IR, `` and one
template of the block with its slots filled (dataset.md, "The chain-of-thought")::

    ;; @cot the loops {loops} of {stmt} can be split as loops {loops_after} in {stmt_after}: {loop_from} becomes {loop_to}, a split by a factor of {param.factor:int}.
    ;; @cot cache_read_write/write: the variable {param.tensor} in {removed} can be written from ...

Slots:

* ``{FACT}``: a fact of the step that ``dataset.text.cot`` computes for any step, from the two
  programs and the site (``FACTS`` below: statements, loops, tensors, extents), written in the
  fact's own format;
* ``{param.KEY}``: the rule's own parameter KEY (``Step.params``), written as `` `text` ``;
  ``{param.KEY:FORMAT}`` writes it in another format (``PARAM_FORMATS``: ``int`` 2, ``word``
  as is, ``scope`` l -> local, ``thread`` bx -> blockIdx.x, ``kind`` U -> unrolled).

A template holds no other braces. A line that starts with ``RULE:`` (RULE the strategy's name
or ``strategy/variant``, a rule of the block) applies to that rule only. For a step, its rule's
own templates are tried first, then the block's other ones, in file order, then ``GENERIC``; the
first whose slots all hold for the step is used (a fact that does not hold, or a parameter the
rule does not write, skips the template). ``dataset.check.claims`` parses a trace back with the same
templates and checks every slot by its name.

Unknown facts, formats, rules and parameters are errors when the rule book loads (``engine.lint``
reports them at the ``@cot`` line), not when a trace is rendered.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from engine.rewrite.sexp import keyword, walk

# fact -> (format, what it is); dataset.text.cot computes each, dataset.check.claims re-derives each
FACTS: dict[str, tuple[str, str]] = {
    # statements (top level, in program order)
    "removed": ("texts", "the statements the step removes"),
    "added": ("texts", "the statements the step adds"),
    "removed_only": ("texts", "the statements removed, when the step adds none"),
    "added_only": ("texts", "the statements added, when the step removes none"),
    "stmt": ("text", "the statement at the site, before the step"),
    "stmt_after": ("text", "the statement at the site, after the step"),
    "n_equations": ("int", "the number of equations (at least 2) of the one statement removed"),
    "shared_loops": ("text", "the loop prefix that every removed statement (at least 2) has"),
    "equation": ("text", "the equation at the site"),
    "equation_after": ("text", "the equation at the site after the step (when it changed)"),
    # loops of the nest at the site
    "loops": ("text", "the loops of the nest at the site, before"),
    "loops_after": ("text", "the loops of the nest at the site, after"),
    "loop_from": ("loops", "the loops that the step replaces (same iteration count as loop_to)"),
    "loop_to": ("loops", "the loops that replace them"),
    "swapped": ("texts", "the two loops that exchange their positions"),
    "loop_kind": ("kind", "what the one loop that changes kind (same extent) becomes: unrolled, ..."),
    "bound_var": ("text", "the new variable of the one loop bound to a thread or block axis"),
    "split_axis": ("text", "the loop whose iterations the computations added divide among themselves"),
    "split_extent": ("int", "its extent"),
    "split_parts": ("ints", "the iterations each computation added takes"),
    # tensors
    "new_tensors": ("texts", "the tensors the step introduces"),
    "new_tensor": ("text", "the one tensor the step introduces"),
    "gone_tensor": ("text", "the one tensor the step removes"),
    "retyped": ("text", "the one intermediate whose memory scope changes, as every occurrence now reads"),
    "ref_before": ("text", "the first reference of the one intermediate whose references change"),
    "ref_after": ("text", "that reference after the step (every reference changed the same way)"),
    "dead": ("texts", "the tensors the removed statements write, read by no later statement, no output"),
    # the statements added, by what they write
    "copies": ("texts", "added statements that copy a tensor into a new tensor"),
    "computes": ("texts", "added statements (not copies) that write a new tensor"),
    "assembles": ("texts", "added statements that write no new tensor"),
    "rest": ("texts", "added statements that are not in computes"),
    "uses": ("texts", "added statements that are not copies"),
    "common": ("text", "the value of the one computation added, found in every statement removed"),
    "index": ("text", "the same, when it writes the one new tensor (a table)"),
    "read_copy": ("text", "the one added equation reading an existing tensor into the new one"),
    "write_copy": ("text", "the one added equation writing an existing tensor from the new one"),
    "first": ("text", "of two neighbouring statements that exchange places, the first one before"),
    "second": ("text", "the other one"),
    # the step
    "name": ("phrase", "the strategy's name with spaces"),
}
FORMAT_NAMES = ("text", "texts", "int", "ints", "loops", "word", "phrase", "scope", "thread", "kind")
PARAM_FORMATS = ("text", "int", "word", "scope", "thread", "kind")      # a parameter is one value
PARAM_PREFIX = "param."

_SLOT = re.compile(r"\{([^{}]*)\}")
_PARAM_HEAD = re.compile(r"P[A-Za-z]*")             # a parameter term: (P… "KEY" value)
_STRING = re.compile(r'"[^"]+"')


@dataclass(frozen=True)
class Slot:
    name: str            # a fact, or the parameter's key
    param: bool
    format: str

    @property
    def source(self) -> str:
        """The slot as written in the template."""
        if not self.param:
            return "{" + self.name + "}"
        return "{" + PARAM_PREFIX + self.name + ("" if self.format == "text" else ":" + self.format) + "}"


@dataclass(frozen=True)
class CotTemplate:
    """One ``@cot`` line: its text (slots as written), the rule it is for (None: every rule of
    the block) and its line in the rule file (0 for the generic ones)."""

    text: str
    rule: str | None
    line: int
    slots: tuple[Slot, ...]

    def pieces(self):
        """Alternating literal text and slots: str, Slot, str, ..., str."""
        out, pos = [], 0
        for m, slot in zip(_SLOT.finditer(self.text), self.slots):
            out += [self.text[pos:m.start()], slot]
            pos = m.end()
        return out + [self.text[pos:]]


def _slot(body: str) -> tuple[Slot | None, str]:
    if body.startswith(PARAM_PREFIX):
        key, _, fmt = body[len(PARAM_PREFIX):].partition(":")
        if not re.fullmatch(r"[A-Za-z_][\w-]*", key):
            return None, f"{{{body}}}: a parameter slot is {{param.KEY}} or {{param.KEY:FORMAT}}"
        fmt = fmt or "text"
        if fmt not in PARAM_FORMATS:
            return None, f"{{{body}}}: unknown format '{fmt}' (formats of a parameter: {', '.join(PARAM_FORMATS)})"
        return Slot(key, True, fmt), ""
    if body in FACTS:
        return Slot(body, False, FACTS[body][0]), ""
    close = difflib.get_close_matches(body, list(FACTS), n=1)
    hint = f"; did you mean {{{close[0]}}}?" if close else ""
    return None, (f"unknown slot {{{body}}} (a fact of docs/dataset.md's table, or {{param.KEY}} for a rule "
                  f"parameter){hint}")


def parse_template(value: str, line: int, strategy: str | None = None) -> tuple[CotTemplate | None, str]:
    """The template one ``@cot`` line declares, or None and why not."""
    rule = None
    if strategy is not None:
        m = re.match(re.escape(strategy) + r"(?:/[\w.-]+)?(?=:\s)", value)
        if m:
            rule, value = m.group(), value[m.end() + 1:].strip()
    if not value:
        return None, "@cot needs a template"
    if _SLOT.sub("", value).count("{") or _SLOT.sub("", value).count("}"):
        return None, f"@cot: unbalanced brace in '{value}' (a template holds no braces but its slots)"
    slots = []
    for m in _SLOT.finditer(value):
        slot, why = _slot(m.group(1).strip())
        if slot is None:
            return None, f"@cot: {why}"
        slots.append(slot)
    return CotTemplate(value, rule, line, tuple(slots)), ""


GENERIC = tuple(parse_template(t, 0)[0] for t in (
    "{removed} can be rewritten as {added}.", "{removed_only} can be removed.", "{added_only} can be added."))


def applicable(templates, rule: str) -> list[CotTemplate]:
    """The templates tried for a step of ``rule``, in order: the rule's own, the block's, the generic."""
    return [t for t in templates if t.rule == rule] + [t for t in templates if t.rule is None] + list(GENERIC)


def rule_params(forms) -> dict[str, set[str]]:
    """rule name -> the parameter keys its Step writes (``(P… "KEY" …)`` terms), read off the
    top-level forms of an (expanded) egglog text."""
    out: dict[str, set[str]] = {}
    for form in forms:
        name = keyword(form, ":name") if form.head in ("rule", "rewrite", "birewrite") else None
        if name is not None:
            keys = out.setdefault(name.value.strip('"'), set())
            for x in walk(form):
                if (x.is_list and len(x.value) > 1 and _PARAM_HEAD.fullmatch(x.head or "")
                        and not x.value[1].is_list and _STRING.fullmatch(x.value[1].value)):
                    keys.add(x.value[1].value[1:-1])
    return out


def check_templates(strategies, forms: dict[str, list]) -> list[tuple[str, int, str]]:
    """(file, line, message) for each template naming a rule the block does not have, or a
    parameter that none of the rules it applies to writes. ``forms``: file -> the top-level
    forms of its egglog text with identities expanded."""
    params: dict[str, set[str]] = {}
    for fs in forms.values():
        for rule, keys in rule_params(fs).items():
            params.setdefault(rule, set()).update(keys)
    out = []
    for st in strategies:
        for t in st.cot:
            if t.rule is not None and t.rule not in st.rules:
                out.append((st.file, t.line, f"@cot {t.rule}: not a rule of block '{st.name}' "
                                             f"(its rules: {', '.join(st.rules)})"))
                continue
            rules = [t.rule] if t.rule is not None else st.rules
            for s in t.slots:
                if s.param and not any(s.name in params.get(r, ()) for r in rules):
                    whose = (f"rule {t.rule} writes no parameter" if t.rule is not None
                             else f"no rule of block '{st.name}' writes a parameter")
                    out.append((st.file, t.line, f"@cot: {s.source}: {whose} '{s.name}'"))
    return out
