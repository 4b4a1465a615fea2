"""Chain-of-thought traces rendered from the rule that made a step (dataset.md 5).

A trace is two parts: the strategy's description sentence, taken verbatim from its rule block
(``The strategy loop split is used on the given IR: it divides one loop ...``), then an
instance part, `` Under the given IR, ...``, that quotes the concrete statements, loops,
tensors and factors of this step. The instance part follows the reference's sentence shapes
(dataset.md 5.2), but its content comes from structure, never from strings: the step's site
(a path into the body) locates the statement, nest and equation the rule matched; the changed
statements come from an alignment of the two programs' statement lists (so a statement that
occurs twice, or a move that leaves every text unchanged, is handled); new tensors and loops,
scopes, extents and factors are read off the two ASTs.

Each strategy has a list of templates, tried in order; a template whose slots cannot all be
filled truthfully for this step is skipped, and a generic template closes every list. The
same table is what ``dataset.claims`` parses a trace back with, re-deriving every slot's claim
independently from the two programs (``python -m dataset.check``).
"""
from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

from engine.leir.ast import Equation, Nest, Ref, equations, refs
from engine.leir.printer import expr_to_str, item_to_str, loop_to_str, ref_to_str

SCOPE_WORDS = {"g": "global", "s": "shared", "l": "local"}
TAGS = {"tx": "threadIdx.x", "ty": "threadIdx.y", "tz": "threadIdx.z",
        "bx": "blockIdx.x", "by": "blockIdx.y", "bz": "blockIdx.z"}
ANNOTATIONS = {"loop_unrolling": ("unrolled", "U"), "loop_parallelization": ("parallelized", "P"),
               "loop_vectorization": ("vectorized", "V")}
SPLIT_KINDS = {"exponential_split": "an exponential", "multiplicative_split": "a multiplicative",
               "additive_split": "an additive"}
LOOP_VERBS = {"loop_tiling": "tiled", "loop_split": "split", "loop_fusion": "fused"}
ALGEBRAIC = ("factorization", "expand_factorization", "cancellation", "expand_cancellation", "apart", "together",
             "powsimp", "expand_powsimp", "logsimp", "expand_log", "collect", "expand_collect")


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


@dataclass(frozen=True)
class Format:
    """How a slot's value is written in a trace, matched and read back."""

    regex: str
    write: object          # value -> text
    read: object           # text -> value


FORMATS = {
    "text": Format(_Q, lambda v: quote(v), lambda t: t[1:-1]),
    "texts": Format(_list_re(_Q), lambda v: join([quote(x) for x in v]), _split_list),
    "int": Format(_INT, str, int),
    "ints": Format(_list_re(_INT), lambda v: join([str(x) for x in v]), lambda t: [int(x) for x in re.findall(r"\d+", t)]),
    "loops": Format(_list_re(_LOOP), lambda v: join([f"`{var}` of extent {n}" for var, n in v]),
                    lambda t: [(m[0], int(m[1])) for m in re.findall(r"`([a-z][a-z0-9]*)` of extent (\d+)", t)]),
    "word": Format(r"[A-Za-z][A-Za-z.]*", str, str),
    "phrase": Format(r"[a-z][a-z ]*[a-z]", str, str),
}

# slot -> format; a slot's value comes from ``Facts.<slot>`` (None: the template does not fit)
SLOTS = {
    "removed": "texts", "added": "texts", "stmt": "text", "stmt_after": "text",
    "loops": "text", "loops_after": "text", "shared_loops": "text",
    "equation": "text", "equation_after": "text", "n_equations": "int",
    "new_tensors": "texts", "new_tensor": "text", "gone_tensor": "text", "tensor": "text",
    "copies": "texts", "computes": "texts", "assembles": "texts", "rest": "texts",
    "common": "text", "index": "text", "copy_eq": "text", "scope": "word",
    "ref_before": "text", "ref_after": "text", "first": "text", "second": "text",
    "axis": "text", "extent": "int", "parts": "ints", "swapped": "texts",
    "loop_from": "loops", "loop_to": "loops", "factor": "int", "bound_var": "text", "tag": "word",
    "name": "phrase", "dead": "texts",
}

GENERIC = ["{removed} can be rewritten as {added}.", "{removed} can be removed.", "{added} can be added."]

