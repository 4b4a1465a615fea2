"""Re-derive every claim a chain-of-thought trace makes, from the step and the two programs.

A trace is parsed back with the templates of the strategy's rule block (the ``@cot`` lines,
engine.rewrite.cot_template) and the formats of ``dataset.text.cot``: that is all the two share.
Each slot is then checked by its name alone, with no knowledge of the strategy: a fact
(``{removed}``, ``{loops}``, ...) against the same fact derived here, on its own, from the
original and transformed programs and the step's site; a rule parameter (``{param.loop}``)
against the step's provenance. Removed and added statements are the multiset difference of the
two statement lists (the renderer aligns them instead, so the two derivations check each
other); names come from the program texts; loops, equations and extents from the ASTs of the
quoted statements. A claim that does not hold is reported with the slot and the reason.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from functools import cached_property

from engine.leir.ast import Equation, Nest, Ref, Var, children, equations, refs, with_children
from engine.leir.parser import parse_body
from engine.leir.printer import expr_to_str, item_to_str, loop_to_str, ref_to_str
from engine.rewrite.cot_template import FACTS, Slot, applicable

from ..text.cot import FORMATS, INSTANCE_OPENING, TAGS, description_sentence, display_name

_NAME = re.compile(r"([A-Z][a-z]*)\^\{[a-z]")      # a tensor reference (a loop's superscript is its extent)


def _names(text: str) -> list[str]:
    return list(dict.fromkeys(_NAME.findall(text)))


def template_regex(template) -> re.Pattern:
    """The trace text a template matches; group ``s<i>`` holds the i-th slot's text (a slot
    written twice must be the same text twice)."""
    out, first = [], {}
    for piece in template.pieces():
        if not isinstance(piece, Slot):
            out.append(re.escape(piece))
        elif piece.source in first:
            out.append(f"(?P=s{first[piece.source]})")
        else:
            first[piece.source] = len(first)
            out.append(f"(?P<s{first[piece.source]}>{FORMATS[piece.format].regex})")
    return re.compile("".join(out), re.DOTALL)


def _parse(text: str):
    try:
        return parse_body(text)
    except Exception:       # a quoted statement that does not parse is a claim that fails
        return None


def _writes(items) -> list[str]:
    return list(dict.fromkeys(eq.lhs.name for _, eq in equations(items)))


def _loops(nest) -> list[tuple[str, str, int]]:
    return [(l.kind, l.var, l.extent) for l in nest.loops] if nest is not None else []


def _excess(seq: list[str], mine: Counter, other: Counter) -> list[str]:
    """Items of ``seq`` beyond the other list's count, in order (later occurrences first out)."""
    budget = {k: mine[k] - other.get(k, 0) for k in mine}
    out = []
    for s in reversed(seq):
        if budget.get(s, 0) > 0:
            out.append(s)
            budget[s] -= 1
    return out[::-1]


def _single_eq(text):
    items = _parse(text)
    eqs = [eq for _, eq in equations(items)] if items else []
    return eqs[0] if len(eqs) == 1 else None


