"""What f16 and bf16 arithmetic means in the lowering (docs/numerics.md has the why).

Half-precision types (``float16``, ``bfloat16``) are *storage* types. Identically on every
target:

* every equation whose operands or result are half precision computes its right-hand side in
  ``float32`` (each half value is widened on load, literals are ``float32``) and rounds once,
  to the stored tensor's type, when it stores the result;
* a half-precision tensor that an equation reads while writing it (a reduction ``X=X+...``,
  a scan ``X_a=X_{a-1}+...``, an update of an already written tensor) is an *accumulator*:
  it is held in ``float32`` for the whole program, the equations that write it read and
  write the ``float32`` value, and every other reader sees it rounded to its declared type
  (an output accumulator is rounded into the output once, at the end of the program).

The one exception is an update that is exact under rounding: when the tensor's own old value
only flows through ``max``/``min``/``if_then_else`` (a running max, a max pool), rounding after
every step gives the same result as rounding once (rounding is monotonic), so such a tensor
is stored in its own type.
"""
from __future__ import annotations

from engine.leir.ast import DTYPES, Call, Ref, walk

HALF = ("float16", "bfloat16")
COMPUTE = "float32"


def compute_type(dtype: str) -> str:
    """The type arithmetic on values of ``dtype`` is carried out in."""
    return COMPUTE if dtype in HALF else dtype


def _exact_under_rounding(rhs, lhs: Ref) -> bool:
    """The old value of ``lhs`` reaches the result only as a selected operand of
    max/min/if_then_else, so rounding every step equals rounding once."""
    def clean(e) -> bool:
        if isinstance(e, Ref) and e.name == lhs.name:
            return True
        if any(isinstance(n, Ref) and n.name == lhs.name for n in walk(e)):
            if isinstance(e, Call) and e.func in ("max", "min"):
                return all(clean(a) for a in e.args)
            if isinstance(e, Call) and e.func == "if_then_else":
                cond_free = not any(isinstance(n, Ref) and n.name == lhs.name for n in walk(e.args[0]))
                return cond_free and clean(e.args[1]) and clean(e.args[2])
            return False
        return True
    return clean(rhs)


def accumulators(program, force: frozenset = frozenset()) -> set[str]:
    """Half-precision tensors held in float32 (see the module docstring). ``force`` adds
    tensors that must be (a cross-thread reduction needs a plain float32 combiner)."""
    info = program.info
    out: set[str] = set()
    for ei in info.equations:
        x = ei.eq.lhs
        if DTYPES[info.buffers[x.name].dtype] not in HALF:
            continue
        if x.name in force:
            out.add(x.name)
        elif x.name in ei.reads and not _exact_under_rounding(ei.eq.rhs, x):
            out.add(x.name)
    return out


def self_reads(eq) -> bool:
    """Whether ``eq`` reads the tensor it writes (anywhere, index included)."""
    return any(isinstance(n, Ref) and n.name == eq.lhs.name
               for e in (eq.rhs, *eq.lhs.index) for n in walk(e))

