"""One task of a generation job: one program in, its verified rows and its failures out.

A task is a pure function of its spec and the job's options (plus the machine's timings when
measuring): it resolves its program (translating a workload or a KernelBench file, shrinking
it when asked), lists every one-step rewrite, samples them (seeded, stratified by strategy),
and for each candidate verifies it (3 seeded trials, the tolerance the rule's exactness
demands), renders its chain-of-thought from the rule and the provenance, and lowers both
programs to TIR. Nothing is written here: the driver commits a task's result once, so a task
that is retried (a worker died, the job was killed) never writes twice.

``Runner`` keeps what is expensive to set up (the rule engine, the Verifier and its worker
process) for all the tasks a worker process runs.
"""
from __future__ import annotations

import hashlib
import json
import random
import threading
import time

from engine.leir.diagnostics import LeirError
from engine.plumbing.records import json_nulls
from engine.rewrite.sampling import shuffled_groups, take_turns

from ..text import cot
from ..text.benefit import measured_sentence
from ..assembly.difficulty import difficulty
from .noop import noop_on_target
from .shrink import (
    WIDE_GRANULARITIES,
    points,
    shrink_with_granularity,
    smallest_instance,
)
from .walk import State, uncovered_first, walk

# options that change a task's result (the job fingerprint); everything else is how to run it
RESULT_OPTIONS = ("seed", "per_program", "strategies", "target", "verify_target", "time", "max_points", "shrink",
                  "timeout", "trials", "rules", "depth", "walks", "menu", "kernel_menu")
# result options added later: part of a job's fingerprint only when set, so the journals and task ids
# of jobs made before them stay valid
LATER_RESULT_OPTIONS = ("kernel_menu",)


def fingerprint(options: dict) -> dict:
    """The options that change a task's result (``RESULT_OPTIONS``), as the journal records them."""
    return {k: options.get(k) for k in RESULT_OPTIONS if k not in LATER_RESULT_OPTIONS or options.get(k)}


