"""``--algorithm kernels``: search statements, not programs.

The root is split into per-statement kernels (``search.kernel_slots``); each kernel is measured
alone (a sample) and its variants are explored with the engine's steps on the kernel program
(local by construction), each verified against its kernel on seeded inputs and timed against it
in paired rounds (a sample; ``lowering.measure``: a ratio, its interval and a verdict). A variant
counts as faster than its kernel only when its verdict says so: a tie costs the kernel's time. Cross-statement steps of the root (fusion, inline, online softmax, ...) give other
*structures*; their kernels are keyed by renaming key, so a statement they leave alone shares
the root's slot, its variants and its measurements. Every slot's variants are one e-class of
``search.egraph.ChoiceGraph``; what to measure next is read off an optimistic extraction
(measured time where known, an estimate elsewhere), and the result is the extraction over
measured kernels only, composed back into one program by replaying each kernel step on the
whole program, then verified against the original and timed against it in paired rounds (one
sample) as every ``--compose-every``-th sample and at the end, so the whole program's verdict keeps
the kernel search honest while it runs.

The search decides where to look (the slot and kernel state holding the unmeasured variant with
the largest expected saving); the run's policy decides which of that state's moves is measured
(``Policy.kernel_move`` answering a ``search.kernel_question.KernelAsk``). No decision depends on
the budget (structures are explored one per ``STRUCTURE_SAMPLES`` samples, compositions are the
samples numbered a multiple of ``--compose-every``): a run with a larger budget makes the smaller
run's choices first, composes what the smaller run returns and confirms it at the end beside its own
best (``search.run.to_confirm``), so it never returns a worse result on the same timings.

Estimates of unmeasured variants: the kernel cost model's prediction (``CostModel`` rows of
this run's kernel measurements, relative to the slot's kernel; the shipped prior when the
package has one) once it has ``MODEL_ROWS`` rows; before that ``OPTIMISM`` times the parent
variant's time, ties broken by a seeded round-robin over strategies. Structures are explored
in order of fewer statements (fewer passes over memory), one per ``STRUCTURE_SAMPLES`` samples of
the local search, each costing at most ``STRUCTURE_SHARE`` of that (a whole-program verification
plus their new kernels).

Limits: ``max_depth`` steps per kernel variant, ``kernel_nodes`` variants held in the e-graph,
``kernel_seconds`` of enumeration; the reason the local search stopped is reported.
"""
from __future__ import annotations

import math
import random
import time
from collections import deque
from dataclasses import dataclass
from typing import Optional

from engine.leir.canonical import renaming_key
from engine.leir.diagnostics import LeirError
from engine.rewrite.steps import Step

from .egraph import ChoiceGraph
from .candidate_eval import ACCEPTED, CandidateOutcome, path_tolerance
from .kernel_question import KernelAsk, KernelState, kernel_move, kernel_question
from .kernel_slots import Slot, kernel_candidates, local_slot, map_steps, split

OPTIMISM = 0.9          # an unmeasured variant, before the model is ready: expected at 0.9x its parent's time
MODEL_ROWS = 3          # kernel measurements (variants) before the model's estimates are used
STRUCTURE_SHARE = 0.5   # a structure is explored only when it costs at most this share of STRUCTURE_SAMPLES
STRUCTURE_SAMPLES = 16  # and at most one structure per this many samples of the local search
COMPOSITE_RANK = -10_000  # composite moves come before one-step variants among siblings of equal estimate
COMPOSITE_FIRST = 3       # a slot's composite moves measured before its one-step variants (largest slot first)
COMPOSITE_SHARE = 0.1     # ... in a slot taking at least this share of its structure's kernel time
REPEAT_DISCOUNT = 0.5     # a move's expected saving, per move of its kind from its parent that beat neither it nor an
                          # earlier move of that kind from it
STALE_DISCOUNT = 0.8      # ... and per move of any kind measured since its line last improved that did not beat
                          # its parent (forty ties under one register block tell the slot's other moves come next)
IMPROVEMENT = 0.05        # a move improves on its parent when it is this much faster: below, a tie in the timing's noise
STALE_TURN = 4            # once this many moves below a slot's best line did not beat their parents, a kind of
                          # composite not yet measured there has its turn again, before one-step variants