_MERGE_SPLIT = "for the similar statements {removed}, the inputs are concatenated by {copies}, "
TEMPLATES: dict[str, list[str]] = {
    "operator_fusion": ["the consecutive statements {removed} have the same loop nest {shared_loops} and are "
                        "fused into {added}."],
    "operator_fission": ["{removed} with {n_equations} equations is split into {added}."],
    "compute_inline": ["{removed} have the same loop nest {shared_loops} and related equations, and are merged "
                       "into {added}.",
                       "{removed} are related through the tensor {gone_tensor}, which is inlined, and are merged "
                       "into {added}."],
    "expression_splitting": ["{removed} with a merged equation is split into {added}, introducing {new_tensors}."],
    "tensor_concat_to_fuse_operators": [_MERGE_SPLIT + "the operation is executed by {computes}, and the output is "
                                        "split by {assembles}."],
    "tensor_split_to_decouple_operators": [
        "for {removed}, the inputs are split by {copies}, the operations are executed by {computes}, and the "
        "outputs are reassembled by {assembles}.",
        "for {removed}, the operations are executed by {computes}, and the outputs are reassembled by "
        "{assembles}."],
    "common_subexpression_elimination": ["the common part {common} of {removed} is computed once by {computes} "
                                         "and reused, giving {rest}."],
    "expression_reorder": ["the statements {first} and {second} are independent and can be reordered, so that "
                           "{second} comes first."],
    "loop_reorder": ["the loops {loops} of {stmt} can be reordered as loops {loops_after} in {stmt_after}: the "
                     "loops {swapped} exchange their positions."],
    "loop_split": ["the loops {loops} of {stmt} can be split as loops {loops_after} in {stmt_after}: {loop_from} "
                   "becomes {loop_to}, a split by a factor of {factor}.",
                   "the loops {loops} of {stmt} can be split as loops {loops_after} in {stmt_after}: {loop_from} "
                   "becomes {loop_to}."],
    "loop_tiling": ["the loops {loops} of {stmt} can be tiled as loops {loops_after} in {stmt_after}: {loop_from} "
                    "become {loop_to}."],
    "loop_fusion": ["the loops {loops} of {stmt} can be fused as loops {loops_after} in {stmt_after}: {loop_from} "
                    "become {loop_to}."],
    "loop_binding": ["one loop axis {axis} in loops {loops} of {stmt} can be bound to {tag} as {bound_var}; the "
                     "loops become {loops_after} of {stmt_after}."],
    "reduction_factorization": ["the reduction axis {axis} of extent {extent} in loops {loops} of {stmt} can be "
                                "split into the partial reductions {computes} over {parts} of its iterations, "
                                "whose results are combined by {assembles}."],
    "cache_read_write": ["the variable {tensor} in {removed} can be read into {scope} memory as {new_tensor} by "
                         "the copy equation {copy_eq}, giving {added}.",
                         "the variable {tensor} in {removed} can be written from {scope} memory {new_tensor} by "
                         "the copy equation {copy_eq}, giving {added}."],
    "layout_transformation": ["the memory layout of {tensor} can be transformed as the variable {new_tensor} by "
                              "{copies}, so that {removed} becomes {rest}."],
    "set_storage_scope": ["the intermediate variable {tensor} can be set in {scope} memory as {ref_after}; every "
                          "occurrence of {tensor} is updated."],
    "set_storage_layout": ["the memory layout of the intermediate variable {tensor} can be set directly by "
                           "updating its subscripts from {ref_before} to {ref_after}; all occurrences of {tensor} "
                           "are updated consistently."],
    "precompute_indices": ["the index {index} in {removed} can be precomputed as the variable {new_tensor} by "
                           "{computes}, giving {rest}."],
    "normal_loop_max_to_prefix_max": ["for {removed} with the max operation, the online streaming method "
                                      "initialises the prefix maximum {new_tensors} and updates it step by step by "
                                      "{computes}, and the result is written by {assembles}."],
    "normal_loop_summation_on_exp_to_prefix_summation_on_exp": [
        "for the max and the summation over exp {removed}, the streaming updates of {new_tensors} are made by "
        "{computes}, and the outputs are written by {assembles}."],
    "online_softmax": ["for the softmax statements {removed}, online softmax is realised by {computes}, and the "
                       "output is written by {assembles}."],
    "flashattention_wo_tiling": ["for the softmax statements and the matmul {removed}, flash attention without "
                                 "tiling is realised by {computes}, and the output is written by {assembles}."],
    "normal_matmul_to_prefix_matmul_based_on_online_softmax": [
        "for the online softmax statements and the matmul {removed}, the online method is realised by {computes}, "
        "and the output is written by {assembles}."],
    "partially_equivalent_then_correct": [_MERGE_SPLIT + "the fused computation is executed by {computes}, and "
                                          "the outputs are split and corrected by {assembles}."],
    "dead_code_elimination": ["{removed} writes {dead}, which no later statement reads and no output holds, so it "
                              "can be removed."],
}
for _s, (_word, _kind) in ANNOTATIONS.items():
    TEMPLATES[_s] = ["one loop axis {axis} in loops {loops} of {stmt} can be " + _word + "; the loops become "
                     "{loops_after} of {stmt_after}."]
