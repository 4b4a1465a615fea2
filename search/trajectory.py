"""Trajectory files: everything a search did, as one JSON document, written atomically after
every sample (a killed run leaves its last complete state) and at the end, even when no
candidate was accepted (``best`` is then the original, with no steps).

Top-level keys: ``format``, ``version``, ``program`` (the original, corpus JSON), ``options``,
``algorithm_parameters``, ``strategies``, ``rules`` (the rule files loaded: name and sha256 of
each), ``original`` (its timing), ``nodes`` (id, parent, depth, steps from
the parent (several for a rollout or a composite move), LEIR, time, the paired ``ratio`` over its
parent with its interval ``ci`` and ``verdict``, ``speedup`` over the original with the product of
the intervals along its path ``speedup_ci``, the sample that produced it), ``samples`` (every
candidate paid for: kind, step, status, verification, the paired timing record), ``llm_calls``
(prompt, answers, tokens, latency, attempts, error), ``best`` (``leir``, ``speedup`` with its
interval ``ci`` from the final confirmation against the original, ``significant``, ``steps`` from
the original, ``strategies``, the confirmations; when nothing is significantly faster, the original
and the best candidate), ``summary`` (samples, stop reason, the best-so-far curve, withheld steps,
tokens, the measurement's protocol and counts, seconds) and ``complete``.

Version 2 (paired timings) adds fields; version 1 files still load and replay.
"""
from __future__ import annotations

import json
from pathlib import Path

from engine.leir.diagnostics import LeirError

FORMAT = "leir-search-trajectory"
VERSION = 2
READABLE = (1, 2)          # versions this code loads (replay, report, plot)


def _node(n) -> dict:
    """A node as JSON: the search holds ``Step`` objects, the trajectory their records."""
    from .space import edge_json
    return {"id": n.id, "parent": n.parent, "depth": n.depth, "via": n.via, "strategy": n.strategy,
            "steps": edge_json(n.steps), "key": n.key, "leir": n.leir, "median_ms": n.median_ms,
            "spread_ms": n.spread_ms, "speedup": n.speedup, "speedup_ci": list(n.speedup_ci), "ratio": n.ratio,
            "ci": n.ci, "verdict": n.verdict, "sample": n.sample, "children": list(n.children),
            "visits": n.visits, "reached_by": n.reached_by.to_json() if n.reached_by is not None else None}


def build_record(run, final: bool) -> dict:
    from .algorithms import params
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for c in run.calls:
        for k in usage:
            usage[k] += int((c.get("usage") or {}).get(k) or 0)
    statuses: dict[str, int] = {}
    for s in run.samples:
        statuses[s.get("status", "?")] = statuses.get(s.get("status", "?"), 0) + 1
    return {
        "format": FORMAT, "version": VERSION, "complete": bool(final),
        "program": run.program.to_json(),
        "options": run.options.to_json(),
        "algorithm_parameters": params(run.options),
        "strategies": list(run.engine.strategies),
        "rules": run.engine.rule_manifest,
        "original": run.evaluator.baseline,
        "nodes": [_node(n) for n in run.nodes],
        "samples": run.samples,
        "llm_calls": run.calls,
        "best": run.best if final else {},
        "summary": {"samples": len(run.samples), "budget": run.options.budget, "nodes": len(run.nodes),
                    "stop": run.stop_reason, "statuses": statuses, "repeated_proposals": run.repeats,
                    "withheld": dict(run.space.stats), "llm_calls": len(run.calls), "tokens": usage,
                    "policy": run.policy.state(), "run": run.run_id, "curve": run.curve, "seconds": round(run.seconds, 3),
                    "measurement": run.evaluator.measurer.stats(),
                    **({"kernels": run.kernel_stats} if getattr(run, "kernel_stats", None) else {})},
    }


def write_trajectory(path: str, record: dict) -> None:
    from engine.leir.files import write_atomic
    write_atomic(path, json.dumps(record, indent=1, sort_keys=False, default=_default) + "\n")


def _default(x):
    if isinstance(x, float):
        return str(x)
    if isinstance(x, (set, frozenset, tuple)):
        return list(x)
    if hasattr(x, "items"):
        return dict(x)
    raise TypeError(f"not JSON: {type(x).__name__}")


class Trajectory:
    """A trajectory document with a few conveniences."""

    def __init__(self, record: dict, path: str | None = None):
        self.record = record
        self.path = path

    def __getitem__(self, k):
        return self.record[k]

    @property
    def best(self) -> dict:
        return self.record["best"]

    @property
    def samples(self) -> int:
        return self.record["summary"]["samples"]

    @property
    def program(self):
        from engine.leir.files import program_from_json
        return program_from_json(self.record["program"])


def load_trajectory(path: str) -> Trajectory:
    """Read a trajectory file (``LeirError`` with the location when it is not one)."""
    p = Path(path)
    text = p.read_text()
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as e:
        raise LeirError(f"not a JSON trajectory: {e.msg}", e.lineno, e.colno, str(p), text) from None
    if not isinstance(rec, dict) or rec.get("format") != FORMAT:
        raise LeirError(f"not a search trajectory (expected \"format\": \"{FORMAT}\")", file=str(p))
    if rec.get("version") not in READABLE:
        raise LeirError(f"trajectory version {rec.get('version')} is not supported (expected one of "
                        f"{', '.join(map(str, READABLE))})", file=str(p))
    return Trajectory(rec, str(p))
