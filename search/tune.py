"""``python -m search.tune PROG [--trials N] [--json]``: TVM MetaSchedule on a LEIR program.

The tool users would otherwise pick, and the last stage of rewrite-then-tune: our search
makes rewrites MetaSchedule cannot (fusion, online softmax, CSE, layouts), MetaSchedule then
adds its schedules. The program is lowered to plain TIR (every loop serial: MetaSchedule adds
its own parallel, vectorised and unrolled loops), tuned with ``tune_tir`` (XGBoost cost model,
evolutionary search, ``--trials`` measurements), the best schedule is built, checked against
our lowering of the original on seeded inputs, and timed with the Verifier's protocol next to
the original (same process, alternating rounds).

What MetaSchedule is given is the *plain form* (``search.plain.plain_program``): our algebraic and
cross-statement rewrites kept, our loop schedules undone (loops serial, splits and tiles fused
back). Its TIR differs from our normal lowering in one way (``tune_module``): a *scan* block, one
that reads an element of the tensor it writes with no reduction init (the prefix max and running
sum of the prefix/online softmax forms: ``F[i, a] = max(F[i, a-1], A[i, a])``), gets its loops
annotated ``leir_scan``. Such a block is neither complete nor a reduction, so ``Parallel`` on any
loop above it fails its compact-dataflow check and ``RewriteParallelVectorizeUnroll`` rejected
every schedule of the function (512 more failures a round, none measured); annotated loops are ones that post-processor
leaves alone, so MetaSchedule leaves the scan as it is and schedules every other block as usual; the
rows of a scan are independent, so its leading loops that no two iterations share are made parallel
beforehand (``search.plain.parallel_scans``). A float32 ``exp`` is TVM's ``T.exp`` there, not our
vector arithmetic (``lowering.vecmath``): MetaSchedule's feature extraction rejects the ``T.Let``
that writes it ("Do not have a default for prim.Let") and every softmax-like program failed, so it
tunes the exp a TVM user writes (one ``expf`` call per lane), as in the tools users would otherwise pick.

MetaSchedule can crash the process (TVM 0.27 with apache-tvm-ffi 0.1.15 segfaults in
``ToJSONGraph`` as soon as tuning starts; 0.1.14.post1 works): run this in a subprocess, as
``benchmarks/search.py`` does, so that a crash is a reported result. Its builder normally
imports ``tvm.s_tir.tensor_intrin`` in every build worker (over a minute on a loaded 2-core
machine, past the builder's timeout); float LLVM schedules need none of those intrinsics,
so the build function registered here leaves it out.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace

from lowering.builds import SEARCH_TIMED

BUILD_FUNC = "leir.tune.build"


def register_build() -> None:
    """The build worker's initializer: ``default_build`` without the tensor-intrinsic import."""
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    if tvm.get_global_func(BUILD_FUNC, allow_missing=True) is not None:
        return

    @tvm.register_global_func(BUILD_FUNC)
    def _build(mod, target, _params):  # noqa: ANN001
        from tvm.driver import build as tvm_build
        mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
        return tvm_build(mod, target=target)


def serial_program(program):
    """The same program with every loop serial (``L``), splits and tiles kept (what MetaSchedule
    was given before the plain form)."""
    from engine.leir.ast import Nest

    def items(body):
        return tuple(Nest(tuple(replace(l, kind="L") for l in it.loops), items(it.body)) if isinstance(it, Nest)
                     else it for it in body)
    return program.with_body(items(program.body))


SCAN_ANNOTATION = "leir_scan"


def scan_blocks(sch) -> list[str]:
    """Names of the blocks of ``sch`` that read what they write without a reduction init."""
    names, todo = [], list(sch.get_child_blocks(sch.get_sblock("root")))
    while todo:
        b = todo.pop(0)
        todo += list(sch.get_child_blocks(b))
        blk = sch.get(b)
        reads = {str(r.source.name) for r in blk.reads}
        if blk.init is None and reads & {str(w.source.name) for w in blk.writes}:
            names.append(blk.name_hint)
    return names


def tune_module(program):
    """``(IRModule, scratch, scans)``: the TIR MetaSchedule tunes for ``program``: its plain form
    lowered without our vectoriser, scans' independent outer loops parallel and their loops
    annotated (module doc)."""
    import tvm

    from lowering.tir import from_tvmscript, lower_module

    from .plain import parallel_scans, plain_program
    # TVM's own exp: MetaSchedule's feature extraction rejects our exp's T.Let ("Do not have a default
    # for prim.Let"), so it tunes what a TVM user writes (module doc)
    lowered = lower_module(parallel_scans(plain_program(program)), "llvm", vectorize=False, vector_exp=False)
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": from_tvmscript(lowered.text)}))
    scans = scan_blocks(sch)
    for name in scans:
        for loop in sch.get_loops(sch.get_sblock(name)):
            sch.annotate(loop, SCAN_ANNOTATION, 1)
    return sch.mod, lowered.scratch, scans


