"""Re-derive every claim a chain-of-thought trace makes, from the step and the two programs.

A trace is parsed back with the template table of ``dataset.cot`` (the sentence shapes are
shared; nothing else is): each slot's text is read, then checked against facts this module
derives on its own from the original and transformed programs and the step's site. Removed
and added statements are the multiset difference of the two statement lists (the renderer
aligns them instead, so the two derivations check each other); names come from the program
texts; loops, equations and extents from the ASTs of the quoted statements. A claim that does
not hold is reported with the slot and the reason.
"""
from __future__ import annotations

import math
import re
from collections import Counter

from engine.leir.ast import (
    Equation,
    Nest,
    Ref,
    Var,
    children,
    equations,
    refs,
    with_children,
)
from engine.leir.parser import parse_body
from engine.leir.printer import expr_to_str, item_to_str, loop_to_str

from .cot import (
    ALGEBRAIC,
    ANNOTATIONS,
    FORMATS,
    INSTANCE_OPENING,
    SCOPE_WORDS,
    SLOTS,
    TAGS,
    description_sentence,
    display_name,
    templates_for,
)

_NAME = re.compile(r"([A-Z][a-z]*)\^\{")


def _names(text: str) -> list[str]:
    return list(dict.fromkeys(_NAME.findall(text)))


def _template_regex(template: str) -> re.Pattern:
    out, seen, pos = [], set(), 0
    for m in re.finditer(r"\{(\w+)\}", template):
        out.append(re.escape(template[pos:m.start()]))
        slot = m[1]
        if slot in seen:
            out.append(f"(?P={slot})")
        else:
            seen.add(slot)
            out.append(f"(?P<{slot}>{FORMATS[SLOTS[slot]].regex})")
        pos = m.end()
    out.append(re.escape(template[pos:]))
    return re.compile("".join(out), re.DOTALL)


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


def _excess(seq: list[str], mine: Counter, other: Counter) -> list[str]:
    """Items of ``seq`` beyond the other list's count, in order (later occurrences first out)."""
    budget = {k: mine[k] - other.get(k, 0) for k in mine}
    out = []
    for s in reversed(seq):
        if budget.get(s, 0) > 0:
            out.append(s)
            budget[s] -= 1
    return out[::-1]


def _parse(text: str):
    try:
        return parse_body(text)
    except Exception:       # a quoted statement that does not parse is a claim that fails
        return None


def _writes(items) -> list[str]:
    return list(dict.fromkeys(eq.lhs.name for _, eq in equations(items)))


def _loops(nest) -> list[tuple[str, str, int]]:
    return [(l.kind, l.var, l.extent) for l in nest.loops] if nest is not None else []


# --------------------------------------------------------------------------- slot checks
# each: (value, all parsed values, context) -> None when the claim holds, else why not


def _is_copy_stmt(text, new):
    items = _parse(text)
    eqs = [eq for _, eq in equations(items)] if items else []
    return bool(eqs) and all(eq.lhs.name in new and isinstance(eq.rhs, Ref) and not eq.rhs.paren for eq in eqs)


def _all_in(values, pool, what):
    left = Counter(pool)
    for v in values:
        if left[v] <= 0:
            return f"`{v[:80]}...` is not {what}"
        left[v] -= 1
    return None


def _check_removed(v, vals, c):
    return None if v == c.removed else f"the removed statements are {len(c.removed)}, not the {len(v)} quoted"


def _check_added(v, vals, c):
    return None if v == c.added else f"the added statements are {len(c.added)}, not the {len(v)} quoted"


def _check_stmt(which):
    def check(v, vals, c):
        texts = c.bt if which == "before" else c.at
        i = c.site[0] if c.site else -1
        return None if 0 <= i < len(texts) and texts[i] == v else f"not the statement at site {list(c.site)}"
    return check


def _check_loops(which):
    def check(v, vals, c):
        n = c.nest(which)
        return None if n is not None and "".join(loop_to_str(l) for l in n.loops) == v else \
            f"not the loops of the nest at site {list(c.site)}"
    return check


def _check_shared_loops(v, vals, c):
    stmts = vals.get("removed", c.removed)
    return None if stmts and all(s.startswith(v + "[") for s in stmts) else "the statements do not share these loops"


