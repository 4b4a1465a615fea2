"""One database of evaluations (JSON lines, append-only): the evaluation cache of ``--resume``,
the cost model's rows, and what later runs learn from.

Each line is one record, written once and flushed (a killed run loses at most the line it was
writing; a torn last line is skipped when read and cut off before the next append). Kinds:

* ``original``: a run's baseline timing (``run``, ``original`` key, ``target``, ``machine``);
* ``outcome``: one evaluated candidate: keyed by (``key`` = renaming key, ``target``,
  ``machine``), with the ``original`` it was verified against, the ``run`` that paid for it,
  its ``outcome`` (verdict and timings) and, when the cost policy computed them, the features
  the cost model needs at the top level (``version``, ``program_features``,
  ``path_strategies``, ``log_speedup``: the cost-row format, so ``CostModel.load`` reads the
  file as it is);
* ``timing``: a paired comparison, the timing cache (``lowering.measure.cache``);
* lines without ``kind`` are cost rows of ``--cost-db`` files of earlier versions.

A verdict is against one original, and a timing holds on one machine: outcomes are reused
only for the same original, target and machine.
"""
from __future__ import annotations

import hashlib
import json
from typing import Optional

from lowering.measure.database import EvaluationDatabase


def run_id(program_json: dict, options_json: dict) -> str:
    """A run's identity: its program and options (the database's path left out, ``threads`` when
    not given and ``build`` when exact, so that runs recorded before either option existed keep
    their identity)."""
    opts = {k: v for k, v in options_json.items()
            if k not in ("database", "cost_db") and not (k == "threads" and v is None)
            and not (k == "build" and v == "exact")}
    text = json.dumps([program_json, opts], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def machine_of(target: str, threads: Optional[int] = None) -> dict:
    """The machine label of a run's records (``threads``: ``--threads``, None: the environment's)."""
    from lowering.measure import machine_label
    return machine_label(target, threads)


class RunDatabase(EvaluationDatabase):
    """The evaluation database with the search's records (``original``, ``outcome``); its
    ``timing`` records are the paired-timing cache (``lowering.measure``)."""

    def __init__(self, path: Optional[str] = None, *, machine: Optional[dict] = None):
        super().__init__(path)
        self.machine = machine

    # ------------------------------------------------------------------ writing

    def add_original(self, run: str, original_key: str, target: str, baseline: dict) -> dict:
        return self.append({"kind": "original", "run": run, "original": original_key, "target": target,
                            "machine": self.machine, "baseline": baseline})

    def add_outcome(self, run: str, original_key: str, target: str, program: str, outcome: dict,
                    features: Optional[dict] = None) -> dict:
        rec = {"kind": "outcome", "run": run, "original": original_key, "key": outcome["key"], "target": target,
               "machine": self.machine, "program": program, "outcome": outcome}
        if features:
            rec.update(features)
        return self.append(rec)

    # ------------------------------------------------------------------ reading

    def _here(self, r: dict, original_key: str, target: str) -> bool:
        return r.get("original") == original_key and r.get("target") == target and \
            (self.machine is None or r.get("machine") == self.machine)

    def outcomes(self, original_key: str, target: str, run: Optional[str] = None) -> dict[str, dict]:
        """key -> outcome JSON of the outcomes against this original on this target and
        machine (of one ``run`` when given; a later record of a key wins)."""
        out = {}
        for r in self.records:
            if r.get("kind") == "outcome" and self._here(r, original_key, target) and \
                    (run is None or r.get("run") == run) and isinstance(r.get("outcome"), dict):
                out[r["key"]] = r["outcome"]
        return out

    def baseline(self, original_key: str, target: str, run: str) -> Optional[dict]:
        found = None
        for r in self.records:
            if r.get("kind") == "original" and r.get("run") == run and self._here(r, original_key, target):
                found = r.get("baseline")
        return found

    def cost_rows(self, exclude_run: Optional[str] = None) -> list[dict]:
        """Rows with features (the cost model's): outcome records that carry them, labelled with
        the log speedup over the node the move was made at (``label: parent``; rows of earlier
        versions, labelled over the original, are left out); those of ``exclude_run`` left out (a
        resumed run observes its own again)."""
        return [r for r in self.records if "log_speedup" in r and r.get("kind") == "outcome"
                and r.get("label") == "parent" and (exclude_run is None or r.get("run") != exclude_run)]
