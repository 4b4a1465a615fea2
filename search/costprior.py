"""The shipped cost model: an XGBoost booster trained on timed rows of the public corpus
(``search.costtrain``), stored in ``search/models/TARGET.json`` with its metadata in
``TARGET.meta.json``. It is the prior of the ``cost`` policy, so a run ranks its first menu
with what other programs taught instead of at random.

A prior is only usable with the features it was trained on: the metadata names the feature
version and every feature column, and ``load`` refuses (with the reason) anything else, except
the path counts of strategies only one side has: a strategy the model never saw is a column it
has no split on (it never saw it non-zero), so it is left out of what the model is given; a
strategy the run does not use is a path count that is always 0 in the run, so it is given as 0.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .features import FEATURES_VERSION, feature_names

MODELS_DIR = Path(__file__).resolve().parent / "models"


def meta_path_of(model: Path) -> Path:
    """A booster file's metadata file: ``NAME.json`` -> ``NAME.meta.json``."""
    return model.with_name(model.name.removesuffix(".json") + ".meta.json")


def model_paths(target: str, directory: Path) -> tuple[Path, Path]:
    """The booster file and its metadata file for ``target``."""
    return directory / f"{target}.json", meta_path_of(directory / f"{target}.json")


@dataclass
class Prior:
    booster: object          # xgboost.Booster
    meta: dict
    names: list[str]         # the model's feature columns
    # per model column, its position in the run's feature matrix, None for a path count of a
    # strategy the run does not use (0 there); None: the same layout
    columns: Optional[list[Optional[int]]] = None

    def margins(self, X) -> "object":
        """Predicted log speedups (numpy array) for a feature matrix in the run's column order."""
        import numpy as np
        import xgboost as xgb
        if self.columns is not None:
            X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
            X = np.stack([X[:, c] if c is not None else np.zeros(len(X)) for c in self.columns], axis=1)
        return self.booster.predict(xgb.DMatrix(X, feature_names=self.names))


def column_map(meta: dict, strategies: tuple[str, ...]) -> Optional[list[Optional[int]]]:
    """Per model column, its position among the run's features (None: a path count of a strategy
    the run does not use); None when the layouts differ in more than path counts."""
    want, have = feature_names(tuple(strategies)), list(meta.get("feature_names") or [])
    if [n for n in want if not n.startswith("path_")] != [n for n in have if not n.startswith("path_")]:
        return None
    pos = {n: i for i, n in enumerate(want)}
    return [pos.get(n) for n in have]


def unseen_strategies(meta: dict, strategies: tuple[str, ...]) -> list[str]:
    """The run's strategies the model has no path column for."""
    have = set(meta.get("feature_names") or [])
    return [s for s in strategies if f"path_{s}" not in have]


def refusal(meta: dict, target: str, strategies: tuple[str, ...]) -> Optional[str]:
    """Why a prior with this metadata cannot serve a model of ``target`` over ``strategies``
    (None: it can)."""
    if meta.get("features_version") != FEATURES_VERSION:
        return (f"the shipped model has feature version {meta.get('features_version')}, "
                f"these features are version {FEATURES_VERSION} (retrain: python -m search.costmodel train)")
    if meta.get("target") != target:
        return f"the shipped model was trained for target {meta.get('target')}, not {target}"
    if column_map(meta, strategies) is None:
        want = feature_names(tuple(strategies))
        have = meta.get("feature_names") or []
        extra = sorted(set(have) - set(want))
        missing = sorted(set(want) - set(have))
        what = "; ".join(p for p in (f"unknown to this run: {', '.join(extra[:4])}" if extra else "",
                                      f"not in the model: {', '.join(missing[:4])}" if missing else "") if p)
        return f"the shipped model's feature layout differs from this run's ({what or 'order'})"
    return None


def load(target: str, strategies: tuple[str, ...], directory: Optional[Path] = None) -> tuple[Optional[Prior], str]:
    """The prior for ``target`` and this strategy set (from ``directory``, default the shipped
    models), or None and the reason."""
    model, meta_path = model_paths(target, MODELS_DIR if directory is None else Path(directory))
    if not model.is_file() or not meta_path.is_file():
        return None, f"no shipped cost model for target {target}"
    meta = json.loads(meta_path.read_text())
    why = refusal(meta, target, strategies)
    if why:
        return None, why
    import xgboost as xgb
    booster = xgb.Booster()
    booster.load_model(str(model))
    names = list(meta["feature_names"])
    cols = column_map(meta, strategies)
    same = cols == list(range(len(feature_names(tuple(strategies)))))
    note = f"shipped model: {meta.get('rows')} rows of {len(meta.get('programs', []))} programs"
    unseen = unseen_strategies(meta, strategies)
    if unseen:
        note += f" (strategies it was not trained on: {', '.join(unseen)})"
    return Prior(booster, meta, names, None if same else cols), note