def check_ffi() -> str | None:
    """Why MetaSchedule cannot run in this environment, or None."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        v = version("apache-tvm-ffi")
    except PackageNotFoundError:
        return None
    import tvm_ffi
    loaded = getattr(tvm_ffi, "__version__", v)
    if str(loaded).startswith("0.1.15"):
        return (f"apache-tvm-ffi {loaded} crashes MetaSchedule in TVM 0.27 (segfault in ToJSONGraph); "
                "install apache-tvm-ffi==0.1.14.post1 (pip install -e '.[tune]')")
    return None


def tune(program, trials: int, *, seed: int = 0, work_dir: str | None = None, rounds: int = 3,
         warmup: int = 3, repeat: int = 7, min_repeat_ms: float = 2.0, original=None, build: str = SEARCH_TIMED) -> dict:
    """Tune the plain form of ``program`` with ``trials`` measurements; the best schedule's time
    next to ``original``'s (default: ``program``) under our lowering, both timed here, both compiled
    for the named ``build``'s target (``lowering.builds``; fast, as a search times by default)."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from .plain import plain_program
    t0 = time.perf_counter()
    plain = plain_program(program)
    mod, scratch, scans = tune_module(program)
    builder = ms.builder.LocalBuilder(f_build=BUILD_FUNC, initializer=register_build, max_workers=1,
                                      timeout_sec=120.0)
    register_build()
    with tempfile.TemporaryDirectory() as tmp:
        wd = work_dir or tmp
        db = ms.tune_tir(mod, tune_target(build), wd, max_trials_global=trials,
                         num_trials_per_iter=min(trials, 16), builder=builder,
                         runner=ms.runner.LocalRunner(timeout_sec=60.0), cost_model="xgb", database="json",
                         seed=seed, num_tuning_cores=1)
        records = db.get_all_tuning_records()          # in trial order
        measured = [r for r in records if r.run_secs and all(float(x) < 1e9 for x in r.run_secs)]
        sch = None
        if measured:
            best = min(measured, key=lambda r: statistics.fmean(float(x) for x in r.run_secs))
            sch = tvm.s_tir.Schedule(best.workload.mod)
            best.trace.apply_to_schedule(sch, remove_postproc=False)
    out = {"trials": trials, "build": build, "records": len(records), "measured": len(measured), "scan_blocks": scans,
           "plain_changed": plain.to_leir() != serial_program(program).to_leir(),
           "tune_seconds": round(time.perf_counter() - t0, 1)}
    if sch is None:
        out.update({"ok": False, "reason": "no valid schedule"})
        return out
    out.update(evaluate_schedule(sch.mod, plain, scratch, original=original, rounds=rounds,
                                 warmup=warmup, repeat=repeat, min_repeat_ms=min_repeat_ms, build=build))
    out["best_trial_ms"] = min(statistics.fmean(float(x) for x in r.run_secs) * 1e3 for r in measured)
    if not out["rel_err"] <= MAX_REL_ERR:          # a schedule that computes something else is no result
        out.update({"ok": False, "reason": f"tuned schedule differs from the original (rel err {out['rel_err']:.2e})"})
    return out


MAX_REL_ERR = 1e-4


def tune_target(build: str = SEARCH_TIMED):
    """MetaSchedule's target: the CPU and attributes of our llvm ``build`` (``lowering.run.llvm_target``),
    so tuned and searched programs are compiled for the same instructions; ``num-cores`` as our timings."""
    import tvm

    from lowering.run import llvm_target
    t = dict(llvm_target(build).export())
    t.update({"kind": "llvm", "num-cores": 2})
    return tvm.target.Target(t)


