"""``Run``: one search. It owns the nodes, the samples and the budget; the algorithm decides
what to expand, the policy what to propose, the evaluator whether it is equal and how fast.

A *sample* is a candidate paid for: a state verified for the first time in this run (and
timed when equal), or a model answer that could not be used (parse failure, an answer off
the menu, an HTTP error after retries, a timeout). The budget bounds the samples. A state
already evaluated costs nothing again, and an already visited state is never offered.

Measuring is the Run's alone: the policy generates proposals (seeing the run only through a
``search.context.PolicyContext``), the Run verifies them against the original and times the
equal ones together against the node they were proposed at (paired rounds: a verdict
``faster``/``slower``/``tie`` with an interval, ``search.candidate_eval``), stopping at the budget,
commits each fresh outcome to the evaluation database, lets the policy observe the results and
choose which accepted ones become nodes. At the end the best candidates are timed afresh against
the original; a best is reported only when its interval clears 1 + the noise floor, otherwise the
result is "no significant speedup" and the best is the original.

The public methods (``measure``, ``record_sample``, ``learn``, ``add_node``, ``evaluate``) are what
an algorithm that measures in its own way (``search.kernel_search``) uses.
"""
from __future__ import annotations

import sys
import time
from typing import Optional

from engine.leir.canonical import renaming_key

from .candidate_eval import CandidateEvaluator, CandidateOutcome, path_tolerance
from .options import SearchOptions
from .policies.base import Proposal, Request, Result
from .space import FreeEdge, Node, Reached, Space, edge_json


