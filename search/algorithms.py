"""The seven search algorithms of the paper, over one ``Run`` (which asks the policy, verifies,
measures, charges the budget and keeps the nodes). Each is a short loop; their parameters are
one table, the paper's by default (spec search.md 5), each overridable from the command line.
An eighth, ``kernels``, is not the paper's: it searches per-statement kernels and extracts
their composition from an e-graph (``search.kernel_search``; the search's default: the policy
chooses which move of a kernel is measured).

Differences from the reference implementation, on purpose (spec search.md 9): BFS/DFS enqueue
only verified candidates and use the paper's depth 20 (the reference: 4); MCTS runs the
paper's 20 iterations (reference: 10) and does real rollouts (reference: none); every
algorithm also stops when the sample budget is spent.

Every child is timed against its parent in paired rounds (``search.candidate_eval``), so "better than
the parent" is a verdict: a child is better when it is significantly ``faster`` (its interval
clears 1 + the noise floor), never because one median came out lower. Greedy moves only to such a
child; beam and DFS rank significantly faster children first, then by the estimated speedup.
"""
from __future__ import annotations

import math
from collections import deque

# algorithm -> parameters (iterations, proposals per node, beam width, max depth, rollout depth)
PAPER = {
    "greedy": {"iterations": 20, "per_node": 2},
    "beam": {"iterations": 20, "per_node": 3, "beam_width": 2},
    "bfs": {"max_depth": 20, "per_node": 2},
    "dfs": {"max_depth": 20, "per_node": 2},
    "mcts": {"iterations": 20, "per_node": 1, "rollout_depth": 3},
    "chain": {"iterations": 20, "per_node": 1},
    "chain-no-parent": {"iterations": 20, "per_node": 1},
    # not the paper's: per-statement kernels and e-graph extraction (search.kernel_search)
    # max_depth: moves along a slot's best line (only a slot's best is expanded): 3 stopped a gemm's
    # line at its layout transformation, the register block on top of it never reached (5.5x at 64, 7.7x at 6)
    "kernels": {"max_depth": 6, "kernel_nodes": 2000, "kernel_seconds": 300.0},
}

UCB_C = 1.414
CHAIN_REPEATS = 5          # chain: stop after more than this many unusable answers in a row
WIDEN = 0.5                # MCTS progressive widening: a node may have ceil(visits ** WIDEN) children


def params(options) -> dict:
    """The paper's parameters of ``options.algorithm``, with the options' overrides."""
    p = dict(PAPER[options.algorithm])
    for k in ("iterations", "per_node", "beam_width", "max_depth", "rollout_depth", "kernel_nodes", "kernel_seconds"):
        v = getattr(options, k, None)
        if v is not None:
            p[k] = v
    return p


def better(n) -> tuple:
    """Rank of a node among siblings: significantly faster than its parent first, then by speedup."""
    return (n.verdict == "faster", n.speedup, -n.id)


def greedy(run, p):
    """Expand the current node (``per_node`` proposals) and keep the locally best: move to the
    best-speedup child among the accepted children of the current node that are significantly
    faster than it (paired verdict ``faster``); otherwise stay and expand it again (the menu no
    longer offers what was tried, and failed proposals feed the prompt)."""
    current = run.root
    for _ in range(p["iterations"]):
        if run.stopped():
            return
        run.expand(current, p["per_node"])
        faster = [n for n in run.children(current) if n.verdict == "faster"]
        best = max(faster, key=better) if faster else None
        if best is not None:
            current = best
        elif run.menu_empty(current):
            return run.stop("no legal step left at the current node")
    run.stop("iterations")


def beam(run, p):
    """Expand every beam node; the next beam is the top ``beam_width`` among all accepted
    children of the beam (significantly faster than their parent first, then by speedup); keep
    the beam when there are none."""
    frontier = [run.root]
    for _ in range(p["iterations"]):
        if run.stopped():
            return
        for node in frontier:
            if run.stopped():
                return
            run.expand(node, p["per_node"])
        kids = [c for n in frontier for c in run.children(n)]
        if kids:
            frontier = sorted(kids, key=better, reverse=True)[:p["beam_width"]]
        elif all(run.menu_empty(n) for n in frontier):
            return run.stop("no legal step left in the beam")
    run.stop("iterations")


