"""leir-engine: step-level, verifiable rewriting of LEIR tensor programs.

The public API (imported on first use, so ``import engine`` stays cheap)::

    from engine import load_program, Engine
    program = load_program("examples/softmax.leir")
    engine = Engine(strategies="paper")
    steps = engine.enumerate(program)               # every one-step rewrite, as Steps
    again = engine.apply(program, steps[0].to_json())
    assert again.to_leir() == steps[0].program.to_leir()
"""
from __future__ import annotations

from engine.plumbing.lazy import lazy_exports

_EXPORTS = {
    "LeirError": "engine.leir.diagnostics",
    "Program": "engine.leir.program",
    "TensorDecl": "engine.leir.ast",
    "load_program": "engine.leir.files",
    "load_programs": "engine.leir.files",
    "parse_program": "engine.leir.files",
    "renaming_key": "engine.leir.canonical",
    "Engine": "engine.rewrite.engine",
    "StepError": "engine.rewrite.engine",
    "SET_NAMES": "engine.rewrite.engine",
    "Step": "engine.rewrite.steps",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
