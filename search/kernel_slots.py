"""Per-statement kernels in the search: a kernel's rewrite mapped back onto the whole program.

The split of a program into slots (one standalone kernel program per top-level statement, an
in-place update joining its writer's slot) is the language's (``engine.leir.slots``); this
module adds what needs the rewriting: which slot a whole-program step changed, composing kernel
variants back, and replaying a kernel's steps on the whole program.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.leir.canonical import renaming_key
from engine.leir.diagnostics import LeirError
from engine.leir.printer import item_to_str
from engine.leir.slots import Slot, kernel_program, split

__all__ = ["KernelCandidate", "Slot", "compose", "kernel_candidates", "kernel_program", "local_slot", "map_steps", "replays", "slot_key", "split"]


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


@dataclass(frozen=True)
class KernelCandidate:
    """A move of a kernel program: one engine step, or a composite move (several steps, each
    replayable), and the kernel it gives (``key``: its renaming key)."""

    key: str
    program: object
    steps: tuple                      # engine Steps, in order
    composite: str = ""               # the composite move's name (search/composites.toml), if it is one
    description: str = ""

    @property
    def label(self) -> str:
        return self.composite or self.steps[-1].strategy


def kernel_candidates(engine, program, composites=None) -> list[KernelCandidate]:
    """Every move of a kernel program, one per resulting kernel (modulo renaming): its composite
    moves first (``composites``: a ``search.composite.CompositeMenu``), then the engine's steps in
    enumeration order; a step whose key another step shares is kept only when it replays, and a
    move giving back the kernel is left out. The kernel search's variants and the dataset's kernel
    rows are these."""
    from engine.leir.diagnostics import LeirError
    out, seen = [], {renaming_key(program)}

    def add(key, prog, steps, name="", description=""):
        if key not in seen:
            seen.add(key)
            out.append(KernelCandidate(key, prog, tuple(steps), name, description))

    if composites is not None:
        for inst in composites.of(program):
            try:
                key = renaming_key(inst.program)
            except LeirError:
                continue
            add(key, inst.program, inst.steps, inst.composite.name, inst.composite.description)
    steps = engine.enumerate(program)
    counts: dict[str, int] = {}
    for s in steps:
        counts[s.key] = counts.get(s.key, 0) + 1
    for s in steps:
        if counts[s.key] > 1 and not replays(engine, program, s):
            continue
        try:
            key = renaming_key(s.program)
        except LeirError:
            continue
        add(key, s.program, (s,))
    return out
