"""The strategy-prior baseline: how much each strategy sped a program up on the training menus.

A chooser that knows only which strategy pays on average: it ranks a menu's entries by the mean
log speedup of their strategy over the timed entries of the TRAINING split of the datasets given
(``--train-data``; by default the evaluated dataset's own training split, when the test split is
evaluated), the lowest number first on equal means. A strategy never timed in training gets the
mean over all training entries. The entries come from ``timed_menus.jsonl`` (every timed menu
question, answered or not) when a folder has it, else from its training menu rows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from engine.leir.diagnostics import LeirError


@dataclass(frozen=True)
class StrategyPrior:
    means: dict            # strategy -> mean log speedup over its training entries
    counts: dict           # strategy -> training entries
    overall: float         # mean log speedup over every training entry

    def score(self, strategy: str) -> float:
        return self.means.get(strategy, self.overall)

    def ranking(self, strategies: tuple) -> tuple[int, ...]:
        """Entry numbers, best first: by the strategy's mean, then by number."""
        return tuple(sorted(range(1, len(strategies) + 1), key=lambda n: (-self.score(strategies[n - 1]), n)))


def _timed_menu_entries(path: Path) -> list[tuple[str, float]]:
    from engine.leir.files import json_lines
    out = []
    for no, rec in json_lines(path):
        if not isinstance(rec, dict):
            raise LeirError("expected a JSON object", no, 1, str(path))
        if rec.get("split") != "train" or rec.get("form") != "menu":
            continue
        out += [(e["label"], e["speedup"]) for e in rec.get("entries") or []
                if e.get("verified") and isinstance(e.get("speedup"), (int, float)) and e["speedup"] > 0]
    return out


def training_entries(folder: str) -> list[tuple[str, float]]:
    """(strategy, measured speedup) of every timed entry of the folder's training split."""
    p = Path(folder)
    if not p.is_dir():
        raise LeirError("no such dataset folder (--train-data)", file=folder)
    if (p / "timed_menus.jsonl").is_file():
        return _timed_menu_entries(p / "timed_menus.jsonl")
    from .items import menu_items
    return [(e.get("strategy") or "", e["speedup"]) for it in menu_items(p, "train", "")
            for e in it["menu"] if e.get("verified", True) and isinstance(e.get("speedup"), (int, float))
            and e["speedup"] > 0]


def fit(entries: list[tuple[str, float]]) -> StrategyPrior | None:
    """The prior of (strategy, speedup) pairs; None without any."""
    if not entries:
        return None
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for strategy, speedup in entries:
        sums[strategy] = sums.get(strategy, 0.0) + math.log(speedup)
        counts[strategy] = counts.get(strategy, 0) + 1
    overall = sum(sums.values()) / len(entries)
    return StrategyPrior({s: sums[s] / counts[s] for s in sorted(sums)}, dict(sorted(counts.items())), overall)


def load_prior(folders: list[str]) -> tuple[StrategyPrior | None, str]:
    """(the prior of the folders' training entries, a note saying what it holds), or (None, why not)."""
    entries = [e for f in folders for e in training_entries(f)]
    prior = fit(entries)
    names = ", ".join(Path(f).resolve().name for f in folders)
    if prior is None:
        return None, f"no timed training entries in {names}"
    return prior, f"{len(entries)} timed training entries of {len(prior.means)} strategies ({names})"
