"""Stratified schedule for the analysis ruleset: saturate it layer by layer, not all at once.

``(saturate (run analysis))`` runs every analysis rule in every iteration until nothing
changes; the iterations needed grow with the depth of the deepest term (list spines, nested
expressions), and each iteration pays a fixed cost per rule whether it matches or not. That
fixed cost, not matching, was the whole analysis phase of a query.

Datalog's answer is stratification: a rule only needs to run once everything it reads is
complete. Here rule A depends on rule B when B's actions write a table (relation, function
or constructor) that A's query reads. The strongly connected components of that graph, in
topological order, are the strata; each is saturated on its own before the next starts, so
recursive analyses iterate with only their own few rules. For monotone rules the fixpoint
is the same; for the rules that test a computed set (``set-not-contains``) it is the one the
rule meant, since the set is complete before the test runs.
"""
from __future__ import annotations

import egglog.bindings as b


def _calls(x, out: set) -> set:
    """Every call name in a bindings expression / fact / action (nested calls included)."""
    if isinstance(x, b.Call):
        out.add(x.name)
        for a in x.args:
            _calls(a, out)
    elif isinstance(x, b.Eq):
        _calls(x.left, out)
        _calls(x.right, out)
    elif isinstance(x, (b.Fact, b.Expr_)):
        _calls(x.expr, out)
    elif isinstance(x, b.Let):
        _calls(x.rhs, out)
    elif isinstance(x, b.Set):
        out.add(x.lhs)
        for a in x.args:
            _calls(a, out)
        _calls(x.rhs, out)
    elif isinstance(x, b.Union):
        _calls(x.lhs, out)
        _calls(x.rhs, out)
    elif isinstance(x, b.Change):
        out.add(x.sym)
        for a in x.args:
            _calls(a, out)
    return out


def queried_tables(command) -> set[str]:
    """Every call name in the query of a rule / rewrite command (what it reads), primitives
    included; empty for other commands."""
    out: set = set()
    if isinstance(command, b.RuleCommand):
        for f in command.rule.body:
            _calls(f, out)
    elif isinstance(command, (b.RewriteCommand, b.BiRewriteCommand)):
        _calls(command.rewrite.lhs, out)
        for f in command.rewrite.conditions:
            _calls(f, out)
    return out


def needed(rules: list[b.Rule], tables: set[str], wanted: set[str]) -> tuple[list[b.Rule], set[str]]:
    """The rules whose output is read, directly or through other kept rules, by a query that
    reads ``wanted``; and everything the kept rules and those queries read. An engine that
    loads a few strategies runs (and clones at every push) only the analyses they use."""
    rw = [reads_writes(r, tables) for r in rules]
    want = set(wanted)
    keep = [False] * len(rules)
    changed = True
    while changed:
        changed = False
        for i, (reads, writes) in enumerate(rw):
            if not keep[i] and writes & want:
                keep[i] = changed = True
                want |= reads
    return [r for r, k in zip(rules, keep) if k], want


def reads_writes(rule: b.Rule, tables: set[str]) -> tuple[set[str], set[str]]:
    """(tables the rule's query reads, tables its actions write or read)."""
    reads: set = set()
    for f in rule.body:
        _calls(f, reads)
    writes: set = set()
    for a in rule.head:
        _calls(a, writes)
    return reads & tables, writes & tables


def strata(rules: list[b.Rule], tables: set[str]) -> list[tuple[list[b.Rule], bool]]:
    """The rules as a schedule of (rules, recursive) steps, dependencies first: a recursive
    step is one strongly connected component of the read-after-write graph, to saturate; a
    flat step holds every acyclic component of one depth, to run once. File order inside."""
    n = len(rules)
    rw = [reads_writes(r, tables) for r in rules]
    succ = [[j for j in range(n) if rw[i][1] & rw[j][0]] for i in range(n)]   # i writes what j reads
    # Tarjan, iterative
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in range(n):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on.add(v)
            recurse = False
            for k in range(i, len(succ[v])):
                w = succ[v][k]
                if w not in index:
                    work.append((v, k + 1))
                    work.append((w, 0))
                    recurse = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
    # Tarjan emits components in reverse topological order of the successor graph; order them
    # topologically with the smallest file position first among the ready ones
    comp_of = {v: c for c, comp in enumerate(comps) for v in comp}
    preds = {c: set() for c in range(len(comps))}
    for v in range(n):
        for w in succ[v]:
            if comp_of[v] != comp_of[w]:
                preds[comp_of[w]].add(comp_of[v])
    # by longest-path depth: a component reads only components of smaller depth. Components
    # without a cycle need ONE iteration once their inputs are complete, so those of equal
    # depth run together, once; each recursive component saturates on its own rules.
    depth: dict = {}
    while len(depth) < len(comps):
        for c in range(len(comps)):
            if c not in depth and all(p in depth for p in preds[c]):
                depth[c] = 1 + max((depth[p] for p in preds[c]), default=-1)
    out: list[tuple[list, bool]] = []
    for d in range(1 + max(depth.values(), default=-1)):
        at = sorted((c for c in comps_at(depth, d)), key=lambda c: comps[c][0])
        flat = [v for c in at if not _recursive(comps[c], succ) for v in comps[c]]
        if flat:
            out.append(([rules[v] for v in sorted(flat)], False))
        for c in at:
            if _recursive(comps[c], succ):
                out.append(([rules[v] for v in comps[c]], True))
    return out


def comps_at(depth: dict, d: int):
    return (c for c, k in depth.items() if k == d)


def _recursive(comp: list[int], succ: list[list[int]]) -> bool:
    return len(comp) > 1 or comp[0] in succ[comp[0]]