def evaluate_schedule(mod, program, scratch, *, original=None, rounds: int = 3, warmup: int = 3,
                      repeat: int = 7, min_repeat_ms: float = 2.0, build: str = SEARCH_TIMED) -> dict:
    """Check a scheduled module of ``program`` (whose ``main`` takes the inputs, the outputs and
    the ``scratch`` buffers of our lowering) against our ``build`` of ``original`` on seeded inputs,
    and time both in alternating rounds."""
    import numpy as np
    import tvm

    from lowering.inputs import random_inputs
    from lowering.run import arguments, run_built
    from lowering.run import build as build_program
    original = original if original is not None else program
    ex = tvm.compile(mod, target=tune_target(build))
    dev = tvm.cpu(0)
    ins = random_inputs(original, 0, 0)
    orig_built = build_program(original, "llvm", build=build)
    want = run_built(orig_built, original, ins)
    a, o = arguments(program, ins, dev, scratch)
    ex["main"](*a, *o)
    err = max(float(np.max(np.abs(x.numpy() - want[d.name]))) if x.numpy().size else 0.0
              for d, x in zip(program.outputs, o))
    scale = max(float(np.max(np.abs(want[d.name]))) for d in program.outputs) or 1.0

    def time_fn(exe, fargs, symbol="main"):
        mod_ = exe.jit() if hasattr(exe, "jit") else exe
        for _ in range(warmup):
            mod_[symbol](*fargs)
        probe = mod_.time_evaluator(symbol, dev, number=1, repeat=1)(*fargs).results[0] * 1e3
        number = max(1, min(1000, int(min_repeat_ms / max(probe, 1e-6)) + 1))
        return statistics.median(r * 1e3 for r in mod_.time_evaluator(symbol, dev, number=number,
                                                                      repeat=repeat)(*fargs).results)
    oa, oo = arguments(original, ins, dev, orig_built.scratch)
    base, tuned = [], []
    for _ in range(rounds):
        base.append(time_fn(orig_built.executable, [*oa, *oo], orig_built.symbol))   # a batch's library: its symbol
        tuned.append(time_fn(ex, [*a, *o]))
    b, t = statistics.median(base), statistics.median(tuned)
    return {"ok": True, "original_ms": b, "tuned_ms": t, "speedup": b / t, "max_abs_err": err,
            "rel_err": err / scale}


def main(argv=None) -> int:
    from engine.leir.cli import run_cli
    return run_cli(_main, argv)


def _main(argv) -> int:
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import load_program, program_from_json
    from lowering.builds import add_search_build_argument
    ap = argparse.ArgumentParser(prog="python -m search.tune", description=__doc__.split("\n\n")[0])
    ap.add_argument("program", help="program file (.leir/.json), or a trajectory with --best")
    ap.add_argument("--best", action="store_true",
                    help="tune the plain form of the best program of a search trajectory (rewrite-then-tune)")
    ap.add_argument("--trials", type=int, default=64, help="MetaSchedule trials (default 64)")
    ap.add_argument("--seed", type=int, default=0)
    add_search_build_argument(ap, "tuned and timed")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--jobs", action="store_true",
                    help="PROGRAM is a JSON list of {name, program, original, trials}; one JSON line each "
                         "(one process pays MetaSchedule's start-up once)")
    from engine.leir.cli import say_defaults
    a = say_defaults(ap).parse_args(argv)
    why = check_ffi()
    if why:
        raise LeirError(why)
    if a.jobs:
        from pathlib import Path
        for job in json.loads(Path(a.program).read_text()):
            orig = program_from_json(job["original"])
            r = {"ok": False, "reason": "no program"}
            # "alternatives": programs tried in order until MetaSchedule finds a schedule for one
            for i, pj in enumerate([job["program"], *job.get("alternatives", [])]):
                try:
                    r = tune(program_from_json(pj), int(job["trials"]), seed=a.seed, original=orig,
                             build=job.get("build", a.build))
                except Exception as e:  # a TVM failure in one job is that job's result
                    r = {"ok": False, "reason": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
                r["alternative"] = i
                if r["ok"]:
                    break
            r["name"] = job["name"]
            print(json.dumps(r), flush=True)
        return 0
    if a.best:
        from engine.leir.parser import parse_body

        from .trajectory import load_trajectory
        rec = load_trajectory(a.program).record
        original = program_from_json(rec["program"])
        program = original.with_body(parse_body(rec["best"]["leir"]))
    else:
        program = original = load_program(a.program)
    r = tune(program, a.trials, seed=a.seed, original=original, build=a.build)
    r["program"] = program.name
    print(json.dumps(r) if a.json else
          (f"{program.name}: MetaSchedule {a.trials} trials: {r['speedup']:.3f}x over the original "
           f"({r['original_ms']:.4f} -> {r['tuned_ms']:.4f} ms, max abs err {r['max_abs_err']:.2e})"
           if r["ok"] else f"{program.name}: {r['reason']}"))
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