class Run:
    def __init__(self, program, options: SearchOptions, *, engine=None, out: Optional[str] = None,
                 progress=None, log=None, resume: Optional[dict] = None, verifier=None, database=None):
        """``resume``: the interrupted run's trajectory (its samples are not redone); ``database``:
        a ``search.run_database.RunDatabase`` (by default the one ``options.database`` names, or an
        in-memory one)."""
        from engine import Engine

        from .context import Budget, PolicyContext
        from .run_database import RunDatabase, machine_of, run_id
        from .policies import make_policy
        self.program = program
        self.options = options.validate()
        self.engine = engine if engine is not None else Engine(strategies=options.strategies)
        from .composite import load_table, resolve
        table = resolve(self.options.composites, self.options.policy, self.options.algorithm)
        self.space = Space(self.engine, load_table(table or None, [s.name for s in self.engine.rulebook.strategies])
                           if table is not None else None)
        self.run_id = run_id(program.to_json(), self.options.to_json())
        self.root_key = renaming_key(program)
        if database is None:
            database = RunDatabase(self.options.database,
                                   machine=machine_of(self.options.target, self.options.threads))
        self.database = database
        recorded, stored = {}, {}
        self._resume_root = (resume or {}).get("original")
        if resume is not None:
            # what the database holds of this run, then what the trajectory recorded
            stored = database.outcomes(self.root_key, self.options.target, self.run_id)
            recorded = {k: CandidateOutcome.from_json(o) for k, o in stored.items()}
            recorded.update({s["key"]: CandidateOutcome.from_json(s["outcome"]) for s in resume.get("samples", [])
                             if s.get("key") and s.get("outcome")})
            if self._resume_root is None:
                self._resume_root = database.baseline(self.root_key, self.options.target, self.run_id)
        self.resume = resume or {}            # the interrupted run's trajectory (policies reuse what they learnt)
        # outcomes the database already holds for this run (resumed: not committed twice)
        self._committed = set(stored)
        self.evaluator = CandidateEvaluator(program, options.target, options.trials, options.timeout, options.workers,
                                   options.seed, options.min_repeat_ms, options.repeat, recorded, log, verifier,
                                   protocol=self.options.protocol(), database=database, timed_build=self.options.build,
                                   threads=self.options.threads)
        self.out = out
        self.progress = progress if progress is not None else (lambda msg: print(msg, file=sys.stderr))
        self.nodes: list[Node] = []
        self.by_key: dict[str, Node] = {}
        self.closed: set[str] = set()         # states not to offer again: nodes, failed candidates
        self.samples: list[dict] = []
        self.calls: list[dict] = []
        self.repeats = 0                      # proposals of a state already evaluated (not samples)
        self.curve: list[list] = []           # [samples, best speedup so far]
        self._best_seen = 1.0
        self.stop_reason: Optional[str] = None
        self.started = time.perf_counter()
        self.seconds = 0.0
        self.root: Optional[Node] = None
        self.best: dict = {}
        self.budget = Budget(self.options.budget, lambda: len(self.samples))
        previous = ((self.resume.get("summary") or {}).get("policy") or {})
        self.context = PolicyContext(program, self.budget, root=lambda: self.root, record_call=self.record_call,
                                     previous=previous, engine=self.engine, space=self.space, database=database,
                                     target=self.options.target)
        self.policy = make_policy(self.options, self.context)

    # ------------------------------------------------------------------ budget and stopping

    @property
    def exhausted(self) -> bool:
        return len(self.samples) >= self.options.budget

    def stopped(self) -> bool:
        if self.exhausted and self.stop_reason is None:
            self.stop_reason = "budget"
        return self.stop_reason is not None

    def stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason

    # ------------------------------------------------------------------ nodes

    def start(self) -> Node:
        key = self.root_key
        resumed = self._resume_root is not None
        base = self.evaluator.measure_original(self._resume_root)
        if not resumed:
            self.database.add_original(self.run_id, key, self.options.target, base)
        self.root = Node(0, self.program, key, None, 0, median_ms=base["median_ms"], spread_ms=base["spread_ms"],
                         speedup=1.0)
        self.nodes.append(self.root)
        self.by_key[key] = self.root
        self.closed.add(key)
        self.curve.append([0, 1.0])
        self.progress(f"original: {base['median_ms']:.4f} ms (spread {base['spread_ms']:.4f})")
        return self.root

    def children(self, node: Node) -> list[Node]:
        return [self.nodes[i] for i in node.children]

    def parent_of(self, node: Node) -> Optional[Node]:
        return self.nodes[node.parent] if node.parent is not None else None

    def menu(self, node: Node) -> list:
        return self.space.menu(node, self.parent_of(node), self.closed)

    def menu_empty(self, node: Node) -> bool:
        return not self.menu(node)

    def significant(self, node: Node) -> bool:
        """Faster than the original beyond the noise floor by the product of its path's intervals."""
        return node.speedup_ci[0] > 1.0 + self.options.noise_floor

    def add_node(self, parent: Node, program, key: str, steps: tuple, strategy: str, outcome: CandidateOutcome,
                 sample: Optional[int], via: str = "policy") -> Node:
        """A verified, timed state becomes a child of ``parent`` (its outcome timed against it)."""
        n = Node(len(self.nodes), program, key, parent.id, parent.depth + len(steps), tuple(steps),
                 parent.path + tuple(steps), strategy, outcome.median_ms, outcome.spread_ms, outcome.speedup or 1.0,
                 sample, via, ratio=outcome.ratio or 1.0, ci=outcome.ci, verdict=outcome.verdict,
                 speedup_ci=list(outcome.speedup_ci or [1.0, 1.0]))
        self.nodes.append(n)
        self.by_key[key] = n
        self.closed.add(key)
        parent.children.append(n.id)
        if self.significant(n) and n.speedup > self._best_seen:
            self._best_seen = n.speedup
            if self.curve:
                self.curve[-1] = [self.curve[-1][0], self._best_seen]
        return n

    # ------------------------------------------------------------------ samples

    def record_call(self, record: dict) -> int:
        record["index"] = len(self.calls)
        self.calls.append(record)
        return record["index"]

    def record_sample(self, node: Node, kind: str, outcome: Optional[CandidateOutcome], **extra) -> int:
        """Charge one sample (the trajectory's ``samples``, the progress line, a checkpoint)."""
        s = {"index": len(self.samples), "node": node.id, "kind": kind}
        s.update(extra)
        if outcome is not None:
            s.update({"key": outcome.key, "status": outcome.status, "speedup": outcome.speedup,
                      "median_ms": outcome.median_ms, "spread_ms": outcome.spread_ms, "ratio": outcome.ratio,
                      "ci": outcome.ci, "verdict": outcome.verdict, "outcome": outcome.to_json()})
        self.samples.append(s)
        self.curve.append([len(self.samples), self._best_seen])
        status = s.get("status", "?")
        label = extra.get("strategy") or ""
        self.progress(f"[{len(self.samples)}/{self.options.budget}] node {node.id} {kind} {label}: {status}"
                      f"{describe(outcome) if outcome is not None else ''}")
        self.checkpoint()
        return s["index"]

    def measure(self, node: Node, prop: Optional[Proposal], program, key: str, tolerance: str, kind: str,
                labels: list, **extra) -> Result:
        """Verify one proposal against the original and time it against ``node`` (a sample unless
        the state was evaluated before in this run); ``labels``: the strategies of the steps from
        ``node`` to the candidate."""
        return self.measure_many(node, [(prop, program, key, tolerance, kind, labels, extra)])[0]

    def measure_many(self, node: Node, items: list) -> list:
        """``measure`` of several proposals at one node: verified one by one, the equal ones timed
        against ``node`` in one interleaved schedule; samples recorded in order. ``items``: (proposal,
        program, key, tolerance, kind, labels, sample fields)."""
        got = self.evaluator.evaluate([(program, key, tol) for _, program, key, tol, _, _, _ in items], parent=node)
        out = []
        for (prop, program, key, _tol, kind, labels, extra), (outcome, fresh) in zip(items, got):
            if outcome.timing is not None and "leir" not in extra:
                extra = dict(extra, leir=program.to_leir())   # what was timed (the cost model trains on it)
            idx = self.record_sample(node, kind, outcome, **extra) if fresh else self._sample_of(key)
            if not outcome.accepted:
                self.closed.add(key)
            out.append(Result(prop, program, key, outcome, fresh, [s.strategy for s in node.path] + list(labels), idx,
                              parent=node, moves=list(labels)))
        return out

    def evaluate(self, node: Node, program, key: str, tolerance: str) -> CandidateOutcome:
        """Verify and time a state against ``node`` without charging a sample (an outcome the run
        already paid for, or one an algorithm records itself with ``record_sample``)."""
        (outcome, _), = self.evaluator.evaluate([(program, key, tolerance)], parent=node)
        return outcome

    def learn(self, results: list) -> None:
        """The policy observes what was paid for; each fresh outcome is committed to the
        database once (with the features the policy computed)."""
        fresh = [r for r in results if r.fresh]
        if not fresh:
            return
        self.policy.observe(fresh)
        for r in fresh:
            if r.key in self._committed:          # a resumed run's outcome, stored by the run that paid for it
                continue
            self._committed.add(r.key)
            self.database.add_outcome(self.run_id, self.root_key, self.options.target, self.program.name,
                                      r.outcome.to_json(), r.features)

    def _prepare(self, node: Node, prop: Proposal):
        """(program, key, edge steps, label, tolerance, kind, sample fields, reached) of a proposal."""
        if prop.candidate is not None:
            c = prop.candidate
            steps = tuple(st.detached() for st in c.steps)
            tol = path_tolerance([s.exactness for s in node.path] + c.exactness)
            extra = {"strategy": c.label, "menu_number": c.number, "call": prop.call}
            if len(steps) == 1:
                extra["step"] = c.record()
            else:
                extra["steps"] = c.records()
            extra.update(prop.extra)
            return c.program, c.key, steps, c.label, tol, "menu", extra, None
        program, label = prop.program, prop.label or "free-form"
        key = renaming_key(program)
        step, replays = self.space.steps_reaching(node, key)
        reached = Reached(step.detached(), replays) if step is not None else None
        # the node's edge: the rule's step when it replays, else the text itself
        steps = (reached.step,) if replays else (FreeEdge(label, program.to_leir()),)
        extra = {"strategy": label, "call": prop.call, "leir": program.to_leir(),
                 "reached_by_step": reached.to_json() if reached is not None else None}
        return program, key, steps, label, "strict", "free", extra, reached

    def expand(self, node: Node, k: int, history: bool = True) -> list[Node]:
        """The policy generates proposals at ``node`` (``k``: the nodes wanted); the Run
        verifies and times them (charging the budget, never past it); the policy observes the
        results and chooses which accepted ones become children. Returns the new children."""
        if self.stopped():
            return []
        menu = self.menu(node)
        if self.policy.needs_menu and not menu:
            return []
        req = Request(node, self.parent_of(node), menu, k, self.options.algorithm, history)
        node.expanded = True
        results, edges = [], {}
        batch, edges_of, pending = [], [], set()
        for prop in self.policy.generate(req):
            if prop.failure is not None:
                if len(self.samples) + len(pending) >= self.options.budget:
                    break
                f = dict(prop.failure)
                node.failures.append(f)
                self.record_sample(node, "failed answer", None, status=f["reason"], message=f.get("message"),
                                   call=prop.call, answer=f.get("answer"), leir=f.get("leir"), strategy=prop.label)
                continue
            program, key, steps, label, tol, kind, extra, reached = self._prepare(node, prop)
            fresh = self.evaluator.known(key) is None and key not in pending
            if fresh and len(self.samples) + len(pending) >= self.options.budget:
                break                                 # it would be a new sample: the budget is spent
            if key in self.by_key:                    # a visited state (free-form answers only)
                self._repeat(node, key, program)
                continue
            if fresh:
                pending.add(key)
            batch.append((prop, program, key, tol, kind, [s.strategy for s in steps], extra))
            edges_of.append((steps, label, kind, reached))
        for r, edge in zip(self.measure_many(node, batch) if batch else [], edges_of):
            results.append(r)
            edges[id(r)] = edge
            if not r.accepted:
                node.failures.append({"reason": r.outcome.status, "message": r.outcome.message, "key": r.key,
                                      "leir": r.program.to_leir() if edge[2] == "free" else None})
        self.learn(results)
        new = []
        for r in self.policy.choose(req, results):
            if not r.accepted:
                continue
            if r.key in self.by_key:                  # the same state proposed twice in one batch
                self._repeat(node, r.key, r.program)
                continue
            steps, label, kind, reached = edges[id(r)]
            # a menu move's node is named by its last step (the inverse rule reads it); the
            # composite's name stays in its sample
            name = steps[-1].strategy if kind == "menu" else label
            child = self.add_node(node, r.program, r.key, steps, name, r.outcome, r.sample)
            child.reached_by = reached if kind == "free" else None
            new.append(child)
        return new

    def _repeat(self, node: Node, key: str, program) -> None:
        self.repeats += 1
        same = "root" if key == self.root.key else ("current" if key == node.key else "visited")
        node.failures.append({"reason": f"same as the {same} IR", "key": key, "leir": program.to_leir()})

    def _sample_of(self, key: str) -> Optional[int]:
        for s in self.samples:
            if s.get("key") == key:
                return s["index"]
        return None

    def rollout(self, node: Node, depth: int) -> Optional[Node]:
        """A random walk of ``depth`` legal steps from ``node`` (seeded; inverse and visited
        states withheld); its end is verified against the original and timed (a sample) and,
        when equal, becomes a node whose edge is the whole walk."""
        rng = self.policy.rng
        steps, program, current = [], node.program, node
        for _ in range(depth):
            menu = self.space.menu(current, self.parent_of(current) if current is node else None, self.closed)
            if not menu:
                break
            c = menu[rng.randrange(len(menu))]
            steps.extend(st.detached() for st in c.steps)   # a composite move: all its steps
            program = c.program
            current = Node(-1, program, c.key, None, 0, strategy=c.step.strategy)
        if not steps:
            return None
        key = renaming_key(program)
        if key in self.by_key:
            return self.by_key[key]
        if self.exhausted and self.evaluator.known(key) is None:
            return None
        tol = path_tolerance([s.exactness for s in node.path + tuple(steps)])
        r = self.measure(node, Proposal(program=program, label="rollout"), program, key, tol, "rollout",
                         [s.strategy for s in steps], strategy="rollout", steps=edge_json(steps))
        self.learn([r])
        if not r.accepted:
            return None
        return self.add_node(node, program, key, tuple(steps), steps[-1].strategy, r.outcome, r.sample,
                             via="rollout")

    # ------------------------------------------------------------------ the whole search

    def execute(self):
        from .algorithms import ALGORITHMS, params
        if self.root is None:
            self.start()
        try:
            ALGORITHMS[self.options.algorithm](self, params(self.options))
        finally:
            self.stop("interrupted" if self.stop_reason is None else self.stop_reason)
            self.policy.close()
        self.finish()
        return self

    def finish(self) -> None:
        """The confirmation: the original and the nodes to confirm (``to_confirm``) timed afresh in
        interleaved rounds; the best is the fastest whose interval against the original clears 1 +
        the noise floor, else the original ("no significant speedup")."""
        ranked = sorted((n for n in self.nodes[1:] if n.speedup), key=lambda n: (-n.speedup, n.id))
        top = to_confirm(ranked, self.options.confirm, self.options.compose_every, len(self.samples))
        confirmed = self.evaluator.confirm([n.program for n in top])
        floor = self.options.noise_floor
        best, conf = self.root, None
        for n, c in zip(top, confirmed):
            if c is not None and c["verdict"] == "faster" and (conf is None or c["speedup"] > conf["speedup"]):
                best, conf = n, c
        candidate = max((c for c in confirmed if c is not None), key=lambda c: c["speedup"], default=None)
        significant = conf is not None
        if not top and ranked:          # --confirm 0: the search's own estimate, when significant
            sig = [n for n in ranked if self.significant(n)]
            if sig:
                best, significant = sig[0], True
        speedup = conf["speedup"] if conf else (best.speedup if significant else 1.0)
        ci = conf["ci"] if conf else (best.speedup_ci if significant else [1.0, 1.0])
        self.best = {"node": best.id, "key": best.key, "leir": best.leir, "speedup": speedup, "ci": ci,
                     "significant": significant, "noise_floor": floor, "confidence": self.options.confidence,
                     "search_speedup": best.speedup, "search_ci": best.speedup_ci,
                     "median_ms": conf["candidate_ms"] if conf else best.median_ms, "spread_ms": best.spread_ms,
                     "original_ms": conf["parent_ms"] if conf else self.root.median_ms,
                     "original_spread_ms": self.root.spread_ms,
                     "steps": edge_json(best.path), "strategies": sorted({s.strategy for s in best.path}),
                     "confirmed": conf,
                     "confirmations": [{"node": n.id, "search_speedup": n.speedup, **(c or {"failed": True})}
                                       for n, c in zip(top, confirmed)],
                     "best_candidate": ({"node": top[confirmed.index(candidate)].id, "speedup": candidate["speedup"],
                                         "ci": candidate["ci"], "verdict": candidate["verdict"]}
                                        if candidate is not None and not significant else None)}
        self.seconds = time.perf_counter() - self.started
        self.checkpoint(final=True)
        self.progress(f"best: {closing(self.best)} after {len(self.samples)} samples ({self.stop_reason})")

    def checkpoint(self, final: bool = False) -> None:
        if self.out:
            from .trajectory import write_trajectory
            write_trajectory(self.out, self.record(final))

    def record(self, final: bool = False) -> dict:
        from .algorithms import params
        from .trajectory import build_record
        return build_record(self, final, params(self.options))

    def close(self) -> None:
        self.evaluator.close()