class Context:
    """Facts about one step, derived here independently of the renderer."""

    def __init__(self, strategy: str, before, after, site):
        self.strategy, self.before, self.after, self.site = strategy, before, after, tuple(site)
        self.bt = [item_to_str(x) for x in before.body]
        self.at = [item_to_str(x) for x in after.body]
        cb, ca = Counter(self.bt), Counter(self.at)
        self.removed = _excess(self.bt, cb, ca)
        self.added = _excess(self.at, ca, cb)
        self.before_text, self.after_text = "".join(self.bt), "".join(self.at)
        old = set(_names(self.before_text))
        self.new_names = [n for n in _names(self.after_text) if n not in old]
        now = set(_names(self.after_text))
        self.gone_names = [n for n in _names(self.before_text) if n not in now]
        self.known = {d.name for d in before.known}
        self.outputs = {d.name for d in before.outputs}

    def item(self, which: str):
        body = self.before.body if which == "before" else self.after.body
        it, items = None, body
        for i in self.site:
            if items is None or i >= len(items):
                return None
            it = items[i]
            items = it.body if isinstance(it, Nest) else None
        return it

    def nest(self, which: str):
        body = self.before.body if which == "before" else self.after.body
        nest, items = None, body
        for i in self.site:
            if items is None or i >= len(items) or not isinstance(items[i], Nest):
                break
            nest, items = items[i], items[i].body
        return nest

    # ---------------------------------------------------------------- the added statements, by what they write

    @cached_property
    def classes(self) -> dict[str, list[str]]:
        new = set(self.new_names)
        out = {"copies": [], "computes": [], "assembles": []}
        for s in self.added:
            items = _parse(s) or ()
            eqs = [eq for _, eq in equations(items)]
            if eqs and all(eq.lhs.name in new and isinstance(eq.rhs, Ref) and not eq.rhs.paren for eq in eqs):
                out["copies"].append(s)
            elif any(n in new for n in _writes(items)):
                out["computes"].append(s)
            else:
                out["assembles"].append(s)
        return out

    def added_eqs(self) -> list[Equation]:
        return [eq for s in self.added for _, eq in equations(_parse(s) or ())]

    # ---------------------------------------------------------------- loops of the nest at the site

    @cached_property
    def nest_loops(self):
        return _loops(self.nest("before")), _loops(self.nest("after"))

    @cached_property
    def changed_loop(self):
        """(position, before, after) of the one loop that changes in place, keeping its extent."""
        l0, l1 = self.nest_loops
        pos = [i for i in range(len(l0)) if len(l0) == len(l1) and l0[i] != l1[i]]
        if len(pos) != 1 or l0[pos[0]][2] != l1[pos[0]][2]:
            return None
        return pos[0], l0[pos[0]], l1[pos[0]]

    @cached_property
    def split(self):
        """(loop, extent, parts): a loop of the nest whose iterations the computations added
        divide among themselves, the reassembly running it at most once."""
        comps = [_parse(s) for s in self.classes["computes"]]
        asms = [_parse(s) for s in self.classes["assembles"]]
        if len(comps) < 2 or not asms or any(not x or not isinstance(x[0], Nest) for x in comps):
            return None
        for _, var, n in self.nest_loops[0]:
            parts = [[l.extent for l in x[0].loops if l.var == var] for x in comps]
            if any(len(p) != 1 for p in parts) or sum(p[0] for p in parts) != n:
                continue
            if any(isinstance(it, Nest) and any(l.var == var and l.extent > 1 for l in it.loops)
                   for x in asms for it in (x or ())):
                continue
            return var, n, [p[0] for p in parts]
        return None

    @cached_property
    def swap(self):
        """The two neighbouring statements that exchange places (nothing else changes)."""
        b, a = self.bt, self.at
        if len(a) != len(b) or self.removed or self.added:
            return None
        diff = [i for i in range(len(b)) if a[i] != b[i]]
        if len(diff) == 2 and diff[1] == diff[0] + 1 and b[diff[0]] == a[diff[1]] and b[diff[1]] == a[diff[0]]:
            return b[diff[0]], b[diff[1]]
        return None


def _refs_of(program, name: str) -> list[Ref]:
    out = []
    for _, eq in equations(program.body):
        for r in [eq.lhs, *refs(eq.rhs)]:
            out.extend(x for x in refs(r) if x.name == name)
    return out


def _abstract(e, table: dict):
    """``e`` with every sub-expression printed as one of ``table``'s keys replaced by its
    placeholder, outermost first."""
    text = expr_to_str(e)
    if text in table:
        return Var(table[text])
    kids = children(e)
    return with_children(e, tuple(_abstract(k, table) for k in kids)) if kids else e


def _consistent_relayout(before: list[Ref], after: list[Ref]) -> bool:
    """Every occurrence's new subscripts are the same function of its old ones (and at least
    one changed): the layout change is consistent across the program."""
    if not before or len(before) != len(after):
        return False
    shapes = set()
    for r0, r1 in zip(before, after):
        table = {expr_to_str(x): f"_{i}" for i, x in enumerate(r0.index)}
        shapes.add(tuple(expr_to_str(_abstract(x, table)) for x in r1.index))
    changed = any([expr_to_str(x) for x in a.index] != [expr_to_str(x) for x in b.index] for a, b in zip(before, after))
    return len(shapes) == 1 and changed


# --------------------------------------------------------------------------- fact checks
# each: (value read from the trace, context) -> None when the claim holds, else why not


def _equal(derive, what: str):
    def check(v, c):
        want = derive(c)
        return None if v == want else f"{what} {want!r}"
    return check


