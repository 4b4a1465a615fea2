"""Difficulty of a strategy: the paper's score from the rule block's K, P and S, and its bucket.

The score is ``0.1*K + 0.5*(P-1) + S`` (dataset.md 2.1) with buckets easy (< 1), medium
(1 <= score < 2.5) and difficult (>= 2.5). The paper's published lists were not computed from
the formula (loop_reorder scores 0.1 yet is listed medium), so the bucket a strategy block
declares (``@difficulty``, the paper's list) is authoritative for filtering; the computed one
is stored next to it and every disagreement is reported in the job's statistics.
"""
from __future__ import annotations

BUCKETS = ("easy", "medium", "difficult")
PAPER_MIX = {"difficult": 87.32, "medium": 12.17, "easy": 0.51}     # paper 3.5, % of strategy uses


def score(k: int, p: int, s: int) -> float:
    return round(0.1 * k + 0.5 * (p - 1) + s, 6)


def bucket_of(value: float) -> str:
    if value < 1:
        return "easy"
    return "medium" if value < 2.5 else "difficult"


def difficulty(meta: dict) -> dict:
    """``{K, P, S, score, bucket, computed_bucket}`` of a strategy block's metadata."""
    k, p, s = (int(meta[x]) for x in ("K", "P", "S"))
    sc = score(k, p, s)
    listed = meta.get("difficulty", "")
    if listed not in BUCKETS:
        raise ValueError(f"strategy '{meta.get('strategy')}' declares no difficulty bucket (got '{listed}')")
    return {"K": k, "P": p, "S": s, "score": sc, "bucket": listed, "computed_bucket": bucket_of(sc)}


def mix(counts: dict) -> dict:
    """Percentages (two decimals) of a {bucket: count} mapping, every bucket present."""
    total = sum(counts.get(b, 0) for b in BUCKETS)
    return {b: round(100.0 * counts.get(b, 0) / total, 2) if total else 0.0 for b in BUCKETS}