def _check_equation(which):
    def check(v, vals, c):
        it = c.item(which)
        return None if isinstance(it, Equation) and item_to_str(it) == v else \
            f"not the equation at site {list(c.site)}"
    return check


def _check_n_equations(v, vals, c):
    items = _parse(vals.get("removed", [""])[0])
    n = sum(1 for _ in equations(items)) if items else -1
    return None if n == v else f"the statement has {n} equations"


def _check_new_tensors(v, vals, c):
    return None if v == c.new_names else f"the new tensors are {c.new_names}"


def _check_new_tensor(v, vals, c):
    return None if c.new_names == [v] else f"the new tensors are {c.new_names}"


def _check_gone_tensor(v, vals, c):
    return None if v in c.gone_names else "that tensor is still in the transformed program"


def _check_tensor(v, vals, c):
    return None if v in _names(c.before_text) else "no such tensor in the program"


def _check_copies(v, vals, c):
    bad = _all_in(v, c.added, "an added statement")
    if bad:
        return bad
    new = set(c.new_names)
    return None if all(_is_copy_stmt(s, new) for s in v) else "a statement is not a copy into a new tensor"


def _added_where(v, c, fits, problem: str):
    """Every statement of v is an added one and ``fits(statement, parsed items, new names)``."""
    bad = _all_in(v, c.added, "an added statement")
    if bad:
        return bad
    new = set(c.new_names)
    for s in v:
        items = _parse(s)
        if items is None or not fits(s, items, new):
            return problem
    return None


def _check_computes(v, vals, c):
    return _added_where(v, c, lambda s, items, new: not _is_copy_stmt(s, new)
                        and any(n in new for n in _writes(items)), "a statement does not compute a new tensor")


def _check_assembles(v, vals, c):
    return _added_where(v, c, lambda s, items, new: not any(n in new for n in _writes(items)),
                        "a statement writes a new tensor")


def _check_rest(v, vals, c):
    bad = _all_in(v, c.added, "an added statement")
    if bad:
        return bad
    others = vals.get("computes") or vals.get("copies") or []
    return None if Counter(v) + Counter(others) == Counter(c.added) else "the statements do not make up the result"


def _single_eq(text):
    items = _parse(text)
    eqs = [eq for _, eq in equations(items)] if items else []
    return eqs[0] if len(eqs) == 1 else None


def _check_common(v, vals, c):
    eq = _single_eq((vals.get("computes") or [""])[0])
    if eq is None or expr_to_str(eq.rhs) != v:
        return "not the value of the statement said to compute it"
    return None if all(v in s for s in vals.get("removed", [])) else "not a part of every statement quoted"


def _check_index(v, vals, c):
    eq = _single_eq((vals.get("computes") or [""])[0])
    if eq is None or expr_to_str(eq.rhs) != v or eq.lhs.name != vals.get("new_tensor"):
        return "not the value of the table statement"
    return None if all(v in s for s in vals.get("removed", [])) else "not an index of the statement quoted"


def _check_copy_eq(v, vals, c):
    if v not in c.after_text:
        return "not an equation of the transformed program"
    eq = _single_eq("L^{1}_{a=0}[" + v + "];")
    if eq is None or not isinstance(eq.rhs, Ref):
        return "not a copy equation"
    pair = (eq.lhs.name, eq.rhs.name)
    read = (vals.get("new_tensor"), vals.get("tensor"))
    return None if pair in (read, read[::-1]) else "it does not copy between the two tensors named"


def _check_scope(v, vals, c):
    code = {w: k for k, w in SCOPE_WORDS.items()}.get(v)
    subject = vals.get("new_tensor") or vals.get("tensor")
    found = set(re.findall(re.escape(subject or "?") + r"\^\{[a-z0-9]+,([gsl])\}", c.after_text))
    return None if code and found == {code} else f"`{subject}` has scope(s) {sorted(found)}"


def _check_ref(which):
    def check(v, vals, c):
        text = c.before_text if which == "before" else c.after_text
        if v not in text or not v.startswith(vals.get("tensor", "?") + "^{"):
            return "not a reference of that tensor in the program"
        if c.strategy == "set_storage_scope":
            name = vals["tensor"]
            occ = re.findall(re.escape(name) + r"\^\{[^}]*\}", c.after_text)
            if name in c.known or not occ or any(o != v for o in occ):
                return "not every occurrence of the intermediate carries this scope"
        if c.strategy == "set_storage_layout" and which == "after":
            name = vals["tensor"]
            if name in c.known or not _consistent_relayout(_refs_of(c.before, name), _refs_of(c.after, name)):
                return "the occurrences of the intermediate are not all updated the same way"
        return None
    return check


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