SLOT_BONUS = 0.1          # expected saving: optimism in proportion to the slot's time (a model's doubt about a
                          # variant of the 99% slot outweighs its promise for a slot of 0.2%)
NOT_IN_CONTEXT = "not in context"   # a variant whose steps the whole program's guards refuse (never measured)


@dataclass
class Variant:
    """A kernel program in a slot's e-class: the slot's kernel (no steps) or reached from it."""

    key: str
    base: str                          # key of the slot's kernel
    program: object
    steps: tuple = ()                  # kernel-level step records from the slot's kernel
    keys: tuple = ()                   # renaming key of the kernel after each step
    parent: Optional[str] = None
    rank: int = 0                      # prior order among its siblings
    ms: Optional[float] = None
    verdict: Optional[str] = None      # paired verdict against the slot's kernel
    status: Optional[str] = None       # None: unmeasured; "accepted" or why not
    expanded: bool = False
    moves: int = 0                     # moves from the slot's kernel (a composite move is one, of several steps)
    composite: str = ""                # the composite move's name (search/composites.toml) that made it
    description: str = ""              # the composite's one-line description
    move_kind: tuple = ()              # its last move's steps' rules and named operands (``move_kind``)
    order: int = -1                    # when it was measured (the kernel search's count)

    @property
    def depth(self) -> int:
        return self.moves

    @property
    def strategies(self) -> list[str]:
        return [s.get("strategy", "") for s in self.steps]

    @property
    def kind(self) -> tuple:
        """A composite move's kind: its name, the rules it took and what they act on (packing the
        weight before a register block is another experiment than packing the input; tile sizes
        are not)."""
        return (self.composite, self.move_kind)

    @property
    def label(self) -> str:
        """The kind of the move that made it: its composite's name, else its last step's strategy."""
        return self.composite or (self.strategies[-1] if self.steps else "kernel")


@dataclass
class Structure:
    sid: int
    program: object
    step: Optional[dict]               # the root's cross-statement step (None: the root)
    slots: list
    verified: Optional[bool] = None    # None: not explored


@dataclass
class Limits:
    depth: int
    nodes: int
    seconds: float
    stop: Optional[str] = None
    enumerated: int = 0
    seconds_spent: float = 0.0


def priority(v: Variant, slot_ms: float, estimate: float, done: list, large: bool = True, repeats: int = 0,
             stale: int = 0, slot_stale: int = 0) -> tuple:
    """How soon an unmeasured variant of a slot is measured (the largest first). A composite of a
    slot that has had fewer than COMPOSITE_FIRST of them measured (``done``) and that takes at least
    COMPOSITE_SHARE of its structure's kernel time (``large``: a slot of 0.2% of the time is not
    worth three samples before the big slot's one-step variants) comes first, the slot
    taking the most time first (the model, trained on single steps, cannot price a coordinated
    move), a kind of composite not yet measured there before another instance of one that was
    (three instances of one tiling tell less than a tile, a register block and a packed register
    block); otherwise the largest expected saving, plus ``SLOT_BONUS`` of the slot's time, discounted
    by ``REPEAT_DISCOUNT`` for each move of the same kind (``repeats``) measured from the same
    variant without beating it (a fifth tiling factor after four ties tells little) and by
    ``STALE_DISCOUNT`` for each move of any kind measured below the variant's line's last
    improvement without beating its parent (``stale``: a flat neighbourhood, explored kind after
    kind, gives way to the slot's untried moves elsewhere); a saving expected to be negative grows by
    the same factors (the twelfth move of a kind 6x slower comes after the first of another). When
    ``slot_stale`` (such moves below the slot's best line) reaches ``STALE_TURN``, a kind of composite not yet measured in the slot
    comes first again: the model that priced it low is the one whose promise just failed
    (forty ties under a register block, the packed register block never tried)."""
    fresh = v.rank < 0 and v.kind not in {d.kind for d in done}
    if v.rank < 0 and large and (len(done) < COMPOSITE_FIRST or (fresh and slot_stale >= STALE_TURN)):
        return (True, slot_ms, fresh, -estimate, -v.rank, v.key)
    saving = slot_ms * (1 + SLOT_BONUS) - estimate
    discount = REPEAT_DISCOUNT ** repeats * STALE_DISCOUNT ** stale
    return (False, saving * discount if saving > 0 else saving / discount, False, 0.0, -v.rank, v.key)


