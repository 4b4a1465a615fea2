"""Python-computed analysis relations, inserted as egglog facts per query: the whole program's
facts, gathered from each family's module.

The relations are declared (with their precondition number) in rules/leir.egg. They are
computed here rather than in egglog because they need negation ("no other equation reads
X"), affine index reasoning or whole-program def-use, which are a few lines of exact Python
and cost microseconds, while egglog queries cannot negate.

Facts about a Nest are keyed by its e-class. Hash-consing gives identical nests one e-class,
so a fact is inserted only when it holds at EVERY position where that nest occurs: a step
expanded to all positions then stays sound.
"""
from __future__ import annotations

from engine.leir.ast import Nest, refs
from engine.rewrite.analyses.common import (divisors, cuts, nest_equations)
from engine.rewrite.analyses.loops import nest_facts
from engine.rewrite.analyses.attention import attention_facts
from engine.rewrite.analyses.memory import memory_dce_facts
from engine.rewrite.analyses.partial import partial_facts
from engine.rewrite.analyses.graph import graph_facts
from engine.rewrite.analyses.tensor import tensor_facts
from engine.rewrite.analyses.values import value_facts


# ------------------------------------------------------------------ whole program


def program_facts(program, enc):
    """(global facts, {nest key: facts}, pair facts, repeated-expression keys).

    Global facts are tuples (relation, args...); nest facts omit the nest argument; pair
    facts name top-level nests by key.
    """
    expr_counts = enc.counts
    glob: list[tuple] = []
    extents: set[int] = set()
    per_key: dict[int, set] = {}

    def visit(nest, outer, path, top):
        for l in nest.loops:
            extents.add(l.extent)
        return nest_facts(nest, outer, top)

    occurrences: dict[int, list] = {}
    for key, paths in enc.item_paths.items():
        node = enc.orig[key]
        if isinstance(node, Nest):
            occurrences[key] = paths

    def outer_of(path):
        loops: tuple = ()
        items = program.body
        for i in path[:-1]:
            n = items[i]
            loops += n.loops
            items = n.body
        return loops

    for key, paths in occurrences.items():
        node = enc.orig[key]
        acc = None
        for p in paths:
            f = visit(node, outer_of(p), p, len(p) == 1)
            acc = f if acc is None else acc & f
        per_key[key] = acc

    for n in sorted(extents):
        for f in divisors(n):
            glob.append(("Divisor", n, f))
        for c in cuts(n):
            glob.append(("Cut", n, c))
    for name, buf in program.info.buffers.items():
        glob.append(("Intermediate", name) if buf.role == "intermediate" else ("KnownTensor", name))

    # top-level dependences (2) and loop-nest consistency (4)
    body = program.body
    ws = [{eq.lhs.name for _, eq in nest_equations(n, ())} for n in body]
    rs = [{r.name for _, eq in nest_equations(n, ()) for r in list(refs(eq.rhs)) +
           [r for i in eq.lhs.index for r in refs(i)]} for n in body]
    keys = [enc.path_key[(i,)] for i in range(len(body))]
    pair: list[tuple] = []
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
    # (3) operation identity
    rep = [("Repeated", k) for k, c in sorted(expr_counts.items()) if c >= 2]
    attention_facts(program, enc, per_key, pair)   # rules/attention.egg
    memory_dce_facts(program, enc, glob, per_key)  # rules/memory.egg, rules/dce.egg
    value_facts(program, enc, glob, per_key)       # rules/math.egg and every reassociating rule
    graph_facts(program, enc, per_key, pair)       # rules/graph.egg
    tensor_facts(program, enc, per_key, pair)      # rules/graph.egg: tensor concat / split (S5/S6)
    partial_facts(program, enc, pair)              # rules/partial.egg
    return glob, per_key, pair, rep