def to_confirm(ranked: list, k: int, every: int, samples: int) -> list:
    """The ``k`` best nodes by the search's estimate (``ranked``), then the ``k`` best of those made
    before each multiple of ``every`` samples: what a run with that budget would confirm. A search
    whose choices do not depend on the budget (the kernel search) makes the smaller run's choices
    first, so the larger run confirms the smaller one's result too and never returns a worse one
    (on the same timings, up to the confirmation's own noise)."""
    if k <= 0:
        return []
    out = ranked[:k]
    seen = {n.id for n in out}
    for cut in range(every, samples, every):
        for n in [n for n in ranked if n.sample is not None and n.sample < cut][:k]:
            if n.id not in seen:
                seen.add(n.id)
                out.append(n)
    return out


def describe(o: CandidateOutcome) -> str:
    """A timed outcome for a progress line: against its parent, then over the original."""
    if o.ratio is None or not o.ci:
        return f" {o.median_ms:.4f} ms" if o.median_ms else ""
    over = f", {o.speedup:.3f}x over the original" if o.speedup is not None else ""
    against = "its parent" if o.speedup is not None else "its kernel"
    return f" {o.ratio:.3f}x [{o.ci[0]:.3f}, {o.ci[1]:.3f}] vs {against} ({o.verdict}){over}"