def _check_order(v, vals, c):
    first, second = vals["first"], vals["second"]
    if first not in c.bt or second not in c.bt or first not in c.at or second not in c.at:
        return "the statements are not in both programs"
    ok = c.bt.index(first) + 1 == c.bt.index(second) and c.at.index(second) + 1 == c.at.index(first)
    return None if ok and not c.removed and not c.added else "the two statements are not swapped"


def _check_axis(v, vals, c):
    l0, l1 = _loops(c.nest("before")), _loops(c.nest("after"))
    s = c.strategy
    if s in ANNOTATIONS:
        want = ANNOTATIONS[s][1]
        pos = [i for i, x in enumerate(l0) if x[1] == v]
        if len(pos) != 1 or len(l0) != len(l1):
            return "no such loop"
        i = pos[0]
        same = all(l0[j] == l1[j] for j in range(len(l0)) if j != i)
        return None if same and l1[i] == (want, v, l0[i][2]) else f"the loop `{v}` does not become {want}"
    if s == "loop_binding":
        pos = [i for i, x in enumerate(l0) if x[1] == v]
        if len(pos) != 1 or len(l0) != len(l1):
            return "no such loop"
        i = pos[0]
        k, var, n = l1[i]
        ok = (k == "B" and var == vals.get("bound_var") and n == l0[i][2] and TAGS.get(var[:2]) == vals.get("tag")
              and var not in {x[1] for x in l0})
        return None if ok else f"the loop `{v}` is not bound as claimed"
    if s == "reduction_factorization":
        if (v, vals.get("extent")) not in {(x[1], x[2]) for x in l0}:
            return f"no loop `{v}` of that extent"
        parts = vals.get("parts", [])
        comps = vals.get("computes", [])
        if len(parts) != len(comps) or sum(parts) != vals.get("extent"):
            return "the partial extents do not add up to the axis"
        for text, n in zip(comps, parts):
            items = _parse(text)
            ext = [l.extent for l in items[0].loops if l.var == v] if items else []
            if ext != [n]:
                return f"a partial reduction does not run `{v}` over {n} iterations"
        return None
    return "no axis claim for this strategy"


def _check_swapped(v, vals, c):
    l0, l1 = _loops(c.nest("before")), _loops(c.nest("after"))
    vars0 = [x[1] for x in l0]
    if len(v) != 2 or any(x not in vars0 for x in v):
        return "no such loops"
    i, j = vars0.index(v[0]), vars0.index(v[1])
    want = list(l0)
    want[i], want[j] = want[j], want[i]
    return None if want == l1 else "the loops are not exchanged"


def _check_loop_from(v, vals, c):
    l0, l1 = _loops(c.nest("before")), _loops(c.nest("after"))
    gone = [(var, n) for k, var, n in l0 if (k, var, n) not in l1]
    new = [(var, n) for k, var, n in l1 if (k, var, n) not in l0]
    if v != gone or vals.get("loop_to") != new:
        return f"the loops that change are {gone} -> {new}"
    return None if math.prod(n for _, n in v) == math.prod(n for _, n in new) else "the iteration counts differ"


def _check_factor(v, vals, c):
    src, dst = vals.get("loop_from", []), vals.get("loop_to", [])
    if len(src) != 1 or len(dst) != 2:
        return "not a split of one loop into two"
    inner = [n for var, n in dst if var == src[0][0]]
    other = [n for var, n in dst if var != src[0][0]]
    return None if inner == [v] and len(other) == 1 and other[0] * v == src[0][1] else "not the split factor"


def _check_name(v, vals, c):
    return None if v == display_name(c.strategy) else "not this strategy's name"