def _check_stmt(which):
    def check(v, c):
        texts = c.bt if which == "before" else c.at
        i = c.site[0] if c.site else -1
        return None if 0 <= i < len(texts) and texts[i] == v else f"not the statement at site {list(c.site)}"
    return check


def _check_loops(which):
    def check(v, c):
        n = c.nest(which)
        return None if n is not None and "".join(loop_to_str(l) for l in n.loops) == v else \
            f"not the loops of the nest at site {list(c.site)}"
    return check


def _check_removed_only(v, c):
    return "the step also adds statements" if c.added else _check_list(v, c.removed, "removed")


def _check_added_only(v, c):
    return "the step also removes statements" if c.removed else _check_list(v, c.added, "added")


def _check_list(v, want, what):
    return None if v == want else f"the {what} statements are {len(want)}, not the {len(v)} quoted"


def _check_shared_loops(v, c):
    ok = len(c.removed) >= 2 and all(s.startswith(v + "[") for s in c.removed)
    return None if ok else "the statements do not share these loops"


def _check_equation(v, c):
    it = c.item("before")
    return None if isinstance(it, Equation) and item_to_str(it) == v else f"not the equation at site {list(c.site)}"


def _check_equation_after(v, c):
    it, it0 = c.item("after"), c.item("before")
    if not isinstance(it, Equation) or item_to_str(it) != v:
        return f"not the equation at site {list(c.site)} after the step"
    return "the equation is unchanged" if isinstance(it0, Equation) and item_to_str(it0) == v else None


def _check_n_equations(v, c):
    items = _parse(c.removed[0]) if len(c.removed) == 1 else None
    n = sum(1 for _ in equations(items)) if items else -1
    return None if n == v and n >= 2 else f"the statement has {n} equations"


def _check_new_tensor(v, c):
    return None if c.new_names == [v] else f"the new tensors are {c.new_names}"


def _check_gone_tensor(v, c):
    return None if c.gone_names == [v] else f"the tensors the step removes are {c.gone_names}"


def _check_dead(v, c):
    written = _writes(tuple(x for s in c.removed for x in (_parse(s) or ())))
    if c.added or v != written:
        return f"the statements removed write {written}" + (" and the step adds statements" if c.added else "")
    last = max((i for i, s in enumerate(c.bt) if s in c.removed), default=-1)
    later = "".join(c.bt[last + 1:])
    for n in v:
        if n in c.outputs or re.search(re.escape(n) + r"\^\{[a-z]", later):
            return f"`{n}` is used later or is an output"
    return None


def _the_computation(c):
    comps = c.classes["computes"]
    return _single_eq(comps[0]) if len(comps) == 1 else None


def _check_common(v, c):
    eq = _the_computation(c)
    if eq is None or expr_to_str(eq.rhs) != v:
        return "not the value of the one computation added"
    return None if all(v in s for s in c.removed) else "not a part of every statement removed"


def _check_index(v, c):
    eq = _the_computation(c)
    if eq is None or c.new_names != [eq.lhs.name]:
        return "the computation added does not write the one new tensor"
    return _check_common(v, c)


def _check_copy(reading: bool):
    def check(v, c):
        if len(c.new_names) != 1:
            return f"the new tensors are {c.new_names}"
        n = c.new_names[0]
        found = []
        for eq in c.added_eqs():
            if isinstance(eq.rhs, Ref):
                new_side, old_side = (eq.lhs.name, eq.rhs.name) if reading else (eq.rhs.name, eq.lhs.name)
                if new_side == n and old_side != n:
                    found.append(item_to_str(eq))
        return None if found == [v] else f"the copy equations {'into' if reading else 'from'} `{n}` are {found}"
    return check


def _check_retyped(v, c):
    m = re.fullmatch(r"([A-Z][a-z]*)\^\{[a-z0-9]+,[gsl]\}", v)
    if not m or m[1] in c.known:
        return "not an intermediate tensor with its type"
    after = re.findall(re.escape(m[1]) + r"\^\{[a-z][^}]*\}", c.after_text)
    before = re.findall(re.escape(m[1]) + r"\^\{[a-z][^}]*\}", c.before_text)
    if not after or any(o != v for o in after):
        return "not every occurrence of the intermediate carries this scope"
    return None if any(o != v for o in before) else "the intermediate had this scope already"


