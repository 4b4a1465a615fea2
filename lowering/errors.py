"""The one error type of the lowering package."""
from __future__ import annotations

from engine.leir.diagnostics import LeirError


class LoweringError(LeirError):
    """A valid LEIR construct that this lowering (or TVM) cannot turn into code for a target.

    It names the construct and, where the construct has a source position, points at it;
    ``stage`` says where it happened ("lower", "build", "exec").
    """

    def __init__(self, message: str, node=None, stage: str = "lower", file: str | None = None):
        pos = getattr(node, "pos", None)
        super().__init__(message, pos.line if pos else None, pos.col if pos else None, file=file)
        self.stage = stage
