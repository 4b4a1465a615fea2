"""Rows from intermediate states (``--depth D``, issue 20 item 1): seeded walks from a source.

A task lists the rows of its source program (state depth 0) exactly as at depth 1. With
``D > 1`` it then takes ``--walks W`` walks from the source: each moves, one verified step at a
time, to a child of its current state (the program of one of the state's verified rows) and
lists the child's rows in turn, until its state is at depth ``D - 1``; so rows have a state
depth in ``0 .. D-1`` and a task has at most ``1 + W*(D-1)`` states (each sampled with
``--per-program``). The walks are seeded: a task is still a pure function of its program and
the job's options, whatever the worker.

The point of a walk is to reach strategies whose precondition appears only after another step
(``set_storage_scope`` after ``cache_read_write``, for instance), so the next state is chosen
for coverage, among the current state's verified rows that are not a no-op on the target and
whose program is no state of this task yet, by the strategies of the child's own one-step
rewrites (enumerated, not verified: cheap): first the child that makes the most strategies
available that its parent had not and no row of this task has yet ("fresh"); then the one with
the most strategies without rows; then one whose step's strategy no walk took yet; then a
seeded draw (``LOOKAHEAD`` children are looked at). At a state below the source the
``--per-program`` sample takes its strategies in this order: fresh ones without rows, others
without rows, the rest. A walk that finds no child ends early.

Every row records ``state``: ``depth``, ``path`` (``Step.to_json()`` of each step from the
source to the row's program: ``engine.apply --steps`` replays it) and ``parent`` (the id of the
row whose transformed program is this state, null at the source).
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

LOOKAHEAD = 12           # children whose rewrites are enumerated to choose the next state


@dataclass
class State:
    """A program a task lists rows of, and how it was reached from the source."""

    program: object                       # engine.leir.program.Program
    depth: int = 0
    path: list = field(default_factory=list)   # Step.to_json() records, source -> program
    parent: str | None = None             # id of the row whose transformed program this is
    tir: str | None = None                # its lowered text, when the parent row has it
    cuda: str | None = None
    # what the search's question at this state shows (dataset.text.menu): the parent program, one
    # {"strategy", "speedup"} per step from the source (speedup over the source: the product of the
    # steps' measured speedups, None when one was not measured), the path's states' renaming keys
    parent_program: object = None
    history: list = field(default_factory=list)
    closed: tuple = ()

    def record(self) -> dict:
        return {"depth": self.depth, "path": self.path, "parent": self.parent}

    def child(self, row: dict, step, program) -> "State":
        from engine.leir.canonical import renaming_key
        cuda = row.get("cuda") or {}
        before = self.history[-1]["speedup"] if self.history else 1.0
        measured = (row.get("timing") or {}).get("speedup")
        speedup = None if before is None or measured is None else round(before * measured, 6)
        return State(program, self.depth + 1, self.path + [step.to_json()], row["id"],
                     row["tir"]["transformed"], cuda.get("transformed"), self.program,
                     self.history + [{"strategy": step.strategy, "speedup": speedup}],
                     self.closed + (renaming_key(self.program),))


def as_recorded(step):
    """The program a step gives, read back from its record: what a row's ``program`` holds and
    what ``dataset.check`` replays from. (A neighbour built by a rule can be another tree of the
    same text, and a rule's result on it can print differently: a walk's state is the record.)"""
    from engine.leir.files import program_from_json
    return program_from_json(step.program.to_json())


def walk(source: State, expand: Callable, strategies_of: Callable, depth: int, walks: int, seed: int,
         key: str) -> int:
    """Expand ``source`` and the states of ``walks`` seeded walks down to state depth
    ``depth - 1``. ``expand(state, covered, fresh)`` lists a state's rows (``covered``: the
    strategies with rows so far, ``fresh``: those the state has and its parent had not; both
    None at the source) and returns its ``(row, step)`` pairs;
    ``strategies_of(program)`` is the set of strategies of a program's one-step rewrites.
    Returns the number of states expanded."""
    covered: set[str] = set()
    taken: set[str] = set()
    first = expand(source, None, None)
    covered.update(row["step"]["strategy"] for row, _ in first)
    visited = {source.program.to_leir()}
    if depth <= 1:
        return 1
    top = strategies_of(source.program)
    expanded = 1
    rng = random.Random(f"{seed}:walk:{key}")
    for _ in range(walks):
        state, children, have = source, first, top
        while state.depth < depth - 1:
            pick = _choose(children, have, visited, covered, taken, strategies_of, rng)
            if pick is None:
                break
            row, step, program = pick
            taken.add(step.strategy)
            state = state.child(row, step, program)
            visited.add(step.leir)
            now = strategies_of(program)
            children, have = expand(state, covered, now - have), now
            covered.update(r["step"]["strategy"] for r, _ in children)
            expanded += 1
    return expanded


def _choose(children: list, have: set, visited: set, covered: set, taken: set, strategies_of,
            rng: random.Random):
    """The next state among a state's verified rows (see the module's docstring)."""
    options = [(r, s) for r, s in children if not r.get("noop_on_target") and s.leir not in visited]
    if not options:
        return None
    rng.shuffle(options)
    options.sort(key=lambda rs: rs[1].strategy in taken)          # stable: untaken strategies first
    best, best_score = None, None
    for row, step in options[:LOOKAHEAD]:
        program = as_recorded(step)
        now = strategies_of(program) - covered
        score = (len(now - have), len(now), step.strategy not in taken)
        if best_score is None or score > best_score:
            best, best_score = (row, step, program), score
    return best


def uncovered_first(order: list[str], covered: set[str] | None, fresh: set[str] | None) -> list[str]:
    """A seeded strategy order rearranged for a walk's state: fresh strategies without rows
    first, then the others without rows, then the rest, each part in the seeded order (a stable
    sort); unchanged when ``covered`` is None (the source: the sample of depth 1)."""
    if covered is None:
        return order
    fresh = fresh or set()
    return sorted(order, key=lambda s: (s in covered, s not in fresh))
