"""The two named builds of a program (architecture: the exact build proves, the fast build is timed).

* ``exact``: every float operation rounds as the program says. TVM's LLVM backend fuses every
  ``a*b+c`` into one fused multiply-add whenever the CPU has one (its floating-point op fusion is
  fixed to "fast"), rounding once where the program rounds twice, and only where the two operations
  meet in one expression after lowering: two programs a bitwise rule calls equal (``D = D + A*C``
  and its split ``E = A*C; D = D + E``) would differ in the last bit. So this build leaves FMA out
  (and, since LLVM ties AVX-512 to FMA, runs AVX2 code on a CPU that has both). Verification of a
  step always uses it.
* ``fast``: the machine's full features (FMA, AVX-512 at full width where present): what searches
  may time and users receive. Before it is timed, its outputs are checked against the exact build's
  at the dtype-aware tolerance (``lowering.fastcheck``).

On cuda both builds are today's build (IEEE math, ``lowering.cudacc``). ``lowering.run.tvm_target``
gives the TVM target of a (target, build) pair from this table.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.leir.diagnostics import LeirError


@dataclass(frozen=True)
class Build:
    """What one named build asks of LLVM: ``mattr`` added to the CPU's own attributes."""

    name: str
    mattr: tuple
    purpose: str


BUILDS = {
    "exact": Build("exact", ("-fma", "-fma4"),
                   purpose="proves a step: no fused multiply-add, every float operation rounds as written"),
    "fast": Build("fast", (),
                  purpose="is timed and shipped: the CPU's full features (FMA, AVX-512 at full width), checked "
                          "against the exact build at the dtype-aware tolerance"),
}
EXACT, FAST = "exact", "fast"
BUILD_NAMES = tuple(BUILDS)
DEFAULT_TIMED = EXACT       # what a dataset job times unless told; what a record, trajectory or job naming no build timed
SEARCH_TIMED = FAST         # what a search times unless told: the build its user receives


def build_named(name: str, what: str = "build") -> Build:
    """The ``Build`` called ``name``; a ``LeirError`` naming the choices otherwise."""
    b = BUILDS.get(name)
    if b is None:
        raise LeirError(f"unknown {what} '{name}' (expected {' or '.join(BUILD_NAMES)})")
    return b


def add_search_build_argument(parser, timed: str = "the searches time") -> None:
    """``--build`` for a command that times what searches time: the choices of ``BUILDS``, default
    ``SEARCH_TIMED`` (so the benchmarks and MetaSchedule follow the search's default)."""
    parser.add_argument("--build", choices=BUILD_NAMES, default=SEARCH_TIMED,
                        help=f"the build {timed} (lowering.builds): {SEARCH_TIMED} (the default, as python -m search "
                             "times: FMA, AVX-512 where present) or exact (no fused multiply-add)")


def llvm_mattr(name: str, cpu_features) -> list:
    """The ``mattr`` of build ``name`` for a CPU whose features under the build's own ``mattr`` are
    ``cpu_features`` (LLVM's names): where AVX-512 is left, LLVM's preference for 256-bit vectors is
    turned off, so a 16-lane loop of floats runs in one 512-bit register."""
    b = build_named(name)
    return [*b.mattr, "-prefer-256-bit"] if "avx512f" in cpu_features else list(b.mattr)
