"""The search space: nodes (verified programs) and the menu of legal next steps of a node.

A node's menu is the engine's enumeration of its program, less
* steps of a strategy that undoes the step that produced the node (the rule blocks'
  ``@inverse`` metadata, closed under symmetry: loop_tiling's inverse is loop_fusion, so
  after a loop_fusion neither loop_split nor loop_tiling is offered). A self-inverse
  strategy (loop_reorder, set_storage_scope, ...) may still be applied again; only the step
  that gives back the parent program is withheld;
* steps whose result is a state already visited (modulo renaming): a node, or a candidate
  that failed verification;
* steps that do not replay: ``Engine.apply`` must give back the enumerated program byte for
  byte, or the trajectory could not be replayed (a step key shared by two different steps).

With a composites table (``search.composite``) the one-step entries are followed by the
composite moves of the state (numbered on), less those whose result is closed, visited, the
state itself or already a one-step entry.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Optional

from engine.leir.canonical import renaming_key

MENU_CACHE = 24          # enumerations kept (each holds every neighbour program of a state)


@dataclass
class Node:
    """A verified program in the search tree."""

    id: int
    program: object
    key: str                          # renaming key
    parent: Optional[int]
    depth: int
    steps: tuple = ()                 # the edge from the parent: engine Steps (or one FreeEdge)
    path: tuple = ()                  # the edges' steps from the original program
    strategy: Optional[str] = None    # label of the last step ("free-form" for llm-free)
    median_ms: Optional[float] = None
    spread_ms: Optional[float] = None
    speedup: float = 1.0              # over the original: the parent's speedup x the edge's ratio
    sample: Optional[int] = None      # the sample that produced it
    via: str = "policy"               # policy | rollout
    children: list = field(default_factory=list)
    visits: int = 0                   # MCTS statistics
    value: float = 0.0
    expanded: bool = False
    failures: list = field(default_factory=list)   # failed proposals made at this node (prompt feedback)
    reached_by: Optional["Reached"] = None  # llm-free: the enumerated step giving the same program, if any
    ratio: float = 1.0                # speedup over the parent (paired rounds)
    ci: Optional[list] = None         # its interval
    verdict: Optional[str] = None     # faster | slower | tie against the parent (None: the root)
    speedup_ci: list = field(default_factory=lambda: [1.0, 1.0])   # over the original: the intervals' product

    @property
    def leir(self) -> str:
        return self.program.to_leir()


@dataclass(frozen=True)
class FreeEdge:
    """An edge no rule replays: a program the model wrote (``llm-free``), kept as its text."""

    strategy: str
    leir: str
    exactness: str = "reassociating"

    def to_json(self) -> dict:
        return {"free": True, "strategy": self.strategy, "exactness": self.exactness, "leir": self.leir}


@dataclass(frozen=True)
class Reached:
    """``llm-free``: the enumerated step of the node that gives the model's program, and
    whether ``Engine.apply`` replays it."""

    step: object
    replays: bool

    def to_json(self) -> dict:
        return dict(self.step.to_json(), replays=self.replays)


def edge_json(steps) -> list[dict]:
    """An edge (or path) as the trajectory stores it: one JSON record per step."""
    return [s.to_json() for s in steps]


@dataclass
class Candidate:
    """One menu entry: a legal step of a node, or a composite move (``steps``: several steps,
    each applied to the result of the one before, each replayable with ``Engine.apply``), and
    what it gives."""

    number: int                       # 1-based position in the node's menu
    step: object                      # engine Step: the last one
    key: str                          # renaming key of the result
    steps: tuple = ()                 # every step of the move (() means (step,))
    name: Optional[str] = None        # a composite's name
    description: Optional[str] = None  # the composite's one-line description (menus, prompts)

    def __post_init__(self):
        if not self.steps:
            self.steps = (self.step,)
        elif self.steps[-1] is not self.step:
            raise ValueError("a candidate's step is the last of its steps")

    @property
    def program(self):
        return self.step.program

    @property
    def label(self) -> str:
        return self.name or self.step.strategy

    @property
    def exactness(self) -> list[str]:
        return [s.exactness for s in self.steps]

    def record(self) -> dict:
        """The (last) step as stored in a trajectory (replayable with ``Engine.apply``)."""
        return self.step.to_json()

    def records(self) -> list[dict]:
        """Every step of the move, as stored in a trajectory."""
        return edge_json(self.steps)


def inverse_table(engine) -> dict[str, frozenset]:
    """strategy -> the strategies that undo it (the ``@inverse`` metadata, made symmetric)."""
    inv: dict[str, set] = {n: set() for n in engine.strategies}
    for name in engine.strategies:
        meta = engine.strategy(name).meta.get("inverse", "none") or "none"
        for other in meta.replace(",", " ").split():
            if other != "none":
                inv.setdefault(name, set()).add(other)
                inv.setdefault(other, set()).add(name)
    return {k: frozenset(v) for k, v in inv.items()}


class Space:
    """Menus of nodes over one engine. ``stats`` counts what was withheld and why."""

    def __init__(self, engine, composites=None, limits=None):
        self.engine = engine
        self.inverse = inverse_table(engine)
        self.stats = {"enumerated": 0, "inverse": 0, "visited": 0, "unreplayable": 0, "composite": 0}
        self._menus: OrderedDict = OrderedDict()     # node key -> [(step, renaming key)], bounded
        self.composites = None                       # search.composite.CompositeMenu, when a table is given
        if composites:
            from .composite import CompositeMenu, Limits
            self.composites = CompositeMenu(engine, tuple(composites), limits or Limits())
        self._moves: OrderedDict = OrderedDict()     # node key -> [(composite instance, renaming key)]

    def _steps(self, node: Node) -> list:
        """(step, renaming key, replays?) of every step of the node's program (cached per state)."""
        got = self._menus.get(node.key)
        if got is not None:
            self._menus.move_to_end(node.key)
            return got
        steps = self.engine.enumerate(node.program)
        self.stats["enumerated"] += len(steps)
        counts: dict[str, int] = {}
        for s in steps:
            counts[s.key] = counts.get(s.key, 0) + 1
        out = []
        for s in steps:
            ok = counts[s.key] == 1 or self._replays(node.program, s)
            if not ok:
                self.stats["unreplayable"] += 1
            out.append((s, renaming_key(s.program), ok))
        self._menus[node.key] = out
        while len(self._menus) > MENU_CACHE:
            self._menus.popitem(last=False)
        return out

    def _replays(self, program, step) -> bool:
        from engine.rewrite.engine import StepError
        try:
            again = self.engine.apply(program, {"rule": step.rule, "site": list(step.site), "params": dict(step.params)})
        except StepError:
            return False
        return again.to_leir() == step.leir

    def menu(self, node: Node, parent: Optional[Node], closed: set) -> list[Candidate]:
        """The node's legal next steps, numbered from 1; ``closed``: renaming keys not to offer
        again (nodes and failed candidates)."""
        forbidden = self.inverse.get(node.strategy or "", frozenset())
        parent_key = parent.key if parent is not None else None
        out = []
        for step, key, replays in self._steps(node):
            if not replays:
                continue
            if step.strategy in forbidden and step.strategy != node.strategy:
                self.stats["inverse"] += 1
                continue
            if key == parent_key:                     # undoes the step that produced the node
                self.stats["inverse"] += 1
                continue
            if key in closed or key == node.key:
                self.stats["visited"] += 1
                continue
            out.append(Candidate(len(out) + 1, step, key))
        if self.composites is not None:
            offered = {c.key for c in out}
            for inst, key in self._composite_moves(node):
                if key in closed or key == node.key or key == parent_key or key in offered:
                    self.stats["visited"] += 1
                    continue
                offered.add(key)
                out.append(Candidate(len(out) + 1, inst.steps[-1], key, inst.steps, inst.composite.name,
                                     inst.composite.description))
                self.stats["composite"] += 1
        return out

    def _composite_moves(self, node: Node) -> list:
        """(instance, renaming key of its result) of the node's composite moves (cached per state)."""
        got = self._moves.get(node.key)
        if got is None:
            got = [(inst, renaming_key(inst.program)) for inst in self.composites.of(node.program)]
            self._moves[node.key] = got
            while len(self._moves) > MENU_CACHE:
                self._moves.popitem(last=False)
        else:
            self._moves.move_to_end(node.key)
        return got

    def successors(self, program, key: str) -> list:
        """(step, renaming key) of the replayable one-step rewrites of a program (the same
        cached enumeration as menus): what lookahead ranks continuations from."""
        return [(s, k) for s, k, ok in self._steps(Node(-1, program, key, None, 0)) if ok]

    def steps_reaching(self, node: Node, key: str):
        """(step, replays?) of the enumerated step of ``node`` whose result is ``key`` modulo
        renaming (a replayable one first), or (None, False)."""
        found = [(step, ok) for step, k, ok in self._steps(node) if k == key]
        found.sort(key=lambda t: not t[1])
        return found[0] if found else (None, False)