for _s in ALGEBRAIC:
    TEMPLATES[_s] = ["the equation {equation} in {stmt} can use the {name} strategy to transform as "
                     "{equation_after}."]
for _s, _kind in SPLIT_KINDS.items():
    TEMPLATES[_s] = ["for {equation} in {stmt}, " + _kind + " term of {tensor} can be split from the "
                     "equation, so that {equation_after} is obtained."]


def templates_for(strategy: str) -> list[str]:
    return TEMPLATES.get(strategy, []) + GENERIC


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
    """What a step did, read off the two programs and the site: the renderer's slot values."""

    def __init__(self, strategy: str, before, after, site, rule: str = ""):
        self.strategy, self.before, self.after, self.site = strategy, before, after, tuple(site)
        self.rule = rule
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
        return self._classes()[0] or None

    @cached_property
    def computes(self):
        return self._classes()[1] or None

    @cached_property
    def assembles(self):
        return self._classes()[2] or None

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
        return self._equations[1]

    @cached_property
    def n_equations(self):
        rem = self._diff[0]
        if len(rem) != 1:
            return None
        n = sum(1 for _ in equations((self.before.body[rem[0]],)))
        return n if n >= 2 else None

    # ---------------------------------------------------------------- tensors and references

    @cached_property
    def tensor(self):
        """The one existing tensor the step is about."""
        s = self.strategy
        if s in SPLIT_KINDS:
            return self._pivot_tensor()
        if s == "set_storage_scope":
            return self._scope_change()[0]
        if s == "set_storage_layout":
            return self._layout_change()[0]
        if s in ("cache_read_write", "layout_transformation"):
            return self._copy_partner()[0]
        return None

    def _refs(self, body, name):
        return [r for _, eq in equations(body) for x in [eq.lhs, *refs(eq.rhs)] for r in refs(x) if r.name == name]

    def _pivot_tensor(self):
        """The tensor whose references the equation gained (the split introduces its pivot)."""
        if self.equation is None:
            return None
        e0, e1 = item_at(self.before.body, self.site), item_at(self.after.body, self.site)
        c0 = Counter(r.name for r in refs(e0.rhs))
        c1 = Counter(r.name for r in refs(e1.rhs))
        names = [n for n in c1 if c1[n] > c0.get(n, 0) and n in c0]
        return names[0] if len(names) == 1 else None

    @cached_property
    def _scope_change_cache(self):
        known = {d.name for d in self.before.known}
        out = []
        for n in tensor_names(self.before.body):
            if n in known:
                continue
            s0 = {r.scope for r in self._refs(self.before.body, n)}
            s1 = {r.scope for r in self._refs(self.after.body, n)}
            if s1 and s0 != s1 and len(s1) == 1:
                out.append((n, s1.pop()))
        return out

    def _scope_change(self):
        c = self._scope_change_cache
        return c[0] if len(c) == 1 else (None, None)

    def _layout_change(self):
        known = {d.name for d in self.before.known}
        changed = []
        for n in tensor_names(self.before.body):
            r0, r1 = self._refs(self.before.body, n), self._refs(self.after.body, n)
            if n not in known and r0 and r1 and [ref_to_str(r) for r in r0] != [ref_to_str(r) for r in r1]:
                changed.append((n, ref_to_str(r0[0]), ref_to_str(r1[0])))
        return changed[0] if len(changed) == 1 else (None, None, None)

    def _copy_partner(self):
        """(existing tensor, copy equation text, 'read'|'write') of a cache/layout copy: ``N=T``
        reads T into the new N, ``T=N`` writes T back from it. When a step makes both (a pure
        copy statement staged through N), the rule's name says which it is (``.../write``);
        otherwise the read."""
        n = self.new_tensor
        if n is None:
            return None, None, None
        found = {}
        for it in self._added_items:
            for _, eq in equations((it,)):
                if isinstance(eq.rhs, Ref) and eq.lhs.name == n and eq.rhs.name != n:
                    found.setdefault("read", []).append((eq.rhs.name, item_to_str(eq), "read"))
                elif isinstance(eq.rhs, Ref) and eq.rhs.name == n and eq.lhs.name != n:
                    found.setdefault("write", []).append((eq.lhs.name, item_to_str(eq), "write"))
        order = ("write", "read") if self.rule.endswith("/write") else ("read", "write")
        for kind in order:
            if len(found.get(kind, ())) == 1:
                return found[kind][0]
        return None, None, None

    @cached_property
    def scope(self):
        if self.strategy == "set_storage_scope":
            code = self._scope_change()[1]
        elif self.new_tensor is not None:
            sc = {r.scope for r in self._refs(self.after.body, self.new_tensor)}
            code = sc.pop() if len(sc) == 1 else None
        else:
            code = None
        return SCOPE_WORDS.get(code) if code else None

    @cached_property
    def copy_eq(self):
        return self._copy_partner()[1]

    def cache_direction(self):
        return self._copy_partner()[2]

    @cached_property
    def ref_before(self):
        return self._layout_change()[1]

    @cached_property
    def ref_after(self):
        if self.strategy == "set_storage_scope":
            n = self.tensor
            rs = self._refs(self.after.body, n) if n else []
            return f"{rs[0].name}^{{{rs[0].dtype},{rs[0].scope}}}" if rs else None
        return self._layout_change()[2]

    @cached_property
    def rest(self):
        """Added statements that are neither copies nor new-tensor computations (what the
        rewritten computation became)."""
        if self.strategy == "layout_transformation":
            cp = set(self.copies or ())
            out = [t for t in self.added or [] if t not in cp]
        else:
            cm = set(self.computes or ())
            out = [t for t in self.added or [] if t not in cm]
        return out or None

    @cached_property
    def common(self):
        if not self.computes or len(self.computes) != 1:
            return None
        it = next(i for i, t in zip(self._added_items, self.added) if t == self.computes[0])
        eqs = [eq for _, eq in equations((it,))]
        if len(eqs) != 1:
            return None
        text = expr_to_str(eqs[0].rhs)
        return text if all(text in s for s in self.removed or ()) else None

    @cached_property
    def index(self):
        if not self.computes or len(self.computes) != 1 or self.new_tensor is None:
            return None
        it = next(i for i, t in zip(self._added_items, self.added) if t == self.computes[0])
        eqs = [eq for _, eq in equations((it,))]
        if len(eqs) != 1 or eqs[0].lhs.name != self.new_tensor:
            return None
        text = expr_to_str(eqs[0].rhs)
        return text if all(text in s for s in self.removed or ()) else None

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
    def factor(self):
        if not self.loop_from or len(self.loop_from) != 1 or len(self.loop_to) != 2:
            return None
        var = self.loop_from[0][0]
        same = [n for v, n in self.loop_to if v == var]
        return same[0] if len(same) == 1 else None

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
    def axis(self):
        d = self._loop_diff
        if self.strategy == "reduction_factorization":
            return self._reduction()[0]
        if not d or len(d[0]) != len(d[1]):
            return None
        pos = [i for i in range(len(d[0])) if d[0][i] != d[1][i]]
        if len(pos) != 1:
            return None
        (_, v0, n0), (k1, v1, n1) = d[0][pos[0]], d[1][pos[0]]
        if n0 != n1:
            return None
        if self.strategy in ANNOTATIONS and v0 == v1 and k1 == ANNOTATIONS[self.strategy][1]:
            return v0
        if self.strategy == "loop_binding" and k1 == "B" and v1 != v0 and v1[:2] in TAGS:
            return v0
        return None

    @cached_property
    def bound_var(self):
        d = self._loop_diff
        if self.axis is None or self.strategy != "loop_binding":
            return None
        return next(v for (_, v, _), (_, v0, _) in zip(d[1], d[0]) if v0 == self.axis)

    @cached_property
    def tag(self):
        return TAGS.get(self.bound_var[:2]) if self.bound_var else None

    def _reduction(self):
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
    def extent(self):
        return self._reduction()[1] if self.strategy == "reduction_factorization" else None

    @cached_property
    def parts(self):
        return self._reduction()[2] if self.strategy == "reduction_factorization" else None

    # ---------------------------------------------------------------- dead code

    @cached_property
    def dead(self):
        if self.added or not self.removed:
            return None
        items = [self.before.body[i] for i in self._diff[0]]
        return list(dict.fromkeys(n for it in items for n in written(it))) or None


def _fits(template: str, facts: Facts) -> dict | None:
    values = {}
    for slot in re.findall(r"\{(\w+)\}", template):
        if slot not in values:
            v = getattr(facts, slot)
            if v is None:
                return None
            values[slot] = v
    return values


def _direction_ok(strategy: str, template: str, facts: Facts) -> bool:
    if strategy == "cache_read_write":
        return ("read into" in template) == (facts.cache_direction() == "read")
    return True


def instance_part(strategy: str, before, after, site, rule: str = "") -> str:
    """The instance sentence of a step, from the first template whose slots all hold."""
    facts = Facts(strategy, before, after, site, rule)
    for tpl in templates_for(strategy):
        values = _fits(tpl, facts)
        if values is None or not _direction_ok(strategy, tpl, facts):
            continue
        return tpl.format(**{k: FORMATS[SLOTS[k]].write(v) for k, v in values.items()})
    raise CotError(f"no template of {strategy} fits the step at site {list(site)}")


def render(strategy: str, description: str, before, after, site, rule: str = "") -> str:
    """The full trace of one step: description sentence plus instance part."""
    return (description_sentence(strategy, description) + INSTANCE_OPENING
            + instance_part(strategy, before, after, site, rule))
