"""``cost``: a learned cost model ranks the menu; only the chosen candidates are measured.

The model (``search.costmodel``: XGBoost on program features) learns from every measurement
of the run as it arrives, and from a database of earlier runs when ``--cost-db`` names one
(new measurements are added to it at the end). Until it has a few rows it picks at random,
strategies taking turns, as MetaSchedule's first round does; afterwards a share ``explore``
of the picks stays random (seeded), the rest are the best predicted. With ``--lookahead`` 2 or 3
an entry is ranked by the best prediction among its continuations (``search.lookahead``).
"""
from __future__ import annotations

import math

from ..costmodel import CostModel, database_row, save_rows
from ..features import PROGRAM_FEATURES, program_features, relative
from .base import Policy, Proposal, Request, stratified

LOOKAHEAD_WIDTH = 4      # --lookahead > 1: entries (and continuations per level) the model looks past


class CostPolicy(Policy):
    name = "cost"

    def __init__(self, options, run):
        super().__init__(options, run)
        self.model = CostModel(run.engine.strategies, options.seed)
        self.loaded = self.model.load(options.cost_db) if options.cost_db else 0
        self._features: dict[str, list[float]] = {}
        self._new_rows: list[dict] = []
        self._root_features = None
        self.picks = {"model": 0, "explore": 0, "cold": 0}

    def _program_features(self, program, key: str) -> list[float]:
        f = self._features.get(key)
        if f is None:
            f = program_features(program, self.options.target)
            self._features[key] = f
        return f

    def _x(self, program, key: str, path: list[str]) -> list[float]:
        if self._root_features is None:
            root = self.run.root
            self._root_features = self._program_features(root.program, root.key)
        return relative(self._program_features(program, key), self._root_features, path, self.model.strategies)

    def propose(self, req: Request) -> list[Proposal]:
        k = min(req.k, len(req.menu))
        order = stratified(req.menu, self.rng)
        if not self.model.ready:
            self.picks["cold"] += k
            return [Proposal(candidate=c) for c in order[:k]]
        base_path = [s.get("strategy", "") for s in req.node.path]
        if self.options.lookahead > 1:
            from ..lookahead import rank
            scores = rank(self.run.space, req.node, req.menu, self.model,
                          lambda p, key, strategies: self._x(p, key, base_path + strategies),
                          self.options.lookahead, LOOKAHEAD_WIDTH)
        else:
            xs = [self._x(c.program, c.key, base_path + [s.strategy for s in c.steps]) for c in req.menu]
            scores = self.model.predict(xs)
        ranked = [c for _, _, c in sorted(zip((-s for s in scores), (c.number for c in req.menu), req.menu),
                                          key=lambda t: (t[0], t[1]))]
        chosen, taken = [], set()
        explore = iter(order)
        for _ in range(k):
            if self.rng.random() < self.options.explore:
                pool, tag = explore, "explore"
            else:
                pool, tag = iter(ranked), "model"
            for c in pool:
                if c.number not in taken:
                    chosen.append(Proposal(candidate=c, extra={"predicted_speedup": round(math.exp(
                        scores[c.number - 1]), 4), "pick": tag}))
                    taken.add(c.number)
                    self.picks[tag] += 1
                    break
        return chosen

    def observe(self, path, program, outcome) -> None:
        if not outcome.accepted or not outcome.speedup:
            return
        key = outcome.key
        x = self._x(program, key, path)
        y = math.log(outcome.speedup)
        self.model.add(x, y)
        self._new_rows.append(database_row(self.run.program.name, self.run.root.key, key, x, len(PROGRAM_FEATURES),
                                           path, y, self.options.target))

    def state(self) -> dict:
        return {"database": self.options.cost_db, "database_rows": self.loaded, "rows": len(self.model.rows),
                "fits": self.model.fits, "picks": dict(self.picks)}

    def close(self) -> None:
        if self.options.cost_db and self._new_rows:
            save_rows(self.options.cost_db, self._new_rows)
            self._new_rows = []
