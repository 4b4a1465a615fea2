"""Chain-of-thought traces rendered from the rule that made a step (dataset.md 5).

A trace is two parts: the strategy's description sentence, taken verbatim from its rule block
(``The strategy loop split is used on the given IR: it divides one loop ...``), then an
instance part, `` Under the given IR, ...``, one of the block's ``@cot`` templates with its
slots filled (engine.rewrite.cot_template: the syntax, the list of facts, the order templates
are tried in). This module holds no sentence of any strategy: it has the formats a slot is
written in and the facts, computed the same way for every step. Their content comes from
structure, never from strings: the step's site (a path into the body) locates the statement,
nest and equation the rule matched; the changed statements come from an alignment of the two
programs' statement lists (so a statement that occurs twice, or a move that leaves every text
unchanged, is handled); new tensors and loops, scopes, extents and factors are read off the two
ASTs. A fact that does not hold for a step is None and skips the templates that name it.
``dataset.check.claims`` parses a trace back with the same templates and formats and re-derives every
slot on its own (``python -m dataset.check``).
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from functools import cached_property

from engine.leir.ast import Equation, Nest, Ref, equations, refs
from engine.leir.printer import expr_to_str, item_to_str, loop_to_str, ref_to_str
from engine.rewrite.cot_template import FACTS, FORMAT_NAMES, Slot, applicable

SCOPE_WORDS = {"g": "global", "s": "shared", "l": "local"}
TAGS = {"tx": "threadIdx.x", "ty": "threadIdx.y", "tz": "threadIdx.z",
        "bx": "blockIdx.x", "by": "blockIdx.y", "bz": "blockIdx.z"}
KIND_WORDS = {"U": "unrolled", "P": "parallelized", "V": "vectorized", "B": "bound"}


class CotError(Exception):
    """No template of the strategy fits the step (a rule/provenance disagreement: a bug)."""


# --------------------------------------------------------------------------- text formats


def quote(text: str) -> str:
    return f"`{text}`"


def join(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


_Q = r"`[^`]+`"
_LOOP = r"`[a-z][a-z0-9]*` of extent \d+"
_INT = r"\d+"


def _list_re(one: str) -> str:
    return rf"{one}(?:, {one})*(?: and {one})?"


def _split_list(text: str) -> list[str]:
    """Inverse of ``join`` for backticked items."""
    return re.findall(r"`([^`]+)`", text)


def _int(v) -> str | None:
    return str(v) if isinstance(v, int) or (isinstance(v, str) and v.isdigit()) else None


def _words(table: dict) -> "Format":
    """A code written as its word (``l`` -> ``local``); None for a code the table lacks."""
    back = {w: k for k, w in table.items()}
    return Format("(?:" + "|".join(re.escape(w) for w in table.values()) + ")",
                  lambda v: table.get(v) if isinstance(v, str) else None, back.get)


@dataclass(frozen=True)
class Format:
    """How a slot's value is written in a trace, matched and read back (``write`` gives None for
    a value the format cannot write: the template does not fit)."""

    regex: str
    write: object          # value -> text | None
    read: object           # text -> value


FORMATS = {
    "text": Format(_Q, lambda v: quote(str(v)), lambda t: t[1:-1]),
    "texts": Format(_list_re(_Q), lambda v: join([quote(x) for x in v]), _split_list),
    "int": Format(_INT, _int, int),
    "ints": Format(_list_re(_INT), lambda v: join([str(x) for x in v]), lambda t: [int(x) for x in re.findall(r"\d+", t)]),
    "loops": Format(_list_re(_LOOP), lambda v: join([f"`{var}` of extent {n}" for var, n in v]),
                    lambda t: [(m[0], int(m[1])) for m in re.findall(r"`([a-z][a-z0-9]*)` of extent (\d+)", t)]),
    "word": Format(r"[A-Za-z][A-Za-z.]*", lambda v: v if isinstance(v, str) and re.fullmatch(r"[A-Za-z][A-Za-z.]*", v)
                   else None, str),
    "phrase": Format(r"[a-z][a-z ]*[a-z]", str, str),
    "scope": _words(SCOPE_WORDS),
    "thread": _words(TAGS),
    "kind": _words(KIND_WORDS),
}
assert set(FORMATS) == set(FORMAT_NAMES), sorted(set(FORMATS) ^ set(FORMAT_NAMES))


def display_name(strategy: str) -> str:
    return strategy.replace("_", " ")


def description_sentence(strategy: str, description: str) -> str:
    """The strategy part: the rule block's description, verbatim, after the paper's opening."""
    text = description.strip().rstrip(".")
    return f"The strategy {display_name(strategy)} is used on the given IR: it {text}."


INSTANCE_OPENING = " Under the given IR, "


# --------------------------------------------------------------------------- structure


def loop_prefix(nest: Nest) -> str:
    return "".join(loop_to_str(l) for l in nest.loops)


def item_at(body, path):
    """The item a site path names (``path[0]`` a top-level statement, then body indices)."""
    item = None
    items = body
    for i in path:
        if not isinstance(items, tuple) or i >= len(items):
            return None
        item = items[i]
        items = item.body if isinstance(item, Nest) else None
    return item


def nest_at(body, path):
    """The innermost nest on a site path (the nest itself when the path names a nest)."""
    nest = None
    items = body
    for i in path:
        if items is None or i >= len(items):
            break
        it = items[i]
        if not isinstance(it, Nest):
            break
        nest, items = it, it.body
    return nest


def tensor_names(body) -> list[str]:
    """Tensor names in order of first occurrence (LHS and RHS, index reads included)."""
    seen: dict[str, None] = {}
    for _, eq in equations(body):
        for r in [eq.lhs, *refs(eq.rhs)]:
            for x in refs(r):
                seen.setdefault(x.name, None)
    return list(seen)


def written(item) -> list[str]:
    return list(dict.fromkeys(eq.lhs.name for _, eq in equations((item,))))


def is_copy(item, new: set[str]) -> bool:
    """Every equation writes a new tensor with a bare reference as its value."""
    eqs = [eq for _, eq in equations((item,))]
    return bool(eqs) and all(eq.lhs.name in new and isinstance(eq.rhs, Ref) and not eq.rhs.paren for eq in eqs)


class Facts:
    """What a step did, read off the two programs and the site: one attribute per fact of
    ``engine.rewrite.cot_template.FACTS`` (None where it does not hold for this step)."""

    def __init__(self, strategy: str, before, after, site):
        self.strategy, self.before, self.after, self.site = strategy, before, after, tuple(site)
        self.b = [item_to_str(x) for x in before.body]
        self.a = [item_to_str(x) for x in after.body]
        self.name = display_name(strategy)

    # ---------------------------------------------------------------- changed statements

    @cached_property
    def _diff(self):
        sm = difflib.SequenceMatcher(a=self.b, b=self.a, autojunk=False)
        rem, add = [], []
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag != "equal":
                rem.extend(range(i1, i2))
                add.extend(range(j1, j2))
        return rem, add

    @cached_property
    def removed(self):
        return [self.b[i] for i in self._diff[0]] or None

    @cached_property
    def added(self):
        return [self.a[j] for j in self._diff[1]] or None

    @cached_property
    def removed_only(self):
        return self.removed if not self.added else None

    @cached_property
    def added_only(self):
        return self.added if not self.removed else None

    @cached_property
    def _added_items(self):
        return [self.after.body[j] for j in self._diff[1]]

    @cached_property
    def _new(self) -> list[str]:
        old = set(tensor_names(self.before.body))
        return [n for n in tensor_names(self.after.body) if n not in old]

    @cached_property
    def new_tensors(self):
        return [n for n in self._new] or None

    @cached_property
    def new_tensor(self):
        return self._new[0] if len(self._new) == 1 else None

    @cached_property
    def gone_tensor(self):
        new = set(tensor_names(self.after.body))
        gone = [n for n in tensor_names(self.before.body) if n not in new]
        return gone[0] if len(gone) == 1 else None

    @cached_property
    def _classes(self):
        new = set(self._new)
        copies, computes, assembles = [], [], []
        for it, text in zip(self._added_items, self.added or []):
            w = written(it)
            if is_copy(it, new):
                copies.append(text)
            elif any(n in new for n in w):
                computes.append(text)
            else:
                assembles.append(text)
        return copies, computes, assembles

    @cached_property
    def copies(self):
        return self._classes[0] or None

    @cached_property
    def computes(self):
        return self._classes[1] or None

    @cached_property
    def assembles(self):
        return self._classes[2] or None

    @cached_property
    def rest(self):
        cm = set(self.computes or ())
        return [t for t in self.added or [] if t not in cm] or None

    @cached_property
    def uses(self):
        cp = set(self.copies or ())
        return [t for t in self.added or [] if t not in cp] or None

    # ---------------------------------------------------------------- the site

    @cached_property
    def stmt(self):
        i = self.site[0] if self.site else None
        return self.b[i] if i is not None and i < len(self.b) else None

    @cached_property
    def stmt_after(self):
        i = self.site[0] if self.site else None
        return self.a[i] if i is not None and i < len(self.a) else None

    @cached_property
    def _nests(self):
        return nest_at(self.before.body, self.site), nest_at(self.after.body, self.site)

    @cached_property
    def loops(self):
        n = self._nests[0]
        return loop_prefix(n) if n is not None and n.loops else None

    @cached_property
    def loops_after(self):
        n = self._nests[1]
        return loop_prefix(n) if n is not None and n.loops else None

    @cached_property
    def shared_loops(self):
        items = [self.before.body[i] for i in self._diff[0]]
        prefixes = {loop_prefix(it) for it in items}
        return prefixes.pop() if len(items) >= 2 and len(prefixes) == 1 and items[0].loops else None

    @cached_property
    def _equations(self):
        e0, e1 = item_at(self.before.body, self.site), item_at(self.after.body, self.site)
        if isinstance(e0, Equation) and isinstance(e1, Equation):
            return item_to_str(e0), item_to_str(e1)
        return None, None

    @cached_property
    def equation(self):
        return self._equations[0]

    @cached_property
    def equation_after(self):
        e0, e1 = self._equations
        return e1 if e1 != e0 else None

    @cached_property
    def n_equations(self):
        rem = self._diff[0]
        if len(rem) != 1:
            return None
        n = sum(1 for _ in equations((self.before.body[rem[0]],)))
        return n if n >= 2 else None

    # ---------------------------------------------------------------- tensors and references

    def _refs(self, body, name):
        return [r for _, eq in equations(body) for x in [eq.lhs, *refs(eq.rhs)] for r in refs(x) if r.name == name]

    @cached_property
    def retyped(self):
        """``T^{dtype,scope}`` of the one intermediate whose scopes change to a single one."""
        known = {d.name for d in self.before.known}
        out = []
        for n in tensor_names(self.before.body):
            if n in known:
                continue
            s0 = {r.scope for r in self._refs(self.before.body, n)}
            s1 = {r.scope for r in self._refs(self.after.body, n)}
            if s1 and s0 != s1 and len(s1) == 1:
                out.append(n)
        if len(out) != 1:
            return None
        r = self._refs(self.after.body, out[0])[0]
        return f"{r.name}^{{{r.dtype},{r.scope}}}"

    @cached_property
    def _relaid(self):
        """(first reference before, after) of the one intermediate whose references change."""
        known = {d.name for d in self.before.known}
        changed = []
        for n in tensor_names(self.before.body):
            r0, r1 = self._refs(self.before.body, n), self._refs(self.after.body, n)
            if n not in known and r0 and r1 and [ref_to_str(r) for r in r0] != [ref_to_str(r) for r in r1]:
                changed.append((ref_to_str(r0[0]), ref_to_str(r1[0])))
        return changed[0] if len(changed) == 1 else (None, None)

    @cached_property
    def ref_before(self):
        return self._relaid[0]

    @cached_property
    def ref_after(self):
        return self._relaid[1]

    def _copy_eqs(self, reading: bool) -> list[str]:
        """Added equations ``N=T`` (reading) or ``T=N`` (writing), N the one new tensor."""
        n, out = self.new_tensor, []
        if n is None:
            return out
        for it in self._added_items:
            for _, eq in equations((it,)):
                if not isinstance(eq.rhs, Ref):
                    continue
                new_side, old_side = (eq.lhs.name, eq.rhs.name) if reading else (eq.rhs.name, eq.lhs.name)
                if new_side == n and old_side != n:
                    out.append(item_to_str(eq))
        return out

    @cached_property
    def read_copy(self):
        found = self._copy_eqs(True)
        return found[0] if len(found) == 1 else None

    @cached_property
    def write_copy(self):
        found = self._copy_eqs(False)
        return found[0] if len(found) == 1 else None

    def _one_computation(self):
        """The single equation of the one ``computes`` statement, or None."""
        if not self.computes or len(self.computes) != 1:
            return None
        it = next(i for i, t in zip(self._added_items, self.added) if t == self.computes[0])
        eqs = [eq for _, eq in equations((it,))]
        return eqs[0] if len(eqs) == 1 else None

    @cached_property
    def common(self):
        eq = self._one_computation()
        text = expr_to_str(eq.rhs) if eq is not None else None
        return text if text is not None and all(text in s for s in self.removed or ()) else None

    @cached_property
    def index(self):
        eq = self._one_computation()
        if eq is None or self.new_tensor is None or eq.lhs.name != self.new_tensor:
            return None
        return self.common

    # ---------------------------------------------------------------- statements moved

    @cached_property
    def _swap(self):
        b, a = self.b, self.a
        lo = 0
        while lo < min(len(a), len(b)) and a[lo] == b[lo]:
            lo += 1
        hi_b, hi_a = len(b), len(a)
        while hi_b > lo and hi_a > lo and a[hi_a - 1] == b[hi_b - 1]:
            hi_b, hi_a = hi_b - 1, hi_a - 1
        if hi_b - lo == 2 and hi_a - lo == 2 and b[lo] == a[lo + 1] and b[lo + 1] == a[lo]:
            return b[lo], b[lo + 1]
        return None, None

    @cached_property
    def first(self):
        return self._swap[0]

    @cached_property
    def second(self):
        return self._swap[1]

    # ---------------------------------------------------------------- loops

    @cached_property
    def _loop_diff(self):
        n0, n1 = self._nests
        if n0 is None or n1 is None:
            return None
        l0 = [(l.kind, l.var, l.extent) for l in n0.loops]
        l1 = [(l.kind, l.var, l.extent) for l in n1.loops]
        gone = [x for x in l0 if x not in l1]
        new = [x for x in l1 if x not in l0]
        return l0, l1, gone, new

    @cached_property
    def loop_from(self):
        d = self._loop_diff
        if not d or not d[2] or not d[3]:
            return None
        if math.prod(x[2] for x in d[2]) != math.prod(x[2] for x in d[3]):
            return None
        return [(v, n) for _, v, n in d[2]]

    @cached_property
    def loop_to(self):
        d = self._loop_diff
        return [(v, n) for _, v, n in d[3]] if self.loop_from else None

    @cached_property
    def swapped(self):
        d = self._loop_diff
        if not d:
            return None
        l0, l1 = d[0], d[1]
        pos = [i for i in range(min(len(l0), len(l1))) if l0[i] != l1[i]]
        if len(l0) == len(l1) and len(pos) == 2 and l0[pos[0]] == l1[pos[1]] and l0[pos[1]] == l1[pos[0]]:
            return [l0[pos[0]][1], l0[pos[1]][1]]
        return None

    @cached_property
    def _changed_loop(self):
        """((kind, var, extent) before, after) of the one loop of the nest that changes, keeping
        its extent and position."""
        d = self._loop_diff
        if not d or len(d[0]) != len(d[1]):
            return None
        pos = [i for i in range(len(d[0])) if d[0][i] != d[1][i]]
        if len(pos) != 1 or d[0][pos[0]][2] != d[1][pos[0]][2]:
            return None
        return d[0][pos[0]], d[1][pos[0]]

    @cached_property
    def loop_kind(self):
        c = self._changed_loop
        return c[1][0] if c and c[1][0] != c[0][0] and c[1][0] in KIND_WORDS else None

    @cached_property
    def bound_var(self):
        c = self._changed_loop
        if not c:
            return None
        (_, v0, _), (k1, v1, _) = c
        old = {v for _, v, _ in self._loop_diff[0]}
        return v1 if k1 == "B" and v1 != v0 and v1 not in old and v1[:2] in TAGS else None

    @cached_property
    def _split(self):
        """(loop, extent, [iterations of each computation]) of a loop whose iterations the added
        computations divide among themselves (the reassembly runs it at most once)."""
        n0 = self._nests[0]
        if n0 is None or not self.computes or not self.assembles:
            return None, None, None
        comp = [i for i, t in zip(self._added_items, self.added) if t in self.computes]
        asm = [i for i, t in zip(self._added_items, self.added) if t in self.assembles]
        for l in n0.loops:
            ext = []
            for it in comp:
                m = [x.extent for x in it.loops if x.var == l.var]
                ext.append(m[0] if len(m) == 1 else None)
            if None in ext or sum(ext) != l.extent or len(ext) < 2:
                continue
            if any(x.var == l.var and x.extent > 1 for it in asm for x in it.loops):
                continue
            return l.var, l.extent, ext
        return None, None, None

    @cached_property
    def split_axis(self):
        return self._split[0]

    @cached_property
    def split_extent(self):
        return self._split[1]

    @cached_property
    def split_parts(self):
        return self._split[2]

    # ---------------------------------------------------------------- dead code

    @cached_property
    def dead(self):
        if self.added or not self.removed:
            return None
        items = [self.before.body[i] for i in self._diff[0]]
        return list(dict.fromkeys(n for it in items for n in written(it))) or None


_missing = sorted(f for f in FACTS if not hasattr(Facts, f) and f != "name")
assert not _missing, f"facts without an implementation: {_missing}"


# --------------------------------------------------------------------------- rendering


def slot_text(slot: Slot, facts: Facts, params) -> str | None:
    """The slot's text for this step, or None when its fact or parameter does not hold."""
    value = params.get(slot.name) if slot.param else getattr(facts, slot.name)
    return None if value is None else FORMATS[slot.format].write(value)


