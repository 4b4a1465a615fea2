"""A program as a sequence of standalone kernel programs, one per top-level statement (its
*slots*): each statement is its own loop nest, so the program runs as its slots one after
the other, its time is close to the sum of theirs, and a rewrite of one statement changes one
slot. The search rewrites slots (``search.kernel_slots``); the lowering builds, runs and times them
(``lowering.compose``, ``lowering.measure.statements``).

A kernel's inputs are the tensors its statements read and do not write (program inputs, or
intermediates written by earlier statements), its outputs the tensors it writes that a later
statement reads or the program outputs (all it writes when nothing does: a dead statement);
dtypes and shapes come from the whole program's analysis.

Implicit initialisation (leir.md 7.3) decides what may be cut out: a statement that writes a
tensor an earlier statement wrote (an in-place update, never initialised) would read that
tensor as an input and write it as an output, which a program may not. Such a statement is
never isolated: it joins the earlier writer's slot, with every statement between them, and
the slot is one multi-statement kernel. A slot whose kernel does not analyse on its own (a
known tensor used in another scope, say) is merged with its neighbour the same way.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .ast import TensorDecl, equations
from .canonical import renaming_key
from .diagnostics import LeirError
from .limits import MAX_NAME_LENGTH
from .program import make_program


@dataclass(frozen=True)
class Slot:
    """Statements ``start:stop`` of a program as one standalone kernel program."""

    start: int
    stop: int
    kernel: object            # engine.leir.program.Program
    key: str                  # renaming key of the kernel

    @property
    def size(self) -> int:
        return self.stop - self.start


def writes_reads(program) -> tuple[list[set], list[set]]:
    """Per top-level statement: the tensors it writes, the tensors it reads."""
    writes = [{eq.lhs.name for _, eq in equations((n,))} for n in program.body]
    reads: list[set] = [set() for _ in program.body]
    for e in program.info.equations:
        reads[e.path[0]].update(e.reads)
    return writes, reads


def _groups(writes: list[set]) -> list[list[int]]:
    """[start, stop) ranges: a statement writing what an earlier one wrote joins that one's
    range (and everything between)."""
    bounds: list[list[int]] = []
    first_writer: dict[str, int] = {}
    for i, w in enumerate(writes):
        bounds.append([i, i + 1])
        earlier = [first_writer[n] for n in w if n in first_writer]
        if earlier:
            j = min(earlier)
            while bounds[-1][0] > j:                      # merge back to the range holding j
                last = bounds.pop()
                bounds[-1][1] = last[1]
        for n in w:
            first_writer.setdefault(n, i)
    return bounds


def kernel_program(program, start: int, stop: int, writes=None, reads=None, name: str | None = None):
    """Statements ``start:stop`` of ``program`` as a standalone program (``LeirError`` when
    they do not analyse on their own)."""
    if writes is None or reads is None:
        writes, reads = writes_reads(program)
    buffers = program.info.buffers
    w = set().union(*writes[start:stop])
    r = set().union(*reads[start:stop])
    later = set().union(*reads[stop:]) if stop < len(reads) else set()
    program_outputs = {d.name for d in program.outputs}
    order = [b for b in buffers]                         # a stable order: the analysis'
    outs = [n for n in order if n in w and (n in later or n in program_outputs)] or [n for n in order if n in w]
    ins = [n for n in order if n in r and n not in w]
    decl = lambda n: TensorDecl(n, buffers[n].dtype, tuple(buffers[n].shape))  # noqa: E731
    suffix = f"_k{start}"
    name = name or program.name[:MAX_NAME_LENGTH - len(suffix)] + suffix
    return make_program(name, [decl(n) for n in ins], [decl(n) for n in outs],
                        program.body[start:stop])


def split(program) -> list[Slot]:
    """The program's slots, in order; their bodies concatenated are the program's body."""
    writes, reads = writes_reads(program)
    bounds = _groups(writes)
    i = 0
    slots: list[Slot] = []
    while i < len(bounds):
        start, stop = bounds[i]
        try:
            k = kernel_program(program, start, stop, writes, reads)
        except LeirError:
            if len(bounds) == 1:
                raise
            if i + 1 < len(bounds):                      # merge with the next range and retry
                bounds[i] = [start, bounds.pop(i + 1)[1]]
            else:                                        # the last: merge back into the previous slot
                prev = slots.pop()
                bounds.pop()
                i -= 1
                bounds[i] = [prev.start, stop]
            continue
        slots.append(Slot(start, stop, k, renaming_key(k)))
        i += 1
    return slots


def interface(kernel) -> tuple:
    """What a kernel reads and writes, as (name, dtype, shape) of its inputs and its outputs."""
    return (tuple((d.name, d.dtype, tuple(d.shape)) for d in kernel.inputs),
            tuple((d.name, d.dtype, tuple(d.shape)) for d in kernel.outputs))


def changed_slots(before: list[Slot], after: list[Slot]) -> Optional[list[int]]:
    """The indices of the slots that differ (by renaming key) when two splits have one structure:
    as many slots, each with the same statement count and the same interface (so a changed
    slot's kernel is a drop-in replacement of the other's); None when the structure differs
    (a fusion, a fission, an inlined or renamed intermediate)."""
    if len(before) != len(after):
        return None
    out = []
    for i, (a, b) in enumerate(zip(before, after)):
        if a.size != b.size or interface(a.kernel) != interface(b.kernel):
            return None
        if a.key != b.key:
            out.append(i)
    return out