def _check_dead(v, vals, c):
    stmts = vals.get("removed", [])
    written = _writes(tuple(x for s in stmts for x in (_parse(s) or ())))
    if v != written:
        return f"the statements write {written}"
    last = max((i for i, s in enumerate(c.bt) if s in stmts), default=-1)
    later = "".join(c.bt[last + 1:])
    for n in v:
        if n in c.outputs or re.search(re.escape(n) + r"\^\{", later):
            return f"`{n}` is used later or is an output"
    return None


def _noop(v, vals, c):
    return None


CHECKS = {
    "removed": _check_removed, "added": _check_added, "stmt": _check_stmt("before"),
    "stmt_after": _check_stmt("after"), "loops": _check_loops("before"), "loops_after": _check_loops("after"),
    "shared_loops": _check_shared_loops, "equation": _check_equation("before"),
    "equation_after": _check_equation("after"), "n_equations": _check_n_equations,
    "new_tensors": _check_new_tensors, "new_tensor": _check_new_tensor, "gone_tensor": _check_gone_tensor,
    "tensor": _check_tensor, "copies": _check_copies, "computes": _check_computes, "assembles": _check_assembles,
    "rest": _check_rest, "common": _check_common, "index": _check_index, "copy_eq": _check_copy_eq,
    "scope": _check_scope, "ref_before": _check_ref("before"), "ref_after": _check_ref("after"),
    "first": _check_order, "second": _noop, "axis": _check_axis, "extent": _noop, "parts": _noop,
    "swapped": _check_swapped, "loop_from": _check_loop_from, "loop_to": _noop, "factor": _check_factor,
    "bound_var": _noop, "tag": _noop, "name": _check_name, "dead": _check_dead,
}
# slots whose claim is checked together with another one (the checker that reads them):
# second -> first, extent/parts -> axis, loop_to -> loop_from, bound_var/tag -> axis
assert set(CHECKS) == set(SLOTS), sorted(set(SLOTS) ^ set(CHECKS))


def _template_checks(template: str, vals: dict, c: Context) -> list[str]:
    """Claims a template makes by its wording rather than by a slot."""
    out = []
    if template.endswith("can be removed.") and c.added:
        out.append("the step also adds statements")
    if template.startswith("{added} can be added.") and c.removed:
        out.append("the step also removes statements")
    if "the inputs are" in template and "{copies}" in template:
        parts = Counter(vals.get("copies", [])) + Counter(vals.get("computes", [])) + Counter(vals.get("assembles", []))
        if parts != Counter(c.added):
            out.append("the copies, computations and reassembly do not make up the added statements")
    elif "{computes}" in template and "{assembles}" in template:
        if Counter(vals.get("computes", [])) + Counter(vals.get("assembles", [])) != Counter(c.added):
            out.append("the computations and the writes do not make up the added statements")
    if c.strategy in ALGEBRAIC and vals.get("equation") == vals.get("equation_after"):
        out.append("the equation is unchanged")
    if "read into" in template and vals.get("copy_eq"):
        eq = _single_eq("L^{1}_{a=0}[" + vals["copy_eq"] + "];")
        if eq is None or eq.lhs.name != vals.get("new_tensor"):
            out.append("the copy equation does not read into the new tensor")
    if "written from" in template and vals.get("copy_eq"):
        eq = _single_eq("L^{1}_{a=0}[" + vals["copy_eq"] + "];")
        if eq is None or eq.lhs.name != vals.get("tensor"):
            out.append("the copy equation does not write the tensor back")
    return out


def check_trace(trace: str, strategy: str, description: str, before, after, site) -> list[str]:
    """Every claim of ``trace`` that does not hold (empty: the trace is true)."""
    head = description_sentence(strategy, description) + INSTANCE_OPENING
    if not trace.startswith(head):
        return [f"the trace does not open with the description sentence of {strategy}"]
    body = trace[len(head):]
    c = Context(strategy, before, after, site)
    tried = []
    for tpl in templates_for(strategy):
        m = _template_regex(tpl).fullmatch(body)
        if not m:
            continue
        vals = {k: FORMATS[SLOTS[k]].read(t) for k, t in m.groupdict().items()}
        problems = [f"{slot}: {why}" for slot, v in vals.items() if (why := CHECKS[slot](v, vals, c))]
        problems += _template_checks(tpl, vals, c)
        if not problems:
            return []
        tried.append(problems)
    if not tried:
        return [f"the instance part follows no template of {strategy}"]
    return tried[0]
