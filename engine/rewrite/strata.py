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
    flat step holds every acyclic rule of one depth, to run once. File order inside."""
    n = len(rules)
    rw = [reads_writes(r, tables) for r in rules]
    succ = [{j for j in range(n) if rw[i][1] & rw[j][0]} for i in range(n)]   # i writes what j reads
    reach = [_reachable(i, succ) for i in range(n)]
    comp = [frozenset({i} | {j for j in reach[i] if i in reach[j]}) for i in range(n)]
    # depth: the longest chain of components before this one. A component reads only those
    # of smaller depth, so once they are done an acyclic rule needs ONE iteration and one of
    # a cycle saturates on its component's rules alone.
    depth: dict[frozenset, int] = {}

    def depth_of(c: frozenset) -> int:
        if c not in depth:
            before = {comp[j] for j in range(n) if j not in c and succ[j] & c}
            depth[c] = 1 + max((depth_of(p) for p in before), default=-1)
        return depth[c]

    out: list[tuple[list, bool]] = []
    for d in range(1 + max((depth_of(c) for c in comp), default=-1)):
        flat = [i for i in range(n) if i not in reach[i] and depth_of(comp[i]) == d]
        if flat:
            out.append(([rules[i] for i in flat], False))
        cycles = sorted({c for i, c in enumerate(comp) if i in reach[i] and depth_of(c) == d}, key=min)
        out.extend(([rules[i] for i in sorted(c)], True) for c in cycles)
    return out


def _reachable(i: int, succ: list[set[int]]) -> set[int]:
    """Rules reachable from rule i in one or more steps (i itself only through a cycle)."""
    seen: set[int] = set()
    todo = list(succ[i])
    while todo:
        j = todo.pop()
        if j not in seen:
            seen.add(j)
            todo.extend(succ[j] - seen)
    return seen
