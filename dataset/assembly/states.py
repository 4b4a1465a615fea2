"""The assembly's view of states and target no-ops: which rows of a task are kept, how they
group into prompts, and what ``stats.json`` says about depth, coverage and no-ops.

* A row that is a no-op on the target (``noop_on_target: true``, ``--target cuda`` only) is
  dropped unless ``--keep-noop``; either way it is counted per strategy.
* A prompt is one state's program: multi-answer rows and preference pairs are made from the
  rows of one state (``by_state``), never across the states of a walk.
* ``depth``: states, rows per state depth (``state.depth``: verified steps from the source to
  the row's program) and per the paper's synthesis depth ``S`` (``difficulty.S``: categories of
  new elements a strategy introduces, a property of the strategy, not of the walk), and the
  strategy coverage: rows of each strategy per state depth, and the strategies of the job's set
  that have no row.
"""
from __future__ import annotations

from collections import Counter, defaultdict


def state_key(row: dict) -> tuple:
    """The state a row was listed from: its depth and the keys of its path."""
    st = row["state"]
    return (st["depth"], tuple(s["key"] for s in st["path"]))


def by_state(rows: list[dict]) -> list[list[dict]]:
    """A task's rows grouped by state, states and rows in task order."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(state_key(r), []).append(r)
    return list(groups.values())


class StateStats:
    def __init__(self, target: str, strategies: list[str] | None = None):
        self.target = target
        self.strategies = strategies
        self.states = 0
        self.per_depth = Counter()
        self.per_s = Counter()
        self.coverage: dict[str, Counter] = defaultdict(Counter)
        self.noops = Counter()
        self.noops_kept = 0
        self.compared = 0

    def add(self, res: dict, keep_noop: bool) -> list[dict]:
        """The rows of a task result that go into the dataset, counted."""
        self.states += res["counts"].get("states", 1)
        kept = []
        for r in res["rows"]:
            flag = r.get("noop_on_target")
            if flag is not None:
                self.compared += 1
            if flag:
                self.noops[r["step"]["strategy"]] += 1
                if not keep_noop:
                    continue
                self.noops_kept += 1
            kept.append(r)
            d = r["state"]["depth"]
            self.per_depth[d] += 1
            self.per_s[r["difficulty"]["S"]] += 1
            self.coverage[r["step"]["strategy"]][d] += 1
        return kept

    def stats(self) -> dict:
        coverage = {s: {"rows": sum(c.values()), "by_depth": {str(d): c[d] for d in sorted(c)}}
                    for s, c in sorted(self.coverage.items())}
        depth = {"states": self.states,
                 "rows_per_depth": {str(d): self.per_depth[d] for d in sorted(self.per_depth)},
                 "rows_per_synthesis_depth": {str(s): self.per_s[s] for s in sorted(self.per_s)},
                 "strategy_coverage": coverage,
                 "strategies_without_rows": [s for s in self.strategies or [] if s not in self.coverage]}
        noop = {"target": self.target, "compared": self.target == "cuda", "rows_compared": self.compared,
                "noop_rows": sum(self.noops.values()), "kept": self.noops_kept,
                "per_strategy": dict(sorted(self.noops.items()))}
        return {"depth": depth, "noop_on_target": noop}