def _tree(run, p, lifo: bool):
    todo = deque([run.root])
    while todo:
        if run.stopped():
            return
        node = todo.pop() if lifo else todo.popleft()
        if node.depth >= p["max_depth"]:
            continue
        kids = run.expand(node, p["per_node"])
        # DFS: push so that the best child is expanded first
        order = sorted(kids, key=better) if lifo else kids
        todo.extend(order)
    run.stop("search space exhausted")


def bfs(run, p):
    """First in, first out from the root; only verified candidates are enqueued."""
    _tree(run, p, lifo=False)


def dfs(run, p):
    """Last in, first out (the faster child first); only verified candidates are pushed."""
    _tree(run, p, lifo=True)


def _value(speedup: float) -> float:
    """The reference's reward transform, (exp(r-1)-1)*10, with r capped at 10 so that one
    outlier cannot swamp every UCB score."""
    r = min(max(speedup, 0.0), 10.0)
    return (math.exp(r - 1.0) - 1.0) * 10.0


def _ucb(child, parent_visits: int) -> float:
    if child.visits == 0:
        return math.inf
    return child.value / child.visits + UCB_C * math.sqrt(2.0 * math.log(max(parent_visits, 1)) / child.visits)


def mcts(run, p):
    """UCB1 selection with progressive widening (a node takes a new child while it has fewer
    than ceil(visits ** 0.5) of them: the menus are hundreds of steps long); expansion asks
    the policy for one step; simulation is a real rollout: ``rollout_depth`` random legal
    steps from the new child, the end verified and timed (a sample); the reward is the best
    speedup seen (child or rollout end), backed up to the root."""
    root = run.root
    for _ in range(p["iterations"]):
        if run.stopped():
            return
        node, path = root, [root]
        while True:
            kids = run.children(node)
            may_widen = len(kids) < math.ceil(max(node.visits, 1) ** WIDEN) and not run.menu_empty(node)
            if not kids or may_widen:
                break
            node = max(kids, key=lambda c: (_ucb(c, node.visits), -c.id))
            path.append(node)
        new = run.expand(node, p["per_node"])
        reward = node.speedup
        if new:
            child = new[0]
            path.append(child)
            reward = child.speedup
            if p.get("rollout_depth", 0) > 0 and not run.stopped():
                end = run.rollout(child, p["rollout_depth"])
                if end is not None:
                    reward = max(reward, end.speedup)
        elif run.menu_empty(node) and node is root:
            return run.stop("no legal step left at the root")
        value = _value(reward)
        for n in path:
            n.visits += 1
            n.value += value
    run.stop("iterations")


def chain(run, p, history: bool = True):
    """Refine one program step by step: the current node becomes its newest accepted child; a
    failed proposal keeps the current node and is reported in the next prompt."""
    current = run.root
    misses = 0
    for _ in range(p["iterations"]):
        if run.stopped():
            return
        kids = run.expand(current, p["per_node"], history=history)
        if kids:
            current = kids[-1]
            misses = 0
        else:
            misses += 1
            if run.menu_empty(current):
                return run.stop("no legal step left at the current node")
            if misses > CHAIN_REPEATS:
                return run.stop(f"more than {CHAIN_REPEATS} unusable proposals in a row")
    run.stop("iterations")


def chain_no_parent(run, p):
    """``chain`` without the History block in the prompt."""
    chain(run, p, history=False)


def kernels(run, p):
    """Per-statement kernels measured alone, their choices held in an e-graph and extracted
    (``search.kernel_search``)."""
    from .kernel_search import kernels as search_kernels
    search_kernels(run, p)


ALGORITHMS = {"greedy": greedy, "beam": beam, "bfs": bfs, "dfs": dfs, "mcts": mcts, "chain": chain,
              "chain-no-parent": chain_no_parent, "kernels": kernels}
