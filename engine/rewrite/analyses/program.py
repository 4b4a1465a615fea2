"""Python-computed analysis relations, inserted as egglog facts per query: the registry of the
analyses (``ANALYSES``), each in one shape: the relations it provides and its facts of a program.

The relations are declared (with their precondition number) in the relations files of
rules/leir/. They are computed here rather than in egglog because they need negation ("no
other equation reads X"), affine index reasoning or whole-program def-use, which are a few
lines of exact Python and cost microseconds, while egglog queries cannot negate.

Facts about a Nest are keyed by its e-class. Hash-consing gives identical nests one e-class,
so a fact is inserted only when it holds at EVERY position where that nest occurs: a step
expanded to all positions then stays sound.

Adding an analysis is adding an ``Analysis`` to ``ANALYSES`` (and declaring its relations in the
rule files); an engine runs only the analyses providing a relation some loaded rule reads.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from engine.leir.ast import Nest, refs
from engine.rewrite.analyses.attention import attention_facts
from engine.rewrite.analyses.common import cuts, divisors, nest_equations
from engine.rewrite.analyses.graph import graph_facts
from engine.rewrite.analyses.loops import nest_facts
from engine.rewrite.analyses.memory import memory_dce_facts
from engine.rewrite.analyses.partial import partial_facts
from engine.rewrite.analyses.tensor import tensor_facts
from engine.rewrite.analyses.values import size_facts, value_facts


@dataclass
class Found:
    """The facts the analyses found about one program (a relation's name first in every fact)."""

    glob: list = field(default_factory=list)       # (relation, args...) about the program
    nests: dict = field(default_factory=dict)      # nest key -> {(relation, args...)}, the nest argument left out
    pairs: list = field(default_factory=list)      # (relation, key of nest i, key of nest j, args...), top level
    repeated: list = field(default_factory=list)   # ("Repeated", expression key): expressions occurring twice or more


@dataclass(frozen=True)
class Analysis:
    """One analysis: ``facts(program, enc, found)`` adds its facts to ``found``; every fact names
    one of the relations it ``provides``. ``static``: its facts are pure functions of their
    integer arguments, true in every program (an engine keeps them once inserted)."""

    name: str                       # the rule files whose guards read it
    provides: frozenset
    facts: Callable
    static: bool = False


def loop_nest_facts(program, enc, found: Found) -> None:
    """Each nest's own facts (engine.rewrite.analyses.loops), those true at every occurrence."""
    for key, paths in enc.item_paths.items():
        node = enc.orig[key]
        if isinstance(node, Nest):
            acc = None
            for p in paths:
                f = nest_facts(node, _outer(program, p), len(p) == 1)
                acc = f if acc is None else acc & f
            found.nests[key] = acc


def _outer(program, path) -> tuple:
    loops: tuple = ()
    items = program.body
    for i in path[:-1]:
        n = items[i]
        loops += n.loops
        items = n.body
    return loops


def extent_facts(program, enc, found: Found) -> None:
    """(Divisor n f) and (Cut n c) for every loop extent n of the program."""
    extents = {l.extent for n in walk_nests(program.body) for l in n.loops}
    for n in sorted(extents):
        for f in divisors(n):
            found.glob.append(("Divisor", n, f))
        for c in cuts(n):
            found.glob.append(("Cut", n, c))


def walk_nests(items):
    for it in items:
        if isinstance(it, Nest):
            yield it
            yield from walk_nests(it.body)


def role_facts(program, enc, found: Found) -> None:
    for name, buf in program.info.buffers.items():
        found.glob.append(("Intermediate", name) if buf.role == "intermediate" else ("KnownTensor", name))


def dependence_facts(program, enc, found: Found) -> None:
    """Top-level dependences (precondition 2) and loop-nest consistency (4)."""
    body = program.body
    ws = [{eq.lhs.name for _, eq in nest_equations(n, ())} for n in body]
    rs = [{r.name for _, eq in nest_equations(n, ()) for r in list(refs(eq.rhs)) +
           [r for i in eq.lhs.index for r in refs(i)]} for n in body]
    keys = [enc.path_key[(i,)] for i in range(len(body))]
    pair = found.pairs
    for i in range(len(body)):
        for j in range(i + 1, len(body)):
            raw, war, waw = ws[i] & rs[j], rs[i] & ws[j], ws[i] & ws[j]
            for x in sorted(raw):
                pair.append(("RAW", keys[i], keys[j], x))
            for x in sorted(war):
                pair.append(("WAR", keys[i], keys[j], x))
            for x in sorted(waw):
                pair.append(("WAW", keys[i], keys[j], x))
            if j == i + 1:
                pair.append(("Adjacent", keys[i], keys[j]))
                if not (raw or war or waw):
                    pair.append(("Independent", keys[i], keys[j]))
                if body[i].loops == body[j].loops:
                    pair.append(("SameLoops", keys[i], keys[j]))


def repeated_facts(program, enc, found: Found) -> None:
    """Operation identity (precondition 3): expressions occurring twice or more."""
    found.repeated.extend(("Repeated", k) for k, c in sorted(enc.counts.items()) if c >= 2)


def _rels(names: str) -> frozenset:
    return frozenset(names.split())


# In this order: the facts of one kind (program, pair) are inserted in the order they are found.
ANALYSES: tuple[Analysis, ...] = (
    Analysis("loop nests (rules/operator.egg and most guards)",
             _rels("Writes Reads ReductionAxis IndexOnly ReduceForm OwnedLhs Pointwise ParallelAxis Reorderable "
                   "FusableLoops LoopTag FreeTag ThreadProduct NoParallel"), loop_nest_facts),
    Analysis("extents", _rels("Divisor Cut"), extent_facts, static=True),
    Analysis("roles", _rels("Intermediate KnownTensor"), role_facts),
    Analysis("dependences", _rels("RAW WAR WAW Adjacent Independent SameLoops"), dependence_facts),
    Analysis("repeated expressions", _rels("Repeated"), repeated_facts),
    Analysis("rules/attention.egg", _rels("PrefixAxis DeadAfter ReadRenamed ReadFinal"), attention_facts),
    Analysis("rules/memory.egg, rules/dce.egg",
             _rels("WholeCopy CacheWriteOK TensorDim DimSplit TensorScope TensorRank FirstUse ScopeOK CopyOK CacheOK "
                   "Dead TableVar"), memory_dce_facts),
    Analysis("rules/math.egg and every reassociating rule", _rels("FiniteTensor InexactOK InexactWrites"),
             value_facts),
    Analysis("tensor sizes (rules/cpu.egg, attention.egg)", _rels("TensorElems"), size_facts),
    Analysis("rules/graph.egg", _rels("FlatNest FissionCut Fusible SplitHost InlineProducer CommuteDisjoint"),
             graph_facts),
    Analysis("rules/graph.egg: tensor concat / split (S5/S6)", _rels("TensorSplitAxis TensorConcatAxis"),
             tensor_facts),
    Analysis("rules/partial.egg", _rels("PadConv"), partial_facts),
)

PROVIDED: frozenset = frozenset().union(*(a.provides for a in ANALYSES))
STATIC_RELATIONS: frozenset = frozenset().union(*(a.provides for a in ANALYSES if a.static))


def program_facts(program, enc, wanted=None) -> Found:
    """The facts of the analyses providing a relation in ``wanted`` (None: of every analysis)."""
    found = Found()
    for a in ANALYSES:
        if wanted is None or not a.provides.isdisjoint(wanted):
            a.facts(program, enc, found)
    return found