def move_kind(records) -> tuple:
    """Per step of a move: its rule and its named operands (tensors, loops: the parameters that are
    names; sizes, factors, exactness and new names left out)."""
    return tuple((r.get("rule", ""), tuple(sorted((k, v) for k, v in (r.get("params") or {}).items()
                                                   if isinstance(v, str) and k not in ("exactness", "read"))))
                 for r in records)


def _record_of(step) -> dict:
    """A step's record without its (kernel) program text."""
    d = step.provenance()
    d["key"] = step.key
    return d


def _round_robin(moves: list, rng: random.Random) -> list:
    """Moves in a seeded order in which strategies take turns."""
    by: dict[str, list] = {}
    for s in moves:
        by.setdefault(s.label, []).append(s)
    names = sorted(by)
    rng.shuffle(names)
    for n in names:
        rng.shuffle(by[n])
    out = []
    while any(by.values()):
        for n in names:
            if by[n]:
                out.append(by[n].pop(0))
    return out


class KernelSearch:
    """One ``kernels`` search over a ``Run`` (its root, engine, verifier, samples and nodes)."""

    def __init__(self, run, p: dict):
        self.run = run
        self.engine = run.engine
        self.options = run.options
        self.rng = random.Random(run.options.seed)
        self.limits = Limits(p.get("max_depth", 6), p.get("kernel_nodes", 2000), p.get("kernel_seconds", 300.0))
        self.graph = ChoiceGraph()
        self.variants: dict[str, Variant] = {}
        self.structures: list[Structure] = []
        self.model = self._model()
        self._features: dict[str, list[float]] = {}
        self.stats: dict = {}
        self.composite_variants = 0
        self.not_in_context = 0
        self.compositions: list[dict] = []
        self._composed: set[str] = set()
        self._composed_at = -1             # the sample count of the last checkpoint composition
        self._pending: deque = deque()     # samples a structure's exploration still needs
        self._queued: deque = deque()      # structures waiting to be explored
        self._explored = 0
        self._phase_start = 0
        self._measured = 0                 # kernel variants measured so far (their order)
        self._children: dict = {}          # variant -> the keys of its moves, in the e-graph

    # ------------------------------------------------------------------ helpers

    def _model(self):
        from .costmodel import CostModel
        model = CostModel.pretrained(self.options.target, self.engine.strategies)   # the shipped prior, or None
        self.prior = model is not None
        return model if model is not None else CostModel(self.engine.strategies, self.options.seed)

    @property
    def left(self) -> int:
        return self.options.budget - len(self.run.samples)

    def _add_slot_kernel(self, slot: Slot) -> None:
        if slot.key not in self.variants:
            self.variants[slot.key] = Variant(slot.key, slot.key, slot.kernel)

    def _best(self, base: str) -> Optional[Variant]:
        got = [self.variants[k] for k in self.graph.members.get(base, [base])
               if self.variants[k].status == ACCEPTED]
        return min(got, key=lambda v: (v.ms, v.depth, v.key)) if got else None

    def _feat(self, v: Variant) -> list[float]:
        from .features import program_features
        f = self._features.get(v.key)
        if f is None:
            f = self._features[v.key] = program_features(v.program, self.options.target)
        return f

    def _x(self, v: Variant) -> list[float]:
        from .features import relative
        return relative(self._feat(v), self._feat(self.variants[v.base]), v.strategies, self.model.strategies)

    # ------------------------------------------------------------------ costs

    def _estimates(self, bases: list[str]) -> dict[str, float]:
        """Estimated time of every unmeasured variant in the given slots (see the module text)."""
        todo = [self.variants[k] for b in bases for k in self.graph.members.get(b, [b])
                if self.variants[k].status is None and self.variants[k].parent is not None]
        out: dict[str, float] = {}
        if todo and self.model.ready:
            # the model predicts a variant's speedup over its slot's kernel; a variant is anchored to
            # its measured parent: the parent's time times the predicted gain of the child over it
            parents = sorted({v.parent for v in todo if v.parent != v.base and self.variants[v.parent].ms})
            preds = self.model.predict([self._x(v) for v in todo] + [self._x(self.variants[k]) for k in parents])
            lp_parent = dict(zip(parents, preds[len(todo):]))
            for v, lp in zip(todo, preds):
                parent = self.variants[v.parent]
                if parent.ms and (v.parent == v.base or v.parent in lp_parent):
                    gain = lp - lp_parent.get(v.parent, 0.0)
                    out[v.key] = parent.ms * math.exp(-gain) * (1 + 1e-6 * v.rank)
        for v in todo:
            if v.key not in out:
                parent = self.variants[v.parent]
                if parent.ms:
                    out[v.key] = parent.ms * OPTIMISM * (1 + 1e-6 * v.rank)
        return out

    def _cost(self, estimates: Optional[dict]):
        def cost(key: str) -> float:
            v = self.variants[key]
            if v.status == ACCEPTED:
                return v.ms
            if v.status is None and estimates is not None and key in estimates:
                return estimates[key]
            return math.inf
        return cost

    def _extract(self, estimates: Optional[dict]):
        try:
            return self.graph.extract(self._cost(estimates))
        except Exception:          # noqa: BLE001 - no finite term (egglog raises its own error types)
            return None

    # ------------------------------------------------------------------ measuring

    def _sample(self, kind: str, outcome: CandidateOutcome, **extra) -> None:
        """Charge one sample to the run (the trajectory's ``samples``; never the best-so-far
        curve: a kernel's speedup is not the program's)."""
        self.run.record_sample(self.run.root, kind, outcome, **extra)

    def _measure(self, v: Variant, choice: Optional[dict] = None) -> None:
        """The slot's kernel: timed alone (its time weighs the slots against each other). A
        variant: verified against its slot's kernel and timed against it in paired rounds; its
        time is the kernel's over the paired ratio, and a variant that is not significantly faster
        or slower (a tie) costs the kernel's time."""
        base = self.variants[v.base]
        if v.steps and not self._in_context(v):
            v.status, v.ms = NOT_IN_CONTEXT, None         # no sample spent
            self.not_in_context += 1
            return
        tol = path_tolerance([s.get("exactness", "") for s in v.steps]) if v.steps else None
        ev = self.run.evaluator
        o = ev.recorded_outcome(v.key)                    # a resumed run: measured already
        if o is None:
            o = CandidateOutcome(v.key, ACCEPTED, tolerance=tol)
            if v.steps:
                verdict = ev.verify(base.program, v.program, tol)
                o.status, o.message, o.max_abs_err, o.seconds = (ACCEPTED if verdict.equal else verdict.reason,
                                                                 verdict.message, verdict.max_abs_err, verdict.seconds)
            if o.accepted and not v.steps:
                m = ev.time_alone(v.program)
                o.seconds += m.seconds
                if m.ok:
                    o.median_ms, o.spread_ms, o.times_ms = m.median_ms, m.spread_ms, m.times_ms
                else:
                    o.status, o.message = "measure failed", f"{m.reason}: {m.message}"
            elif o.accepted:
                rec = ev.measurer.compare_one(base.program, v.program)
                if rec is None:
                    o.status, o.message = "measure failed", "the paired timing failed (build or run)"
                else:
                    o.parent, o.ratio, o.ci, o.verdict, o.timing = base.key, rec["speedup"], rec["ci"], \
                        rec["verdict"], rec
                    o.median_ms = base.ms / rec["speedup"] if base.ms else rec["candidate_ms"]
        v.status = o.status
        v.verdict = o.verdict
        if not o.accepted:
            v.ms = None
        elif v.steps and base.ms and o.verdict == "tie":
            v.ms = base.ms * (1 + 1e-9 * v.moves)         # no significant difference: the kernel's time
        else:
            v.ms = o.median_ms
        v.order = self._measured
        self._measured += 1
        extra = {"choice": choice} if choice is not None else {}
        self._sample("kernel", o, strategy=(v.strategies[-1] if v.steps else "kernel"), slot_kernel=v.base,
                     kernel_steps=list(v.steps), kernel_speedup=o.ratio, kernel_ci=o.ci, kernel_verdict=o.verdict,
                     **extra)
        if v.steps and o.ratio:
            self.model.add(self._x(v), math.log(o.ratio))

    def _in_context(self, v: Variant) -> bool:
        """Whether ``v``'s steps replay on a whole program that holds its slot (``map_steps``). A
        kernel alone may allow what its program does not: a reassociated sum is exact enough in
        a kernel whose output is the sum, not where the program compares it (an argmax), so the
        guards that read the rest of the program refuse the step there. Such a variant could not
        be composed: it is left unmeasured."""
        for s in self.structures:
            for slot in s.slots:
                if slot.key == v.base:
                    got, _, _ = map_steps(self.engine, s.program, slot, self.variants[v.base].program, v.steps,
                                          v.keys)
                    return got is not None
        return True

    def _verify_structure(self, s: Structure) -> bool:
        key = renaming_key(s.program)
        tol = path_tolerance([s.step.get("exactness", "")])
        o = self.run.evaluator.recorded_outcome(key)
        if o is None:
            v = self.run.evaluator.verify(self.run.program, s.program, tol)
            o = CandidateOutcome(key, ACCEPTED if v.equal else v.reason, v.message, tol, v.max_abs_err, seconds=v.seconds)
        self._sample("structure", o, strategy=s.step["strategy"], step=s.step)
        s.verified = o.accepted
        return s.verified

    # ------------------------------------------------------------------ the local search

    def _expand(self, v: Variant) -> None:
        """``v``'s moves (``search.kernel_slots.kernel_candidates``: composite moves, then one-step
        variants) into its slot's e-class, within the limits. Composites rank first; one-step
        variants in a seeded order in which strategies take turns (ties of the estimates)."""
        lim = self.limits
        if v.expanded or v.depth >= lim.depth or lim.stop:
            return
        if len(self.variants) >= lim.nodes:
            lim.stop = f"kernel nodes ({lim.nodes})"
            return
        if lim.seconds_spent >= lim.seconds:
            lim.stop = f"kernel enumeration time ({lim.seconds:g} s)"
            return
        v.expanded = True
        t0 = time.perf_counter()
        found = kernel_candidates(self.engine, v.program, getattr(self.run.space, "composites", None))
        lim.enumerated += len(found)
        composites = [c for c in found if c.composite]
        ranks = {id(c): COMPOSITE_RANK + i for i, c in enumerate(composites)}
        ranks.update({id(c): r for r, c in enumerate(_round_robin([c for c in found if not c.composite], self.rng))})
        for c in found:
            if len(self.variants) >= lim.nodes:
                lim.stop = f"kernel nodes ({lim.nodes})"
                break
            if c.key in self.variants or not self.graph.add_variant(v.base, c.key):
                continue
            keys = tuple(renaming_key(s.program) for s in c.steps[:-1]) + (c.key,)
            records = tuple(_record_of(s) for s in c.steps)
            self.variants[c.key] = Variant(c.key, v.base, c.program, v.steps + records, v.keys + keys, v.key,
                                           ranks[id(c)], moves=v.moves + 1, composite=c.composite,
                                           description=c.description,
                                           move_kind=move_kind(records))
            self._children.setdefault(v.key, []).append(c.key)
            self.composite_variants += bool(c.composite)
        lim.seconds_spent += time.perf_counter() - t0

    # ------------------------------------------------------------------ phases

    def _structures(self, root_slots: list) -> None:
        """The root's cross-statement steps as structures (all in the e-graph); those with fewer
        statements than the root are queued for exploration, fewest statements first."""
        found = []
        for c in self.run.menu(self.run.root):
            if local_slot(self.run.program, c.program, root_slots) is None:
                try:
                    slots = split(c.program)
                except LeirError:
                    continue
                found.append((len(c.program.body), c.number, c, slots))
        found.sort(key=lambda t: (t[0], t[1]))
        for _, _, c, slots in found:
            fresh = {sl.key for sl in slots} - set(self.variants)
            if len(self.variants) + len(fresh) > self.limits.nodes:
                self.limits.stop = f"kernel nodes ({self.limits.nodes})"
                break
            s = Structure(len(self.structures), c.program, c.record(), slots)
            for sl in slots:
                self._add_slot_kernel(sl)
            self.structures.append(s)
            self.graph.add_structure(s.sid, [sl.key for sl in slots])
        self._queued = deque(s for s in self.structures[1:] if len(s.program.body) < len(self.run.program.body))

    def _structure_due(self) -> bool:
        """Queue the samples of the next structure to explore when one is due: the i-th after
        i x ``STRUCTURE_SAMPLES`` samples of the local search, skipping those whose new kernels
        would cost more than ``STRUCTURE_SHARE`` of that (a rule of samples spent, never of the
        budget: a larger budget makes the same choices first)."""
        if len(self.run.samples) < self._phase_start + self._explored * STRUCTURE_SAMPLES:
            return False
        while self._queued:
            s = self._queued.popleft()
            new = [sl for sl in s.slots if self.variants[sl.key].status is None]
            if 1 + len(new) > STRUCTURE_SHARE * STRUCTURE_SAMPLES:
                continue
            self._explored += 1
            self._pending.append(lambda s=s: self._verify_structure(s))
            for sl in new:
                self._pending.append(lambda s=s, sl=sl: s.verified and self.variants[sl.key].status is None
                                     and self._measure(self.variants[sl.key]))
            return True
        return False

    def _priorities(self, bases: list[str], est: dict) -> dict:
        """The search's order of every unmeasured variant of the given slots (``priority``)."""
        out = {}
        bests = {b: self._best(b) for b in bases}
        total = sum(best.ms for best in bests.values() if best is not None)
        for b, best in bests.items():
            if best is None:
                continue
            large = best.ms >= COMPOSITE_SHARE * total
            members = self.graph.members.get(b, [b])
            # composites first: up to COMPOSITE_FIRST of a slot's are measured before its one-step variants
            done = [self.variants[k] for k in members if self.variants[k].rank < 0
                    and self.variants[k].status is not None]
            flat: dict = {}                 # (parent, kind) -> moves measured from it that did not beat it
            stale: dict = {}                # line's last improvement -> moves measured below it that did not
            lines: dict = {}                # variant -> its line's last improvement (walked once per order)

            def line(key: str, lines: dict = lines) -> str:
                if key not in lines:
                    lines[key] = self._improvement(key)
                return lines[key]

            for k in members:
                v = self.variants[k]
                if v.status is not None and v.parent is not None and not self._improved(v):
                    flat[(v.parent, v.label)] = flat.get((v.parent, v.label), 0) + 1
                    a = line(v.parent)
                    stale[a] = stale.get(a, 0) + 1
            for k in members:
                if k in est:
                    v = self.variants[k]
                    out[k] = priority(v, best.ms, est[k], done, large, flat.get((v.parent, v.label), 0),
                                      stale.get(line(v.parent), 0) if v.parent is not None else 0,
                                      stale.get(line(best.key), 0))
        return out

    def _improved(self, v: Variant) -> bool:
        """Whether a measured variant beat its parent, and every sibling of its kind measured before
        it, by ``IMPROVEMENT`` (at least the noise floor): five storage layouts of one tensor that each
        beat the parent by the first one's 8% are one improvement and four ties, not five lines."""
        p = self.variants[v.parent]
        if not (v.ms and p.ms):
            return False
        ref = min([p.ms] + [s.ms for s in (self.variants[k] for k in self._children.get(v.parent, ()))
                            if s.label == v.label and s.ms and 0 <= s.order < v.order])
        return v.ms < ref / (1 + max(IMPROVEMENT, self.options.noise_floor))

    def _improvement(self, key: str) -> str:
        """The variant's line's last improvement: itself or its nearest ancestor that beat its parent,
        else the slot's kernel."""
        v = self.variants[key]
        while v.parent is not None and not (v.status is not None and self._improved(v)):
            v = self.variants[v.parent]
        return v.key

    def _explore(self) -> None:
        """Until one sample is left (the composed program's): every ``compose_every`` samples the
        choice so far is composed and confirmed against the original (the sample numbered a
        multiple of ``compose_every``, so a run with a larger budget composes what a run with that
        budget returns), a due structure is explored, else one kernel move is measured."""
        every = self.options.compose_every
        self._phase_start = len(self.run.samples)
        while self.left > 1:
            n = len(self.run.samples)
            if n % every == every - 1 and self._composed_at != n:
                self._composed_at = n
                self._checkpoint_composition()
            elif self._pending:
                self._pending.popleft()()
            elif not self._structure_due() and not self._move():
                return
        self.limits.stop = self.limits.stop or "budget"

    def _move(self) -> bool:
        """Measure one kernel move: the search chooses where (the slot and kernel state of the
        unmeasured variant with the largest expected gain in the optimistic extraction), the run's
        policy which of that state's moves (``Policy.kernel_move``). False when nothing is left."""
        got = self._extract(self._estimates(list(self.graph.members)))
        if got is None:
            self.limits.stop = self.limits.stop or "no measured choice"
            return False
        bases = self.graph.structures[got[0]]
        for b in bases:
            best = self._best(b)
            if best is not None:
                self._expand(best)
        est = self._estimates(bases)
        prio = self._priorities(bases, est)
        if not prio:
            self.limits.stop = self.limits.stop or "kernel space exhausted"
            return False
        top = self.variants[max(prio, key=lambda k: prio[k])]
        ask = self._ask(self.variants[top.parent], bases, est, prio)
        pick = self.run.policy.kernel_move(ask)
        if pick.failure is not None or pick.index is None or not 0 <= pick.index < len(ask):
            f = dict(pick.failure or {"reason": "no choice", "message": "the policy chose no move"})
            self.run.record_sample(self.run.root, "failed answer", None, status=f["reason"], message=f.get("message"),
                                   call=pick.call, answer=f.get("answer"), slot_kernel=top.base, strategy=None)
            return True
        choice = {"policy": self.options.policy, "moves": len(ask), "call": pick.call, **pick.extra}
        self._measure(self.variants[ask.keys[pick.index]], choice)
        return True

    def _ask(self, state: Variant, bases: list, est: dict, prio: dict) -> KernelAsk:
        """The question at ``state``: its unmeasured moves, the search's estimates and order."""
        children = sorted((v for v in self.variants.values() if v.parent == state.key and v.key in prio),
                          key=lambda v: v.key)
        measured = [v for v in self.variants.values() if v.parent == state.key and v.status is not None
                    and v.status != NOT_IN_CONTEXT]
        base = self.variants[state.base]
        slot = bases.index(state.base) if state.base in bases else 0

        def build():
            done = tuple(f"{v.label}: " + (f"{state.ms / v.ms:.3g}x {v.verdict or ''}".rstrip()
                                           if v.ms and state.ms else str(v.status))
                         for v in sorted(measured, key=lambda v: v.order))
            ks = KernelState(self.run.program.name, slot, len(bases), state.program, state.key,
                             tuple(state.strategies), (base.ms / state.ms) if base.ms and state.ms else 1.0, done)
            return kernel_question(ks, [kernel_move(v.key, state.program, v.program, v.steps[-1], v.composite,
                                                    v.description) for v in children], self.options)

        return KernelAsk(slot, [v.key for v in children], [v.label for v in children], [est[v.key] for v in children],
                         [prio[v.key] for v in children],
                         [{"label": v.label, "verdict": v.verdict, "status": v.status,
                           "ratio": (state.ms / v.ms) if v.ms and state.ms else None} for v in measured], build)

    # ------------------------------------------------------------------ composition

    def _compose(self, sid: int, keys: list[str]):
        s = self.structures[sid]
        program, path = s.program, ([s.step] if s.step else [])
        mapping = {"exact": 0, "re-derived": 0, "dropped": 0}
        tail: list = []
        for slot, key in reversed(list(zip(s.slots, keys))):   # last slot first: earlier sites stay put
            v = self.variants[key]
            if not v.steps:
                continue
            got, recs, how = map_steps(self.engine, program, slot, self.variants[v.base].program, v.steps, v.keys)
            mapping[how] += 1
            if got is not None:
                program, tail = got, tail + recs
        return program, path + tail, mapping

    # ------------------------------------------------------------------ the whole search

    def execute(self) -> None:
        run = self.run
        root_slots = split(run.program)
        for sl in root_slots:
            self._add_slot_kernel(sl)
        self.structures.append(Structure(0, run.program, None, root_slots, True))
        self.graph.add_structure(0, [sl.key for sl in root_slots])
        if self.left < len(root_slots) + 1:
            self._finish_stats(root_slots, None)
            return run.stop(f"budget below the kernels' need ({len(root_slots)} slots + 1)")
        for sl in root_slots:
            self._measure(self.variants[sl.key])
        self._structures(root_slots)
        self._explore()
        composed = None
        got = self._extract(None)
        if got is not None and self.left >= 1:
            composed = self._final(*got)
        self._finish_stats(root_slots, composed)
        run.stop(f"kernels: {self.limits.stop}")

    def _checkpoint_composition(self) -> None:
        """The extraction over what is measured so far, composed and confirmed (a sample) when it
        is a program not composed before."""
        got = self._extract(None)
        if got is not None:
            self._final(*got)

    def _final(self, sid: int, keys: list[str], predicted: float) -> dict:
        """Compose the extraction, verify the whole program against the original and time it
        against the original in paired rounds (a sample); a composition significantly faster than
        the original becomes a node."""
        run = self.run
        program, path, mapping = self._compose(sid, keys)
        out = {"at_sample": len(run.samples), "structure": sid,
               "structure_step": (self.structures[sid].step or {}).get("strategy"),
               "predicted_ms": predicted, "steps": len(path), "mapping": mapping, "kernels": keys}
        key = renaming_key(program)
        if key in run.by_key:
            n = run.by_key[key]
            out.update({"node": n.id, "measured_ms": n.median_ms, "speedup": n.speedup, "ci": n.ci,
                        "verdict": n.verdict})
        elif key in self._composed or key == run.root_key:
            out.update({"status": "composed before" if key != run.root_key else "the original"})
        else:
            self._composed.add(key)
            tol = path_tolerance([st.get("exactness", "") for st in path])
            res = run.measure(run.root, None, program, key, tol, "composed", [st["strategy"] for st in path],
                              strategy="kernels", steps=path, predicted_ms=predicted)
            run.learn([res])
            outcome, idx = res.outcome, res.sample
            out.update({"status": outcome.status, "measured_ms": outcome.median_ms, "speedup": outcome.ratio,
                        "ci": outcome.ci, "verdict": outcome.verdict})
            if outcome.accepted:
                label = path[-1]["strategy"] if path else "kernels"
                node = run.add_node(run.root, program, key, tuple(Step.from_json(st) for st in path), label,
                                    outcome, idx, via="kernels")
                out["node"] = node.id
        if out.get("measured_ms"):
            out["predicted_over_measured"] = predicted / out["measured_ms"]
        self.compositions.append(out)
        return out

    def _finish_stats(self, root_slots: list, composed: Optional[dict]) -> None:
        slots = []
        for sl in root_slots:
            base = self.variants[sl.key]
            best = self._best(sl.key)
            members = self.graph.members.get(sl.key, [sl.key])
            slots.append({"statements": [sl.start, sl.stop], "kernel": sl.key, "ms": base.ms,
                          "best_ms": best.ms if best else None, "best_strategies": best.strategies if best else [],
                          "variants": len(members),
                          "measured": sum(1 for k in members if self.variants[k].status not in (None, NOT_IN_CONTEXT))})
        whole = self.run.root.median_ms
        kernel_sum = sum(s["ms"] for s in slots) if all(s["ms"] for s in slots) else None
        from lowering.measure import machine_label
        self.stats = {
            "target": self.options.target, "machine": machine_label(self.options.target, self.options.threads),
            "slots": slots, "original_ms": whole, "kernel_sum_ms": kernel_sum,
            "kernel_sum_over_whole": (kernel_sum / whole) if (kernel_sum and whole) else None,
            "structures": len(self.structures),
            "structures_explored": sum(1 for s in self.structures[1:] if s.verified is not None),
            "structures_equal": sum(1 for s in self.structures[1:] if s.verified),
            "egraph": self.graph.size(),
            "variants": len(self.variants), "composite_variants": self.composite_variants,
            "not_in_context": self.not_in_context,
            "measured": sum(1 for v in self.variants.values() if v.status not in (None, NOT_IN_CONTEXT)),
            "limits": {"max_depth": self.limits.depth, "kernel_nodes": self.limits.nodes,
                       "kernel_seconds": self.limits.seconds},
            "enumerated": self.limits.enumerated, "enumeration_seconds": round(self.limits.seconds_spent, 3),
            "local_stop": self.limits.stop, "model_rows": len(self.model.rows), "model_prior": self.prior,
            "composed": composed, "compositions": self.compositions,
            "compose_every": self.options.compose_every,
        }
        self.run.kernel_stats = self.stats


def kernels(run, p: dict) -> None:
    """The ``kernels`` algorithm (see the module text)."""
    KernelSearch(run, p).execute()
