"""A learned cost model, as MetaSchedule has one: gradient-boosted trees (XGBoost) from
program features to the log speedup over the original program.

It starts from the shipped prior (``pretrained``: a booster trained on timed rows of the public
corpus, ``search.costprior``) when one fits the features, so the first menu of an unseen program
is ranked, not drawn at random; the run's own measurements (and, when given, a database of
earlier runs: JSON lines, features stored with their version) then refine it: a residual
booster is trained on them with the prior's predictions as its base margin, so a few rows of
this program correct the prior where it is wrong without being drowned by the corpus rows.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional


from .features import FEATURES_VERSION, feature_names

PARAMS = {"max_depth": 4, "eta": 0.2, "subsample": 1.0, "min_child_weight": 1.0, "lambda": 1.0,
          "objective": "reg:squarederror", "nthread": 1, "tree_method": "exact"}
ROUNDS = 60
MIN_ROWS = 3           # fewer rows than this: no model (the policy explores at random)
# the residual on the prior: shallow and damped, so that a handful of rows of one program
# shifts the prior's ranking rather than replacing it with a fit to the handful
ONLINE_PARAMS = {"max_depth": 2, "eta": 0.3, "lambda": 4.0}
ONLINE_ROUNDS = 10


class CostModel:
    """Rows of (features, log speedup); ``fit`` then ``predict``. Deterministic for a seed."""

    def __init__(self, strategies: tuple[str, ...], seed: int = 0, prior=None):
        self.strategies = tuple(strategies)
        self.prior = prior                    # search.costprior.Prior, or None (an empty model)
        self.prior_note = "no prior"
        self.names = feature_names(self.strategies)
        self.seed = seed
        self.rows: list[tuple[list[float], float]] = []
        self.database_rows = 0
        self._booster = None
        self._fitted_on = -1
        self.fits = 0

    def add(self, x: list[float], log_speedup: float) -> None:
        if math.isfinite(log_speedup):
            self.rows.append((list(x), float(log_speedup)))

    @classmethod
    def pretrained(cls, target: str, strategies: tuple[str, ...], seed: int = 0) -> Optional["CostModel"]:
        """A model starting from the shipped prior for ``target``, or None when there is none or
        its feature version or layout differs (``pretrained_status`` says why)."""
        return pretrained_status(target, strategies, seed)[0]

    @property
    def ready(self) -> bool:
        return self.prior is not None or len(self.rows) >= MIN_ROWS

    def fit(self) -> None:
        if len(self.rows) < MIN_ROWS or self._fitted_on == len(self.rows):
            return
        import numpy as np
        import xgboost as xgb
        X = np.asarray([r[0] for r in self.rows], dtype=np.float64)
        y = np.asarray([r[1] for r in self.rows], dtype=np.float64)
        if self.prior is None:
            dm = xgb.DMatrix(X, label=y, feature_names=self.names)
            self._booster = xgb.train(dict(PARAMS, seed=self.seed), dm, num_boost_round=ROUNDS)
        else:
            dm = xgb.DMatrix(X, label=y, base_margin=self.prior.margins(X), feature_names=self.names)
            self._booster = xgb.train(dict(PARAMS, seed=self.seed, **ONLINE_PARAMS), dm, num_boost_round=ONLINE_ROUNDS)
        self._fitted_on = len(self.rows)
        self.fits += 1

    def predict(self, xs: list[list[float]]) -> list[float]:
        """Predicted log speedups (fits first if new rows arrived): the prior's, corrected by the
        residual booster once the run has rows."""
        self.fit()
        if self._booster is None and self.prior is None:
            raise RuntimeError("the cost model has no data yet")
        import numpy as np
        import xgboost as xgb
        X = np.asarray(xs, dtype=np.float64).reshape(len(xs), len(self.names))
        margin = self.prior.margins(X) if self.prior is not None else None
        if self._booster is None:
            return [float(v) for v in margin]
        return [float(v) for v in self._booster.predict(xgb.DMatrix(X, base_margin=margin, feature_names=self.names))]

    # ------------------------------------------------------------------ database

    def load(self, path: str) -> int:
        """Add the rows of a database written by ``save`` (rows of another feature version or
        strategy set are skipped). Returns the number of rows added."""
        p = Path(path)
        if not p.exists():
            return 0
        from engine.leir.files import json_lines
        n = sum(self.add_row(d) for _, d in json_lines(p))
        self.database_rows += n
        return n

    def add_row(self, d: dict) -> int:
        """Add one stored row (1) unless its feature version or layout differs, or it is labelled
        with the speedup over the original (rows of earlier versions) rather than over the state the
        move was made at (0)."""
        if d.get("version") != FEATURES_VERSION or d.get("label") != "parent":
            return 0
        x = self._align(d)
        if x is None:
            return 0
        self.add(x, float(d["log_speedup"]))
        return 1

    def _align(self, d: dict) -> Optional[list[float]]:
        """A stored row in this model's feature order (strategies matched by name)."""
        from .features import PROGRAM_FEATURES
        base = d.get("program_features")
        if not isinstance(base, list) or len(base) != 2 * len(PROGRAM_FEATURES):
            return None
        path = d.get("path_strategies", [])
        return list(map(float, base)) + [float(path.count(s)) for s in self.strategies]


def pretrained_status(target: str, strategies: tuple[str, ...], seed: int = 0) -> tuple[Optional[CostModel], str]:
    """``CostModel.pretrained`` with the reason: (model, what it holds) or (None, why not)."""
    from .costprior import load
    prior, note = load(target, tuple(strategies))
    if prior is None:
        return None, note
    model = CostModel(strategies, seed, prior=prior)
    model.prior_note = note
    return model, note


def database_row(program_name: str, original_key: str, key: str, x: list[float], n_program: int,
                 path_strategies: list[str], log_speedup: float, target: str) -> dict:
    """A stored row: features of a state relative to the state the move was made at, the move's
    strategies, and the log of the paired speedup over that state (``label: parent``)."""
    return {"version": FEATURES_VERSION, "program": program_name, "original": original_key, "key": key,
            "target": target, "program_features": x[:2 * n_program], "path_strategies": path_strategies,
            "log_speedup": log_speedup, "label": "parent"}


def save_rows(path: str, rows: list[dict]) -> None:
    """Append rows to a database (the whole file rewritten atomically; a (original, key, target)
    already stored is replaced by the newer measurement)."""
    from engine.leir.files import write_atomic
    p = Path(path)
    old = []
    if p.exists():
        old = [json.loads(l) for l in p.read_text().splitlines() if l.strip()]
    seen = {(r.get("original"), r.get("key"), r.get("target")) for r in rows}
    keep = [r for r in old if (r.get("original"), r.get("key"), r.get("target")) not in seen]
    write_atomic(p, "".join(json.dumps(r, sort_keys=True) + "\n" for r in keep + rows))


if __name__ == "__main__":
    from .costtrain import main
    raise SystemExit(main())
