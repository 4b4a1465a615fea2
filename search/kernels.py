"""Per-statement kernels: a program split into standalone programs, one per top-level
statement (each is its own loop nest, so the program's time is close to the sum of theirs),
and a kernel's rewrite mapped back onto the whole program.

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

from engine.leir.ast import TensorDecl, equations
from engine.leir.canonical import renaming_key
from engine.leir.diagnostics import LeirError
from engine.leir.limits import MAX_NAME_LENGTH
from engine.leir.printer import item_to_str
from engine.leir.program import make_program


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


def _writes_reads(program) -> tuple[list[set], list[set]]:
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
        writes, reads = _writes_reads(program)
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
    writes, reads = _writes_reads(program)
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


def compose(program, slots: list[Slot], bodies: dict[int, tuple]) -> object:
    """``program`` with the statements of slot ``i`` replaced by ``bodies[i]`` (a kernel
    variant's body; slots not in ``bodies`` keep theirs). Only for variants whose new
    intermediates have fresh names; the search composes by replaying steps instead."""
    body: list = []
    for i, s in enumerate(slots):
        body.extend(bodies.get(i, program.body[s.start:s.stop]))
    return program.with_body(tuple(body))


def slot_key(program, start: int, stop: int, reference) -> str:
    """The renaming key of statements ``start:stop`` of ``program`` read as a variant of the
    kernel ``reference`` (its known tensors; the body from ``program``), or '' when they do
    not analyse as one."""
    try:
        return renaming_key(reference.with_body(program.body[start:stop]))
    except LeirError:
        return ""


def local_slot(before, after, slots: list[Slot]):
    """The index of the one slot a whole-program step changed (the statements before and after
    it untouched), or None when it changed more (a cross-statement step: another structure)."""
    a = [item_to_str(n) for n in before.body]
    b = [item_to_str(n) for n in after.body]
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    changed = (head, len(a) - tail)                      # statements of ``before`` that changed
    for i, s in enumerate(slots):
        if s.start <= changed[0] and changed[1] <= s.stop:
            return i
    return None


def replays(engine, program, step) -> bool:
    """``Engine.apply`` gives back the step's program byte for byte (its key names one step)."""
    from engine.rewrite.engine import StepError
    try:
        return engine.apply(program, step.provenance()).to_leir() == step.leir
    except StepError:
        return False


def map_steps(engine, program, slot: Slot, reference, steps, keys) -> tuple:
    """Replay a kernel variant's steps (records from the slot's kernel ``reference``; ``keys``:
    the kernel's renaming key after each) on the whole ``program`` at the slot's statements.
    Each step is tried with its site moved to the slot (``Engine.apply``) and checked by the
    slot's renaming key after it; when that differs (a fresh name chosen differently, a name
    parameter taken in the whole program), the step of the whole program's enumeration at the
    slot that gives that key replaces it. Returns (program, whole-program step records,
    'exact' | 're-derived' | 'dropped'); dropped: (None, [], 'dropped')."""
    from engine.rewrite.engine import StepError
    from engine.rewrite.steps import Step
    records, how = [], "exact"
    start, size = slot.start, slot.size
    for st, want in zip(steps, keys):
        site = [st["site"][0] + start] + list(st["site"][1:])
        got = None
        try:
            p = engine.apply(program, dict(st, site=site))
            n = size + len(p.body) - len(program.body)
            if n > 0 and slot_key(p, start, start + n, reference) == want:
                step = Step(st["strategy"], st.get("category", ""), st["rule"], site, st.get("params", {}),
                            st.get("exactness", ""))
                got = (p, dict(step.provenance(), key=step.key, leir=p.to_leir()), n)
        except StepError:
            pass
        if got is None:
            how = "re-derived"
            for s in engine.enumerate(program):
                if not (start <= s.site[0] < start + size):
                    continue
                n = size + len(s.program.body) - len(program.body)
                if n > 0 and slot_key(s.program, start, start + n, reference) == want and replays(engine, program, s):
                    got = (s.program, s.to_json(), n)
                    break
        if got is None:
            return None, [], "dropped"
        program, rec, size = got
        records.append(rec)
    return program, records, how
