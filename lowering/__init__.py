"""Lowering of LEIR programs to TVM TIR, builds for llvm and cuda, and numerical verification
and timing (imported on first use)::

    from lowering import Verifier
    with Verifier(target="llvm", trials=3, timeout=60) as v:
        verdict = v.verify(original, candidate)      # Verdict: .equal, .reason, .to_json()
        timing = v.measure(candidate)                # Measurement: .median_ms, .spread_ms
"""
from __future__ import annotations

from engine.plumbing.lazy import lazy_exports

_EXPORTS = {
    "Verifier": "lowering.isolated",
    "Verdict": "lowering.isolated",
    "Measurement": "lowering.isolated",
    "tolerance_for": "lowering.isolated",
    "LoweringError": "lowering.errors",
    "lower_to_tvmscript": "lowering.tir",
    "lower_module": "lowering.tir",
    "Lowered": "lowering.tir",
    "cuda_source": "lowering.tir",
    "random_inputs": "lowering.inputs",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
