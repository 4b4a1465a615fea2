"""The shipped cost model: an XGBoost booster trained on timed rows of the public corpus
(``search.costtrain``), stored in ``search/models/TARGET.json`` with its metadata in
``TARGET.meta.json``. It is the prior of the ``cost`` policy, so a run ranks its first menu
with what other programs taught instead of at random.

A prior is only usable with the features it was trained on: the metadata names the feature
version and every feature column, and ``load`` refuses (with the reason) anything else, except
that a run may use strategies the model never saw: their path counts are columns the model has
no split on (it never saw them non-zero), so they are left out of what it is given.
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
    columns: Optional[list[int]] = None   # their positions in the run's feature matrix (None: the same)

    def margins(self, X) -> "object":
        """Predicted log speedups (numpy array) for a feature matrix in the run's column order."""
        import numpy as np
        import xgboost as xgb
        if self.columns is not None:
            X = np.asarray(X)[:, self.columns]
        return self.booster.predict(xgb.DMatrix(X, feature_names=self.names))


def unseen_strategies(meta: dict, strategies: tuple[str, ...]) -> Optional[list[str]]:
    """The run's strategies the model has no path column for, when that is the only difference
    between its feature layout and the run's (None otherwise)."""
    want, have = feature_names(tuple(strategies)), list(meta.get("feature_names") or [])
    if [n for n in want if n in set(have)] != have:
        return None
    extra = [n for n in want if n not in set(have)]
    if not extra or not all(n.startswith("path_") for n in extra):
        return None
    return [n.removeprefix("path_") for n in extra]


def refusal(meta: dict, target: str, strategies: tuple[str, ...]) -> Optional[str]:
    """Why a prior with this metadata cannot serve a model of ``target`` over ``strategies``
    (None: it can)."""
    if meta.get("features_version") != FEATURES_VERSION:
        return (f"the shipped model has feature version {meta.get('features_version')}, "
                f"these features are version {FEATURES_VERSION} (retrain: python -m search.costmodel train)")
    if meta.get("target") != target:
        return f"the shipped model was trained for target {meta.get('target')}, not {target}"
    want = feature_names(tuple(strategies))
    have = meta.get("feature_names")
    if have != want and unseen_strategies(meta, strategies) is None:
        extra = sorted(set(have or []) - set(want))
        missing = sorted(set(want) - set(have or []))
        what = "; ".join(p for p in (f"unknown to this run: {', '.join(extra[:4])}" if extra else "",
                                      f"not in the model: {', '.join(missing[:4])}" if missing else "") if p)
        return f"the shipped model's feature layout differs from this run's strategy set ({what or 'order'})"
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
    unseen = unseen_strategies(meta, strategies)
    note = f"shipped model: {meta.get('rows')} rows of {len(meta.get('programs', []))} programs"
    if not unseen:
        return Prior(booster, meta, names), note
    want = feature_names(tuple(strategies))
    return Prior(booster, meta, names, [want.index(n) for n in names]), (
        f"{note} (strategies it was not trained on: {', '.join(unseen)})")
