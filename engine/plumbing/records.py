"""JSON records of measured numbers: strict JSON has no NaN or infinity, and the project spells
them one of two ways, on purpose.

- ``json_safe``: as text, "nan", "inf", "-inf" (``str`` of the float). Verdicts and verification
  reports: an error that is infinite or NaN is *what went wrong*, and the reader must see it.
- ``json_nulls``: as null, the spelled-out text too. Dataset rows: a column keeps one type (a
  float or null) for Parquet and ``datasets``; rows hold equal verdicts, whose errors are finite.

Both also turn tuples into lists, so a record compares equal to itself read back.
"""
from __future__ import annotations

import math
from typing import Callable

NONFINITE_TEXT = ("nan", "inf", "-inf")          # str() of the non-finite floats


def json_safe(x):
    """``x`` with every non-finite float spelled as text ("nan", "inf", "-inf")."""
    return _walk(x, str)


def json_nulls(x):
    """``x`` with every non-finite float, and every such float already spelled as text, null."""
    return _walk(x, lambda v: None, nulls_text=True)


def _walk(x, spell: Callable[[float], object], nulls_text: bool = False):
    if isinstance(x, dict):
        return {k: _walk(v, spell, nulls_text) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_walk(v, spell, nulls_text) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return spell(x)
    if nulls_text and isinstance(x, str) and x in NONFINITE_TEXT:
        return None
    return x