def _relaid(c):
    """(name, first reference before, after) of the one intermediate whose references change."""
    changed = []
    for n in _names(c.before_text):
        r0, r1 = _refs_of(c.before, n), _refs_of(c.after, n)
        if n not in c.known and r0 and r1 and [ref_to_str(r) for r in r0] != [ref_to_str(r) for r in r1]:
            changed.append((n, ref_to_str(r0[0]), ref_to_str(r1[0])))
    return changed[0] if len(changed) == 1 else (None, None, None)


def _check_ref_before(v, c):
    return None if _relaid(c)[1] == v else "not the first reference of the one intermediate whose references change"


def _check_ref_after(v, c):
    name, _, r1 = _relaid(c)
    if r1 != v:
        return "not the first reference, after the step, of the one intermediate whose references change"
    if not _consistent_relayout(_refs_of(c.before, name), _refs_of(c.after, name)):
        return "the occurrences of the intermediate are not all updated the same way"
    return None


def _check_swap(i):
    def check(v, c):
        return None if c.swap is not None and c.swap[i] == v else "the two statements are not swapped"
    return check


def _check_loop_change(i):
    def check(v, c):
        l0, l1 = c.nest_loops
        gone = [(var, n) for k, var, n in l0 if (k, var, n) not in l1]
        new = [(var, n) for k, var, n in l1 if (k, var, n) not in l0]
        if math.prod(n for _, n in gone) != math.prod(n for _, n in new) or not gone:
            return "the iteration counts differ"
        return None if v == (gone, new)[i] else f"the loops that change are {gone} -> {new}"
    return check


def _check_swapped(v, c):
    l0, l1 = c.nest_loops
    vars0 = [x[1] for x in l0]
    if len(v) != 2 or any(x not in vars0 for x in v):
        return "no such loops"
    i, j = vars0.index(v[0]), vars0.index(v[1])
    want = list(l0)
    want[i], want[j] = want[j], want[i]
    return None if want == l1 else "the loops are not exchanged"


def _check_loop_kind(v, c):
    ch = c.changed_loop
    return None if ch and ch[2][0] == v and ch[1][0] != v else f"no loop of the nest becomes {v}"


def _check_bound_var(v, c):
    ch = c.changed_loop
    ok = (ch and ch[2][0] == "B" and ch[2][1] == v and v != ch[1][1] and v not in {x[1] for x in c.nest_loops[0]}
          and v[:2] in TAGS)
    return None if ok else f"no loop of the nest is bound as `{v}`"


def _check_split(i):
    def check(v, c):
        s = c.split
        return None if s is not None and s[i] == v else "the computations added do not divide this loop so"
    return check


def _check_name(v, c):
    return None if v == display_name(c.strategy) else "not this strategy's name"


def _added_class(name):
    return _equal(lambda c: c.classes[name], f"the added statements that are {name} are")


CHECKS = {
    "removed": lambda v, c: _check_list(v, c.removed, "removed"),
    "added": lambda v, c: _check_list(v, c.added, "added"),
    "removed_only": _check_removed_only, "added_only": _check_added_only,
    "stmt": _check_stmt("before"), "stmt_after": _check_stmt("after"),
    "n_equations": _check_n_equations, "shared_loops": _check_shared_loops,
    "equation": _check_equation, "equation_after": _check_equation_after,
    "loops": _check_loops("before"), "loops_after": _check_loops("after"),
    "loop_from": _check_loop_change(0), "loop_to": _check_loop_change(1), "swapped": _check_swapped,
    "loop_kind": _check_loop_kind, "bound_var": _check_bound_var,
    "split_axis": _check_split(0), "split_extent": _check_split(1), "split_parts": _check_split(2),
    "new_tensors": _equal(lambda c: c.new_names, "the new tensors are"), "new_tensor": _check_new_tensor,
    "gone_tensor": _check_gone_tensor, "retyped": _check_retyped,
    "ref_before": _check_ref_before, "ref_after": _check_ref_after, "dead": _check_dead,
    "copies": _added_class("copies"), "computes": _added_class("computes"), "assembles": _added_class("assembles"),
    "rest": _equal(lambda c: [s for s in c.added if s not in c.classes["computes"]], "the rest is"),
    "uses": _equal(lambda c: [s for s in c.added if s not in c.classes["copies"]], "the statements not copies are"),
    "common": _check_common, "index": _check_index,
    "read_copy": _check_copy(True), "write_copy": _check_copy(False),
    "first": _check_swap(0), "second": _check_swap(1),
    "name": _check_name,
}
assert set(CHECKS) == set(FACTS), sorted(set(FACTS) ^ set(CHECKS))


