"""What a policy may see of a run: the narrow interface of MetaSchedule's shape.

A policy never holds the ``Run``. It gets a ``PolicyContext``: the original program and the
root node, a read-only view of the budget, a way to record its model calls, the policy state
of an interrupted run (``previous``), the engine and the space (menus of other states, e.g.
for lookahead) and the evaluation database. Measuring is the Run's: a policy *generates*
proposals, the Run verifies and times them (charging the budget), the policy *observes* the
results and *chooses* which become nodes.
"""
from __future__ import annotations

from typing import Callable, Optional


class Budget:
    """A read-only view of a run's sample budget."""

    def __init__(self, total: int, spent: Callable[[], int]):
        self.total = total
        self._spent = spent

    @property
    def spent(self) -> int:
        return self._spent()

    @property
    def left(self) -> int:
        return max(0, self.total - self.spent)

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.total

    def __repr__(self) -> str:
        return f"Budget(spent={self.spent}, total={self.total})"


class PolicyContext:
    """The run as a policy sees it (``root`` is known once the run has started)."""

    def __init__(self, program, budget: Budget, *, root: Callable[[], object], record_call: Callable[[dict], int],
                 previous: Optional[dict] = None, engine=None, space=None, database=None, target: str = "llvm"):
        self.program = program
        self.budget = budget
        self._root = root
        self._record_call = record_call
        self.previous = dict(previous or {})
        self.engine = engine
        self.space = space
        self.database = database
        self.target = target

    @property
    def root(self):
        return self._root()

    def record_call(self, record: dict) -> int:
        """Store a model call in the trajectory; returns its index."""
        return self._record_call(record)