def fill(template, facts: Facts, params) -> str | None:
    """The template with every slot written, or None when one of them does not hold."""
    out = []
    for piece in template.pieces():
        text = slot_text(piece, facts, params) if isinstance(piece, Slot) else piece
        if text is None:
            return None
        out.append(text)
    return "".join(out)


def instance_part(strategy, before, after, step, facts: Facts | None = None) -> str:
    """The instance sentence of a step (``strategy``: its rule block; ``step``: has ``rule``,
    ``site``, ``params``), from the first template whose slots all hold."""
    facts = facts or Facts(strategy.name, before, after, step.site)
    params = dict(step.params)
    for tpl in applicable(strategy.cot, step.rule):
        text = fill(tpl, facts, params)
        if text is not None:
            return text
    raise CotError(f"no template of {strategy.name} fits the step of {step.rule} at site {list(step.site)}")


def render(strategy, before, after, step) -> str:
    """The full trace of one step: the block's description sentence, the instance part, then what
    the step can improve here (one sentence per ``@benefit``, ``dataset.text.benefit``)."""
    from .benefit import benefit_sentences
    facts = Facts(strategy.name, before, after, step.site)
    return (description_sentence(strategy.name, strategy.meta["description"]) + INSTANCE_OPENING
            + instance_part(strategy, before, after, step, facts)
            + benefit_sentences(strategy.benefit, facts, dict(step.params), fill))
