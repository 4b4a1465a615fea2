"""Composed execution: a program run as the sequence of its slot kernels (``engine.leir.slots``),
so that a candidate costs the build of the statements it changes.

Each slot kernel is built by ``lowering.run.build``, cached by its renaming key: a candidate
that shares all but one statement with its parent builds one kernel, the others are the
parent's. A run allocates one buffer per tensor of the whole program (inputs, outputs, and the
intermediates that cross slots, all as ``lowering.run.arguments`` allocates a whole program's:
inputs copied, the rest zero-filled) and each kernel's own scratch buffers (its intermediates,
zero-filled), then calls the kernels in order on them. Every tensor so starts as it does in the
whole program and every statement computes what it computes there: the outputs are bitwise
those of the whole build (tests/test_compose.py checks it over the corpus and its neighbours).

A program is built whole instead when it has one slot (its kernel is the program), when a
slot does not analyse or build on its own, or when a bfloat16 accumulator crosses slots
(``method`` "fallback": the Verifier counts those). The last is TVM's doing: the whole build
holds such a tensor in float32 and its readers round it to bfloat16 (``lowering.narrow``), but
TVM's bfloat16 legalisation removes that round trip (``float32(bfloat16(x))`` becomes ``x``), so
the whole build reads the unrounded value where a slot kernel, whose output is the bfloat16
tensor, reads the rounded one. float16 keeps the round trip.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from engine.leir.diagnostics import LeirError

from .errors import LoweringError

METHODS = ("composed", "single", "fallback")


@dataclass(frozen=True)
class Composed:
    """A program built for composed execution: its slot kernels with their builds, or (``whole``)
    the whole build, with the reason in ``method`` and ``note``."""

    program: object
    target: str
    method: str                      # one of METHODS
    kernels: tuple = ()              # (kernel Program, Built) per slot, in order ("composed")
    whole: Optional[object] = None   # the whole program's Built ("single", "fallback")
    note: Optional[str] = None       # why a fallback


def build_composed(program, target: str = "llvm", arch: str = "sm_90") -> Composed:
    """Build ``program``'s slot kernels (each cached by renaming key); the whole program when it
    has one slot or a slot does not analyse or build alone. Raises ``LoweringError`` only when
    the whole build fails too."""
    from engine.leir.slots import split

    from .run import build
    try:
        slots = split(program)
    except LeirError as e:
        return _whole(program, target, arch, "fallback", f"the split: {e.message}")
    if len(slots) == 1:
        return _whole(program, target, arch, "single", None)
    crossing = _bf16_accumulators_crossing(program, slots)
    if crossing:
        return _whole(program, target, arch, "fallback", f"bfloat16 accumulator(s) {', '.join(crossing)} cross "
                                                             "slots (the whole build does not round them)")
    kernels = []
    for i, s in enumerate(slots):
        try:
            kernels.append((s.kernel, build(s.kernel, target, arch)))
        except LoweringError as e:
            return _whole(program, target, arch, "fallback", f"slot {i} (statements {s.start}-{s.stop - 1}): "
                                                                 f"{e.message}")
    return Composed(program, target, "composed", tuple(kernels))


def _bf16_accumulators_crossing(program, slots) -> list[str]:
    """bfloat16 tensors the whole build holds as float32 accumulators that a later slot reads."""
    from .narrow import accumulators
    acc = {n for n in accumulators(program) if program.info.buffers[n].dtype == "bf16"}
    read_later = {d.name for s in slots[1:] for d in s.kernel.inputs}
    return sorted(acc & read_later)


def _whole(program, target: str, arch: str, method: str, note: Optional[str]) -> Composed:
    from .run import build
    return Composed(program, target, method, whole=build(program, target, arch), note=note)


def run_composed(c: Composed, program, inputs: dict, device=None) -> dict[str, np.ndarray]:
    """Run a composed build on ``inputs`` (name -> array): the outputs by name, as numpy arrays
    (``lowering.run.run_built``'s contract; ``program`` is the one ``c`` was built from, modulo
    renaming)."""
    from .run import arguments, device_for, run_built
    if c.whole is not None:
        return run_built(c.whole, program, inputs, device)
    dev = device_for(c.target, device)
    args, outs = arguments(program, inputs, dev)
    tensors = {d.name: a for d, a in zip(program.inputs, args)}
    tensors.update({d.name: o for d, o in zip(program.outputs, outs)})
    buffers = program.info.buffers
    calls = []
    for kernel, built in c.kernels:
        for d in (*kernel.inputs, *kernel.outputs):
            if d.name not in tensors:                         # an intermediate crossing slots
                b = buffers[d.name]
                tensors[d.name] = _zeros(b.shape, _numpy_of(b.dtype), dev)
        scratch = [_zeros(shape, _scratch_dtype(dtype), dev) for _, shape, dtype in built.scratch]
        calls.append((built, [tensors[d.name] for d in (*kernel.inputs, *kernel.outputs)] + scratch))
    try:
        for built, call_args in calls:
            built.function(*call_args)
        if c.target == "cuda":
            dev.sync()
    except Exception as e:
        from .tir import first_line
        raise LoweringError(f"execution failed: {first_line(e)}", stage="exec") from None
    return {d.name: o.numpy() for d, o in zip(program.outputs, outs)}


def _zeros(shape, dtype, dev):
    import tvm
    return tvm.runtime.tensor(np.zeros(tuple(shape), dtype=dtype), dev)


def _numpy_of(code: str):
    from .inputs import numpy_dtype
    return numpy_dtype(code)


def _scratch_dtype(name: str):
    from .run import _scratch_dtype as scratch_dtype
    return scratch_dtype(name)