def closing(best: dict) -> str:
    """A trajectory's result in words: the confirmed speedup with its interval, or that nothing
    was significantly faster than the original."""
    lo, hi = best.get("ci") or [None, None]
    if best.get("significant", (best.get("speedup") or 1.0) > 1.0):
        steps = best.get("steps") or []
        ci = f" [{lo:.3f}x, {hi:.3f}x]" if lo is not None else ""
        return f"node {best.get('node')}, {best['speedup']:.3f}x{ci} in {len(steps)} step(s)"
    cand = best.get("best_candidate")
    tail = (f"; best candidate node {cand['node']}: {cand['speedup']:.3f}x [{cand['ci'][0]:.3f}x, "
            f"{cand['ci'][1]:.3f}x], {cand['verdict']}") if cand else ""
    return f"no significant speedup (within 1 +/- {best.get('noise_floor', 0):g} of the original){tail}"


def run_search(program, options: SearchOptions, *, engine=None, out: Optional[str] = None, progress=None,
               log=None, resume: Optional[dict] = None, verifier=None, database=None):
    """Run one search to its end; returns the ``Trajectory`` (also written to ``out``).
    ``engine`` and ``verifier`` may be shared across runs (loading rules and starting TVM
    workers cost seconds)."""
    from .trajectory import Trajectory
    run = Run(program, options, engine=engine, out=out, progress=progress, log=log, resume=resume,
              verifier=verifier, database=database)
    try:
        run.execute()
        return Trajectory(run.record(final=True))
    finally:
        run.close()
