"""``cost``: a learned cost model ranks the menu; only what it predicts to win is measured.

The model (``search.costmodel``: XGBoost on program features) predicts the log speedup of a move
over the state it is made at (the features of the result relative to the state's, and the move's
strategies): the quantity the search decides on (every candidate is timed against its parent in
paired rounds), and the one the shipped prior is trained on. It learns from every measurement
of the run as it arrives, and from the evaluation database when ``--database`` names one
(this run's outcomes are appended to it, with their features, as they are measured). Until
it has a few rows it picks at random, strategies taking turns, as MetaSchedule's first round
does. Afterwards (item 4 of issue 21) a share ``explore`` of the picks stays random (seeded);
the other picks are the best predicted, but only those predicted to beat the current node
by more than ``cost_margin`` (predicted speedup over the node > 1 + margin). When nothing is
predicted to win and no random pick was made, the single best prediction is measured: the
explicit exploration rule that keeps the search moving and the model learning. With ``--lookahead`` 2 or 3
an entry is ranked by the best prediction among its continuations (``search.lookahead``).
"""
from __future__ import annotations

import math

from ..costmodel import CostModel, pretrained_status
from ..features import FEATURES_VERSION, PROGRAM_FEATURES, program_features, relative
from .base import Policy, Proposal, Request, Result, stratified

LABEL = "parent"         # the rows' label: log speedup over the node the move was made at
LOOKAHEAD_WIDTH = 4      # --lookahead > 1: entries (and continuations per level) the model looks past


class CostPolicy(Policy):
    name = "cost"

    def __init__(self, options, ctx):
        super().__init__(options, ctx)
        prior, self.prior_note = (pretrained_status(options.target, ctx.engine.strategies, options.seed)
                                  if options.cost_prior == "on" else (None, "--cost-prior off"))
        self.model = prior if prior is not None else CostModel(ctx.engine.strategies, options.seed)
        self.loaded = 0
        if ctx.database is not None:
            from ..run_database import run_id
            own = run_id(ctx.program.to_json(), options.to_json())
            for row in ctx.database.cost_rows(exclude_run=own):
                self.loaded += self.model.add_row(row)
            self.model.database_rows += self.loaded
        self._features: dict[str, list[float]] = {}
        self.picks = {"model": 0, "explore": 0, "cold": 0, "best-guess": 0}
        self.withheld = 0                 # ranked candidates not measured: predicted not to win

    def _program_features(self, program, key: str) -> list[float]:
        f = self._features.get(key)
        if f is None:
            f = program_features(program, self.options.target)
            self._features[key] = f
        return f

    def _x(self, program, key: str, state, moves: list[str]) -> list[float]:
        """The model's input: ``program`` relative to ``state`` (a node) and the strategies of the
        move(s) between them."""
        return relative(self._program_features(program, key), self._program_features(state.program, state.key),
                        moves, self.model.strategies)

    def generate(self, req: Request) -> list[Proposal]:
        k = min(req.k, len(req.menu))
        order = stratified(req.menu, self.rng)
        if not self.model.ready:
            self.picks["cold"] += k
            return [Proposal(candidate=c) for c in order[:k]]
        if self.options.lookahead > 1:
            from ..lookahead import rank
            scores = rank(self.ctx.space, req.node, req.menu, self.model,
                          lambda p, key, strategies: self._x(p, key, req.node, strategies),
                          self.options.lookahead, LOOKAHEAD_WIDTH)
        else:
            xs = [self._x(c.program, c.key, req.node, [s.strategy for s in c.steps]) for c in req.menu]
            scores = self.model.predict(xs)
        ranked = sorted(range(len(req.menu)), key=lambda i: (-scores[i], req.menu[i].number))
        bar = math.log1p(self.options.cost_margin)          # a predicted speedup over the node
        winners = iter(i for i in ranked if scores[i] > bar)
        explore = iter(order)
        by_number = {c.number: i for i, c in enumerate(req.menu)}
        chosen, taken = [], set()

        def take(i, tag):
            c = req.menu[i]
            chosen.append(Proposal(candidate=c, extra={"predicted_speedup": round(math.exp(scores[i]), 4),
                                                       "pick": tag}))
            taken.add(c.number)
            self.picks[tag] += 1

        for _ in range(k):
            if self.rng.random() < self.options.explore:
                i = next((by_number[c.number] for c in explore if c.number not in taken), None)
                tag = "explore"
            else:
                i = next((i for i in winners if req.menu[i].number not in taken), None)
                tag = "model"
            if i is not None:
                take(i, tag)
        if not chosen:
            take(ranked[0], "best-guess")
        self.withheld += sum(1 for i in ranked[:k] if req.menu[i].number not in taken)
        return chosen

    def observe(self, results: list[Result]) -> None:
        """Each timed result is a row: its features relative to the node it was timed against, and
        the log of its paired speedup over that node."""
        for r in results:
            o = r.outcome
            if not o.accepted or not o.ratio or r.parent is None:
                continue
            x = self._x(r.program, r.key, r.parent, r.moves)
            y = math.log(o.ratio)
            self.model.add(x, y)
            n = len(PROGRAM_FEATURES)
            r.features = {"version": FEATURES_VERSION, "program_features": x[:2 * n], "path_strategies": list(r.moves),
                          "log_speedup": y, "label": LABEL}

    def state(self) -> dict:
        return {"database": self.options.database, "database_rows": self.loaded, "rows": len(self.model.rows),
                "fits": self.model.fits, "picks": dict(self.picks), "withheld": self.withheld,
                "prior": self.prior_note}