def row_id(program: dict, step_key: str) -> str:
    """Stable id of a row: a hash of the program record and the step's key."""
    text = json.dumps([program, step_key], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def task_id(spec: dict, options: dict) -> str:
    opts = fingerprint(options)
    text = json.dumps([spec, opts], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def stratified_sample(steps: list, n: int | None, rng: random.Random, covered: set | None = None,
                      fresh: set | None = None) -> list:
    """``n`` steps (all when ``n`` is None or larger) spread over strategies: strategies take
    turns in a seeded order (at a walk's states, ``walk.uncovered_first``), each drawing
    from its own seeded shuffle; returned in enumeration order, so the sample of a larger ``n``
    contains the sample of a smaller one's strategies."""
    if n is None or n >= len(steps):
        return list(steps)
    groups = shuffled_groups(range(len(steps)), lambda i: steps[i].strategy, rng,
                             arrange=lambda order: uncovered_first(order, covered, fresh))
    return [steps[i] for i in sorted(take_turns(groups, n))]


def verification_record(verdict, output_names: list[str]) -> dict:
    """The Verdict as stored in a row: per trial, one entry per output (a list, so every row
    has the same shape whatever its outputs are called); no wall time."""
    d = verdict.to_json()
    trials = []
    for t in d.get("trials", []):
        outs = t.get("outputs", {})
        trials.append({"trial": t.get("trial"), "seed": t.get("seed"), "equal": t.get("equal"),
                       "outputs": [{"name": n, **outs[n]} for n in output_names if n in outs]})
    tol = d.get("tolerance") or {}
    return json_nulls({"equal": d["equal"], "reason": d["reason"], "target": d["target"],
                       "tolerance": {"mode": tol.get("mode"), "formula": tol.get("formula"), "k": tol.get("k"),
                                     "reduction_length": tol.get("reduction_length")},
                       "max_abs_err": d.get("max_abs_err"), "max_rel_err": d.get("max_rel_err"), "trials": trials})


class Runner:
    """Runs tasks with one rule engine and one Verifier (built on first use)."""

    def __init__(self, options: dict):
        self.options = dict(options)
        self._engine = None
        self._verifier = None
        self._measurer = None
        self._target = None
        self._rules_dir = None
        self._enum_cache: dict = {}           # the walk's look-ahead enumerations, by LEIR text
        # kernel rows (--kernel-menu): verdicts and timings of kernel moves by renaming keys, for the
        # worker's life (dataset.text.kernel_menu), and the questions asked in the current task
        self.kernel_cache: dict = {"verified": {}, "timed": {}}
        self._kernel_asked: set = set()

    # ------------------------------------------------------------------ shared state

    @property
    def engine(self):
        if self._engine is None:
            from engine import Engine
            from engine.rewrite.rule_sources import check_same_rules, unbundle
            rules = None
            if self.options.get("rule_bundle") is not None:     # the driver's rule files, wherever this runs
                import tempfile
                self._rules_dir = tempfile.TemporaryDirectory(prefix="leir-rules-")
                rules = unbundle(self.options["rule_bundle"], self._rules_dir.name)
            self._engine = Engine(rules=rules, strategies=self.options.get("strategies") or "paper")
            check_same_rules(self.options.get("rules"), self._engine.rule_manifest, "the job")
        return self._engine

    def verify_target(self) -> str:
        """Where candidates run: ``auto`` is the CUDA device when the job targets cuda and one
        is present, else the CPU (llvm)."""
        if self._target is None:
            want = self.options.get("verify_target") or "auto"
            if want == "auto":
                want = "llvm"
                if self.options.get("target") == "cuda":
                    import tvm
                    want = "cuda" if tvm.cuda(0).exist else "llvm"
            self._target = want
        return self._target

    @property
    def verifier(self):
        """Candidates verified as their slot kernels (``lowering.compose``: a kernel built once for the
        parent and every candidate that keeps it) with ``--statement-builds``; on llvm only, the
        target whose composed outputs are checked bit for bit against whole builds."""
        if self._verifier is None:
            from lowering import Verifier

            from ..timing import timed_build_of
            target = self.verify_target()
            self._verifier = Verifier(target=target, trials=int(self.options.get("trials") or 3),
                                      timeout=self.options.get("timeout"), seed=int(self.options.get("seed") or 0),
                                      compose=target == "llvm" and not self.options.get("whole_builds"),
                                      timed_build=timed_build_of(self.options.get("time")))
        return self._verifier

    @property
    def measurer(self):
        """Paired timings (``lowering.measure.Measurer``) with the job's protocol; its cache is the
        job's evaluation database (``--database``) or this worker's memory, so a candidate is timed
        once per state, whether a row or a menu asks first. One-statement changes are timed by their
        kernels (``lowering.measure.statements``) with ``--statement-builds``."""
        if self._measurer is None:
            from lowering.measure import EvaluationDatabase, Measurer

            from ..timing import protocol_of_options
            db = EvaluationDatabase(self.options["database"]) if self.options.get("database") else None
            self._measurer = Measurer(self.verifier, protocol_of_options(self.options["time"]), database=db,
                                      statements=bool(self.options["time"].get("statements")))
        return self._measurer

    def close(self) -> None:
        self._measurer = None
        if self._verifier is not None:
            self._verifier.close()
            self._verifier = None
        if self._rules_dir is not None:
            self._rules_dir.cleanup()
            self._rules_dir = None

    # ------------------------------------------------------------------ one task

    def run(self, spec: dict) -> dict:
        t0 = time.perf_counter()
        out = {"index": spec["index"], "source": spec["source"], "status": "ok", "note": None, "program": None,
               "origin": None, "key": None, "rows": [], "failures": [], "invalid": [], "menu": [], "kernel_menu": [],
               "timed_menus": [], "counts": {"neighbours": 0, "sampled": 0, "verified": 0, "failed": 0}}
        try:
            self._run(spec, out)
        except LeirError as e:
            out["status"], out["note"] = "skipped", {"reason": "bad source", "message": _message(e)}
        out["seconds"] = round(time.perf_counter() - t0, 6)
        return out

    def _skip(self, out: dict, reason: str, message: str) -> None:
        out["status"], out["note"] = "skipped", {"reason": reason, "message": message}

    def _run(self, spec: dict, out: dict) -> None:
        from engine import renaming_key
        opts = self.options
        program, origin = resolve(spec)
        n = points(program)
        origin["points"] = n
        limit, target = opts.get("max_points"), opts.get("shrink")
        tried = ""
        if target and n > target:
            small, g = shrink_with_granularity(program, target, WIDE_GRANULARITIES)
            if small is None:       # kernel sizes and offsets are kept: take the smallest valid instance
                small, g = smallest_instance(program)
            if small is not None and (not limit or points(small) <= limit):
                origin["shrunk"] = {"from_points": n, "points": points(small), "granularity": g,
                                    "leir_sha256": hashlib.sha256(program.to_leir().encode()).hexdigest()[:16]}
                program = small
            else:
                tried = "; its smallest valid instance has " + (f"{points(small)} points" if small is not None else
                                                                "no smaller instance passes the semantic analysis")
        if limit and points(program) > limit:
            return self._skip(out, "too big", f"{program.name}: {points(program)} iteration points > --max-points "
                                              f"{limit}{tried or ' (--shrink verifies a smaller instance)'}")
        record = program.to_json()
        out["program"], out["origin"], out["key"] = record, origin, renaming_key(program)
        # the program must build, run and agree with itself; checked while the rules load (the
        # first time), since the Verifier's worker spends that time importing TVM
        checked: dict = {}
        verifier = self.verifier
        builds0 = dict(verifier.builds)     # how this task's programs were built (lowering.compose)
        th = threading.Thread(target=lambda: checked.update(v=verifier.verify(program, program, tolerance="exact")))
        th.start()
        _ = self.engine                     # the rules load meanwhile
        th.join()
        self_check = checked["v"]
        if not self_check.equal:
            return self._skip(out, "does not lower" if self_check.reason != "not equal" else "not deterministic",
                              f"{program.name}: {self_check.reason}: {self_check.message or ''}".strip())
        source = State(program)
        self._kernel_asked = set()
        n = walk(source, lambda st, covered, fresh: self._state(st, covered, fresh, origin, out), self._strategies_of,
                 int(opts.get("depth") or 1), int(opts.get("walks") or 1), int(opts.get("seed") or 0), out["key"])
        out["counts"]["states"] = n
        self._enum_cache.clear()
        out["counts"]["verified"], out["counts"]["failed"] = len(out["rows"]), len(out["failures"])
        out["builds"] = {k: n - builds0.get(k, 0) for k, n in sorted(verifier.builds.items())
                         if n > builds0.get(k, 0)}

    def _strategies_of(self, program) -> set:
        """The strategies of a program's one-step rewrites (the walk's look-ahead; remembered for
        the state the walk then expands)."""
        steps, _ = self._enumerated(program)
        return {s.strategy for s in steps}

    def _enumerated(self, program, keep: bool = True) -> tuple[list, list]:
        """(steps, invalid neighbours) of a program's enumeration; ``keep``: remember it until the
        next call with ``keep=False`` (which also forgets every other remembered one)."""
        text = program.to_leir()
        got = self._enum_cache.pop(text, None)
        if not keep:
            self._enum_cache.clear()
        if got is None:
            eng = self.engine
            seen = len(eng.stats()["invalid"])
            got = (eng.enumerate(program), eng.stats()["invalid"][seen:])
        if keep:
            self._enum_cache[text] = got
        return got

    def _state(self, st: State, covered, fresh, origin: dict, out: dict) -> list:
        """The rows of one state (a seeded sample of its verified one-step rewrites), appended to
        the task's result; returns the (row, step) pairs the walk chooses its next state from."""
        from engine import renaming_key
        eng, opts = self.engine, self.options
        program = st.program
        record = program.to_json()
        steps, invalid = self._enumerated(program, keep=False)
        out["invalid"] += [{"rule": b["rule"], "strategy": getattr(eng.owner(b["rule"]), "name", None),
                            "error": b["error"]} for b in invalid]
        out["counts"]["neighbours"] += len(steps)
        key = out["key"] if st.depth == 0 else renaming_key(program)
        rng = random.Random(f"{opts.get('seed', 0)}:{key}")
        sample = stratified_sample(steps, opts.get("per_program"), rng, covered, fresh)
        out["counts"]["sampled"] += len(sample)
        target = opts.get("target") or "llvm"
        tir0 = st.tir if st.tir is not None else self._tir(program, target)
        cuda0 = (st.cuda if st.cuda is not None else self._cuda(program)) if target == "cuda" else None
        seen: dict[str, str] = {}
        pairs = []
        first_failure = len(out["failures"])
        if len(sample) > 1:                 # compiled in batches (lowering.batch_build), then verified one by one
            self.verifier.prebuild([program, *_valid_programs(sample)])
        for step in sample:
            if step.leir in seen:          # the engine lists one step per distinct result: a bug if not
                out["failures"].append(self._duplicate(record, origin, step, seen[step.leir]))
                continue
            seen[step.leir] = step.rule
            row, failure = self._candidate(program, record, origin, step, tir0, cuda0)
            if row is not None:
                row["state"] = st.record()
                out["rows"].append(row)
                pairs.append((row, step))
            else:
                out["failures"].append(failure)
        if opts.get("time") and pairs:
            self._time(program, [r for r, _ in pairs], [s.program for _, s in pairs])
        if opts.get("menu"):
            self._menu(st, out, pairs, first_failure)
        if opts.get("kernel_menu"):
            from ..text.kernel_menu import kernel_state_menus
            for row, timed in kernel_state_menus(self, program, st.depth, self._kernel_asked):
                out["kernel_menu"] += [row] if row is not None else []
                out["timed_menus"].append(timed)        # every timed kernel question, answered or not
        return pairs

    def _time(self, program, rows: list, programs: list) -> None:
        """Each row's timing record: its program against the parent (``lowering.measure``); a row
        whose timing failed keeps ``timing`` null."""
        records = self.measurer.compare(program, programs)
        for row, rec in zip(rows, records):
            row["timing"] = rec
            row["cot"] += measured_sentence(rec)      # "" when the measurement failed

    def _menu(self, st: State, out: dict, pairs: list, first_failure: int) -> None:
        """The menu row of a state (``dataset.text.menu``), when an entry is measured faster, and its
        timed menu (``dataset.text.timed_menus``) whether or not; the entries this state's sample
        already verified and timed are not verified or timed again."""
        from ..text.menu import measured_menu, menu_row
        from ..text.timed_menus import menu_record
        verified = {r["step"]["key"]: True for r, _ in pairs}
        verified.update({f["step"]["key"]: False for f in out["failures"][first_failure:] if f["stage"] == "verify"})
        timed = {r["step"]["key"]: r["timing"] for r, _ in pairs}       # measured against this state
        q, entries = measured_menu(self, st.program, st.parent_program, st.depth, st.history, st.closed,
                                   verified=verified, timed=timed)
        row = menu_row(q, entries, st.program, st.depth, st.history)
        if row is not None:
            out["menu"].append(row)
        if entries:
            out["timed_menus"].append(menu_record(q, entries, st.program, st.depth, st.history))

    def _tir(self, program, target: str) -> str:
        from lowering.tir import lower_to_tvmscript
        return lower_to_tvmscript(program, target)

    def _cuda(self, program) -> str:
        from lowering.tir import cuda_source
        return cuda_source(program)

    @staticmethod
    def _provenance(step) -> dict:
        """The step as rows record it: exactly ``Step.to_json()``, so ``engine.apply --step``
        takes a row's ``step`` as it is."""
        return step.to_json()

    def _duplicate(self, record, origin, step, first_rule: str) -> dict:
        return {"id": row_id(record, step.key), "program": record["name"], "source": origin["source"],
                "step": self._provenance(step), "transformed": step.leir, "stage": "duplicate", "verdict": None,
                "message": f"the same program as an earlier step of this program (rule {first_rule}): the engine "
                           "listed one result twice instead of as one step with alternatives"}

    def _candidate(self, program, record, origin, step, tir0, cuda0):
        from lowering import LoweringError
        eng, opts = self.engine, self.options
        prov = self._provenance(step)
        rid = row_id(record, step.key)
        fail = {"id": rid, "program": record["name"], "source": origin["source"], "step": prov,
                "transformed": step.leir}
        try:
            transformed = step.program
        except Exception as e:          # an invalid neighbour is a rule bug
            return None, {**fail, "stage": "invalid", "verdict": None, "message": str(e)}
        # a row must replay: Engine.apply finds the step again by its (rule, site, params)
        try:
            again = eng.apply(program, {"rule": step.rule, "site": list(step.site), "params": step.choice})
        except LeirError as e:
            return None, {**fail, "stage": "replay", "verdict": None, "message": e.message}
        if again.to_leir() != step.leir:
            return None, {**fail, "stage": "replay", "verdict": None,
                          "message": "Engine.apply gives another program: another step of this program has the same "
                                     "rule, site and parameters (the parameters do not identify the step)"}
        verdict = self.verifier.verify_step(program, step)
        outputs = [d.name for d in program.outputs]
        if not verdict.equal:
            return None, {**fail, "stage": "verify", "verdict": verification_record(verdict, outputs),
                          "message": f"{verdict.reason}: {verdict.message or ''}".strip()}
        block = eng.strategy(step.strategy)
        meta = block.meta
        try:
            trace = cot.render(block, program, transformed, step)
        except cot.CotError as e:
            return None, {**fail, "stage": "cot", "verdict": verification_record(verdict, outputs), "message": str(e)}
        target = opts.get("target") or "llvm"
        try:
            tir1 = self._tir(transformed, target)
            cuda = {"original": cuda0, "transformed": self._cuda(transformed)} if target == "cuda" else None
        except LoweringError as e:
            return None, {**fail, "stage": "lower", "verdict": verification_record(verdict, outputs),
                          "message": e.message}
        row = {"id": rid, "program": record, "origin": origin, "step": prov, "transformed": step.leir,
               "difficulty": difficulty(meta), "cot": trace, "benefit": list(block.benefit), "numerical_risk": step.exactness != "bitwise",
               "verification": verification_record(verdict, outputs),
               "timing": None, "tir": {"target": target, "original": tir0, "transformed": tir1},
               "cuda": cuda, "noop_on_target": noop_on_target(target, cuda0, cuda and cuda["transformed"]),
               "seed": int(opts.get("seed") or 0), "split": None, "rules": eng.rule_manifest}
        return row, None


def _valid_programs(steps) -> list:
    """The programs of ``steps`` (an invalid neighbour, a rule bug ``_candidate`` reports, left out)."""
    out = []
    for step in steps:
        try:
            out.append(step.program)
        except Exception:
            continue
    return out


def _message(e: LeirError) -> str:
    return e.format().splitlines()[0] if isinstance(e, LeirError) else str(e)


# --------------------------------------------------------------------------- sources


def resolve(spec: dict):
    """(Program, origin record) of a task spec: a program record, a workload of the library at
    given shapes and dtype, or a KernelBench-style file (its text travels in the spec, so a
    worker on another machine needs no shared file system)."""
    kind = spec["kind"]
    origin = {"source": spec["source"], "sha256": spec.get("sha256"), "kind": kind, "workload": None,
              "shapes": None, "dtype": None, "points": None, "shrunk": None}
    if kind == "program":
        from engine.leir.files import program_from_json
        rec = spec["program"]
        try:
            return program_from_json(rec, spec.get("line", 1)), origin
        except LeirError as e:
            raise e.located(spec.get("file") or spec["source"]) from None
    if kind == "workload":
        from ..translate import translate
        from ..workloads import instantiate, registry
        w = registry()[spec["workload"]]
        inst = instantiate(w, spec["shapes"], spec["dtype"], seed=spec.get("seed", 0))
        origin.update(workload=w.name, shapes=json.dumps(spec["shapes"], sort_keys=True), dtype=spec["dtype"])
        try:
            tr = translate(inst.model, inst.inputs(spec.get("seed", 0)), w.name)
        except LeirError as e:
            raise LeirError(f"workload {w.name}: {e.message}") from None
        return tr.program, origin
    if kind == "kernelbench":
        import tempfile
        from pathlib import Path

        from ..translate import translate
        from ..translate.kernelbench import load
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / Path(spec["path"]).name
            path.write_text(spec["text"])
            try:
                loaded = load(path, {}, spec.get("dtype"), spec.get("seed", 0))
                tr = translate(loaded.model, loaded.inputs, loaded.name)
            except LeirError as e:     # named as the job names the file, never by the temporary copy
                e.file = spec["path"] if e.file in (None, str(path)) else e.file
                e.message = e.message.replace(str(path), spec["path"]).replace(d, ".")
                raise
        origin.update(dtype=spec.get("dtype"))
        return tr.program, origin
    raise LeirError(f"unknown task kind '{kind}'")