def _check_param(slot: Slot, text: str, params: Mapping) -> str | None:
    if slot.name not in params:
        return f"the step has no parameter '{slot.name}'"
    want = FORMATS[slot.format].write(params[slot.name])
    return None if text == want else f"the step's parameter is {params[slot.name]!r}"


def _field(step, key):
    return step[key] if isinstance(step, Mapping) else getattr(step, key)


def _match(body: str, templates, c: Context, params: dict):
    """None when no template matches ``body``; else the problems of the first template that
    matches and whose claims all hold ([]), or of the first that matches."""
    tried = []
    for tpl in templates:
        m = template_regex(tpl).fullmatch(body)
        if not m:
            continue
        problems, seen = [], set()
        for slot in tpl.slots:
            if slot.source in seen:
                continue
            text = m[f"s{len(seen)}"]
            seen.add(slot.source)
            why = (_check_param(slot, text, params) if slot.param
                   else CHECKS[slot.name](FORMATS[slot.format].read(text), c))
            if why:
                problems.append(f"{slot.source}: {why}")
        if not problems:
            return []
        tried.append(problems)
    return tried[0] if tried else None


def _split_reasons(body: str, benefits) -> tuple[str, list, str | None]:
    """(instance part, [(benefit, its instance text)], problem) of a trace's body: the benefit
    sentences follow the instance part, one per ``@benefit`` of the block, in its order."""
    from ..text.benefit import NONE_SENTENCE, opening
    heads = [NONE_SENTENCE if b == "none" else opening(b) for b in benefits]
    if not heads:
        return body, [], None
    start = body.find(heads[0])
    if start < 0:
        return body, [], f"no sentence says what the step can improve ({', '.join(benefits)})"
    parts, pos = [], start
    for k, (b, head) in enumerate(zip(benefits, heads)):
        if not body.startswith(head, pos):
            return body[:start], [], f"the sentence on {b} is missing or out of order"
        begin = pos + len(head)
        end = body.find(heads[k + 1], begin) if k + 1 < len(heads) else len(body)
        if end < 0:
            return body[:start], [], f"the sentence on {benefits[k + 1]} is missing or out of order"
        parts.append((b, body[begin:end]))
        pos = end
    return body[:start], parts, None


def check_trace(trace: str, strategy, before, after, step, timing=None) -> list[str]:
    """Every claim of ``trace`` that does not hold (empty: the trace is true). ``strategy``: the
    rule block (``Engine.strategy(name)``); ``step``: a Step, or a dict with rule, site, params;
    ``timing``: the row's timing record (its measured sentence is re-derived from it)."""
    from ..text.benefit import TEMPLATES, measured_sentence
    head = description_sentence(strategy.name, strategy.meta["description"]) + INSTANCE_OPENING
    if not trace.startswith(head):
        return [f"the trace does not open with the description sentence of {strategy.name}"]
    body = trace[len(head):]
    measured = measured_sentence(timing)
    if measured:
        if not body.endswith(measured):
            return ["the measured sentence is not the one the row's timing record gives"]
        body = body[:-len(measured)]
    elif " Measured: " in body:
        return ["the trace claims a measurement the row has no timing record of"]
    rule, site, params = _field(step, "rule"), _field(step, "site"), dict(_field(step, "params") or {})
    c = Context(strategy.name, before, after, site)
    body, reasons, problem = _split_reasons(body, tuple(strategy.benefit))
    problems = [problem] if problem else []
    got = _match(body, applicable(strategy.cot, rule), c, params)
    if got is None:
        problems.append(f"the instance part follows no template of {strategy.name}")
    else:
        problems += got
    for b, text in reasons:
        if b == "none":
            continue
        got = _match(text, TEMPLATES[b], c, params)
        if got is None:
            problems.append(f"the sentence on {b} follows no template of that benefit")
        else:
            problems += [f"{b}: {p}" for p in got]
    return problems
