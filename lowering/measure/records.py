"""A timing record re-derived from what it stores, whatever method made it: ``sequential`` and
``interleaved`` (whole programs paired, ``lowering.measure.stats``) or ``statements`` (slot
kernels paired, the sum model, ``lowering.measure.summodel``). ``dataset.check`` and the menu
checks call these."""
from __future__ import annotations

from . import stats, summodel

METHODS = (stats.SEQUENTIAL, stats.FIXED, summodel.STATEMENTS)


def rederive(record: dict) -> dict:
    """The figures a record's samples give under its own method."""
    if record.get("method") == summodel.STATEMENTS:
        return summodel.rederive(record)
    return stats.rederive(record)


def verdict_of(record: dict) -> str:
    """The verdict a timing record's samples give."""
    return rederive(record)["verdict"]


def record_problems(record: dict) -> list[str]:
    """Each figure of a timing record that its samples do not give (dataset.check)."""
    method = record.get("method")
    if method not in METHODS:
        return [f"timing method '{method}' is not one of {', '.join(repr(m) for m in METHODS)}"]
    if method == summodel.STATEMENTS:
        return summodel.problems(record)
    return stats.record_problems(record)
