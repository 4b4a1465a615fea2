"""The fast build checked against the exact one (``lowering.builds``) before a timing runs it.

The fast build fuses multiply-adds and may vectorise wider, so its outputs may differ from the
exact build's in the last bits, never by more than reordered rounding: every output must agree
at the dtype-aware tolerance of strict mode (``lowering.verify.compare_builds``). A verification
checks a candidate so (``lowering.verify.verify``, ``timed_build``); a timing checks every program
it times (parents and slot kernels too) on its inputs, and a disagreement is a failed timing
(``FastMismatch``, reason ``FAST_DIFFERS``), not a crash. On cuda the two builds are one build.
"""
from __future__ import annotations

from .builds import FAST
from .errors import LoweringError

FAST_DIFFERS = "fast build differs"     # the reason of a verdict or timing the check failed


class FastMismatch(LoweringError):
    """The fast build's outputs are outside the strict tolerance of the exact build's."""


_CHECKED: dict = {}     # (build key, seed) -> FastCheck, for this process's life
CHECKED_SIZE = 4096     # checks remembered at most (then forgotten all at once: a check is cheap to redo)


def timed_build(program, target: str, arch: str, build: str, seed: int, device=None):
    """The ``Built`` a timing runs: the named build; the fast one only once it agrees with the exact
    build on the timing's inputs (``random_inputs(program, seed, 0)``; remembered per program modulo
    renaming). Raises ``FastMismatch`` when it does not, ``LoweringError`` when a build fails."""
    from .inputs import random_inputs
    from .run import build as build_program
    from .run import build_key
    from .verify import compare_builds
    built = build_program(program, target, arch, build)
    if build != FAST or target == "cuda":
        return built
    key = (build_key(program, target, arch, build), seed)
    check = _CHECKED.get(key)
    if check is None:
        if len(_CHECKED) >= CHECKED_SIZE:
            _CHECKED.clear()
        check = _CHECKED[key] = compare_builds(program, [random_inputs(program, seed, 0)], target, arch, device)
    if not check.equal:
        raise FastMismatch(check.message, stage="fast")
    return built
