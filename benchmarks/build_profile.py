"""Where a candidate's CPU time goes, stage by stage, from its program to its first timing.

    .venv/bin/python benchmarks/build_profile.py [-o out/build_profile] [--corpus 6] [--neighbours 4]
                                                 [--seed 0] [--no-shrink] [--batch-size 8]

Programs: the examples (``examples/*.leir``), ``--corpus`` programs drawn from
``examples/corpus/programs.jsonl`` with ``--seed`` (shrunk as ``dataset.generate --shrink`` shrinks
them, unless ``--no-shrink``), and for each ``--neighbours`` of its one-step rewrites (the paper's
strategies, drawn with the seed). Each candidate is built, verified against its program (3 trials at
its rule's tolerance) and timed against it (the paired protocol's defaults), in this process, the
way a dataset job's worker does, and its CPU time (every thread of the process, and the linker
process where one runs) is split into:

* ``lowering``: LEIR to the lowered script (``lowering.tir``, our Python; the text rendered for the
  on-disk cache's key);
* ``primfunc``: the PrimFunc built from the lowered script through ``tvm.script.ir_builder``
  (``lowering.tir.prim_func``; no TVMScript text is written or parsed);
* ``passes``: ``tvm.compile``'s TIR pass pipeline (its time less ``codegen``);
* ``codegen``: LLVM code generation and optimisation (``tvm.tirx.build``'s ``tir_to_runtime``);
* ``jit``: LLVM's JIT at the first function lookup;
* ``verify``: seeded inputs, running both programs and comparing; ``time``: the paired timing;
* ``rest``: the candidate's time outside those (keys, buffers, bookkeeping).

Modes: ``whole`` (each candidate built as one program, its parent built before); ``statements``
(``lowering.compose``: the candidate's slot kernels, those it shares with its parent already built;
timed by its changed kernel against the parent's when exactly one slot changed, else whole; the
parent's profile, paid once per parent, is not counted). Then the build alone, four more ways:
``batched`` (``lowering.batch_build``: each program's candidates compiled ``--batch-size`` to a
module; the state's total per candidate), ``cache miss`` (the on-disk cache, ``lowering.build_cache``,
empty: the build writes an object file and links it, ``export``, instead of the JIT), ``cache
hit`` (the same build from a filled cache, another folder: ``load``) and ``batched cache miss``
(batches into an empty cache: one object file and link per batch; what a job's worker does). Each
table gives the median, 90th percentile and total per stage; the report names the machine, target
and load average, and is written as
``build_profile.md`` and ``build_profile.json`` into ``-o`` (and the Markdown printed). A killed
run leaves its previous report whole; run it again to resume (a profile is measured afresh).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUILD = ("lowering", "primfunc", "passes", "codegen", "jit")
COLUMNS = {"whole": (*BUILD, "verify", "time", "rest"), "statements": (*BUILD, "verify", "time", "rest"),
           "batched": BUILD, "cache miss": ("lowering", "primfunc", "passes", "codegen", "export", "load", "jit"),
           "cache hit": ("lowering", "load", "jit"),
           "batched cache miss": ("lowering", "primfunc", "passes", "codegen", "export", "load", "jit")}


@contextmanager
def codegen_split():
    """Charge ``tvm.compile``'s code generation to the ``codegen`` stage (inside ``compile``)."""
    import importlib

    from lowering.build_stages import stage
    tb = importlib.import_module("tvm.tirx.build")      # the module (``tvm.tirx.build`` names its function)
    inner = tb.tir_to_runtime

    def timed(*a, **kw):
        with stage("codegen"):
            return inner(*a, **kw)
    tb.tir_to_runtime = timed
    try:
        yield
    finally:
        tb.tir_to_runtime = inner


def staged(book: dict) -> dict:
    """A clock's stages as the table's: ``passes`` is ``compile`` less ``codegen``."""
    out = {k: v for k, v in book.items() if k != "compile"}
    if "compile" in book:
        out["passes"] = book["compile"] - book.get("codegen", 0.0)
    return out


def ready(built):
    """The build's function, looked up (the JIT, for a module compiled in this process)."""
    return built.function


def cpu() -> float:
    from lowering.build_stages import cpu_seconds
    return cpu_seconds()


# ---------------------------------------------------------------------- programs


def load_sets(args) -> list[tuple[str, object]]:
    """(label, Program): the examples, then the drawn corpus programs (shrunk)."""
    from engine import load_program
    from engine.leir.files import program_from_json
    out = [(f"examples/{p.name}", load_program(p)) for p in sorted((ROOT / "examples").glob("*.leir"))]
    recs = [json.loads(l) for l in (ROOT / "examples/corpus/programs.jsonl").read_text().splitlines() if l.strip()]
    rng = random.Random(args.seed)
    for rec in sorted(rng.sample(recs, min(args.corpus, len(recs))), key=lambda r: r["name"]):
        p = program_from_json(rec)
        if args.shrink:
            from dataset.generate.shrink import shrink_program
            p = shrink_program(p)
            if p is None:
                continue
        out.append((f"corpus/{rec['name']}", p))
    return out


def neighbours(engine, program, k: int, seed: int, label: str) -> list[tuple[object, object]]:
    """(step, program) of ``k`` one-step rewrites drawn with the seed (invalid neighbours skipped)."""
    steps = sorted(engine.enumerate(program), key=lambda s: s.key)
    random.Random(f"{seed}:{label}").shuffle(steps)
    out = []
    for s in steps:
        try:
            out.append((s, s.program))
        except Exception:       # an invalid neighbour: a rule bug, not this profile's business
            continue
        if len(out) == k:
            break
    return out


# ---------------------------------------------------------------------- one candidate


def time_opts(seed: int) -> dict:
    from lowering.measure import Protocol
    return {"target": "llvm", "arch": "sm_90", "seed": seed, "warmup": 3, "protocol": Protocol().to_json(),
            "sum_model": None}


def whole(parent, cand, tol: str, seed: int) -> dict:
    """A candidate built as one program (its parent already built), verified and timed."""
    from lowering.build_stages import clock
    from lowering.measure.rounds import measure_paired_now
    from lowering.run import build
    from lowering.verify import verify
    t0 = cpu()
    with clock() as book:
        ready(build(cand))
    row = staged(book)
    t = cpu()
    verify(parent, cand, trials=3, seed=seed, tolerance=tol)
    row["verify"] = cpu() - t
    t = cpu()
    measure_paired_now([parent.to_json(), cand.to_json()], time_opts(seed))
    row["time"] = cpu() - t
    return _rest(row, cpu() - t0)


def statements(parent, cand, tol: str, seed: int) -> dict:
    """A candidate built as its slot kernels (its parent's kernels already built), verified
    composed, timed by its changed kernel (else whole)."""
    from engine.leir.slots import changed_slots, split
    from lowering.build_stages import clock
    from lowering.compose import build_composed
    from lowering.measure.rounds import measure_paired_now
    from lowering.verify import verify
    t0 = cpu()
    with clock() as book:
        c = build_composed(cand)
        for _, b in c.kernels:
            ready(b)
        if c.whole is not None:
            ready(c.whole)
    row = staged(book)
    t = cpu()
    verify(parent, cand, trials=3, seed=seed, tolerance=tol, compose=True)
    row["verify"] = cpu() - t
    pair = [parent, cand]
    try:
        ps, cs = split(parent), split(cand)
        changed = changed_slots(ps, cs)
        if changed is not None and len(changed) == 1 and len(ps) > 1:
            pair = [ps[changed[0]].kernel, cs[changed[0]].kernel]
    except Exception:           # a program that does not split is timed whole, as the job does
        pass
    t = cpu()
    measure_paired_now([p.to_json() for p in pair], time_opts(seed))
    row["time"] = cpu() - t
    return _rest(row, cpu() - t0)


def _rest(row: dict, total: float) -> dict:
    named = sum(row.get(k, 0.0) for k in (*BUILD, "verify", "time"))
    row["rest"] = max(0.0, total - named)
    row["build"] = sum(row.get(k, 0.0) for k in BUILD)
    row["total"] = total
    return row


def batched(cands: list, batch_size: int, folder=None) -> list[dict]:
    """A state's candidates built together (``folder``: into an empty on-disk cache there): each
    candidate's row is the state's total over their number."""
    import shutil

    from lowering import build_cache
    from lowering.batch_build import build_many
    from lowering.build_stages import clock
    from lowering.errors import LoweringError
    build_cache.configure(folder if folder is not None else False)
    with clock() as book:
        built = build_many(cands, "llvm", batch_size=batch_size)
        for b in built:
            if not isinstance(b, LoweringError):
                ready(b)
    build_cache.configure(False)
    if folder is not None:
        shutil.rmtree(folder)
    row = {k: v / len(cands) for k, v in staged(book).items()}
    row["build"] = sum(row.get(k, 0.0) for k in (*BUILD, "export", "load"))
    return [dict(row) for _ in cands]


def cached(cand, folder: Path) -> tuple[dict, dict]:
    """(miss, hit): the candidate built into an empty on-disk cache, then from a copy of it (another
    path, so the hit pays the library's load as another process would)."""
    import shutil

    from lowering import build_cache
    from lowering.build_stages import clock
    from lowering.run import build, clear_build_cache
    build_cache.configure(folder / "miss")
    clear_build_cache()
    with clock() as miss:
        ready(build(cand))
    shutil.copytree(folder / "miss", folder / "hit")
    build_cache.configure(folder / "hit")
    clear_build_cache()
    with clock() as hit:
        ready(build(cand))
    build_cache.configure(False)
    shutil.rmtree(folder / "miss")
    shutil.rmtree(folder / "hit")
    miss, hit = staged(miss), staged(hit)
    miss["build"] = sum(miss.values())
    hit["build"] = sum(hit.values())
    return miss, hit


# ---------------------------------------------------------------------- the run


def profile(args) -> dict:
    from engine import Engine
    from lowering import build_cache, tolerance_for
    from lowering.compose import build_composed
    from lowering.errors import LoweringError
    from lowering.run import build, clear_build_cache
    build_cache.configure(False)
    sets = load_sets(args)
    engine = Engine(strategies="paper")
    rows: dict[str, list] = {m: [] for m in COLUMNS}
    sources: dict[str, list] = {m: [] for m in COLUMNS}
    failed = []
    cache_dir = Path(tempfile.mkdtemp(prefix="leir-build-profile-"))
    with codegen_split():
        ready(build(sets[0][1]))          # TVM's first-use costs stay out of the figures
        for n, (label, parent) in enumerate(sets, 1):
            cands = []
            try:
                clear_build_cache()
                ready(build(parent))
                cands = neighbours(engine, parent, args.neighbours, args.seed, label)
                ok = []
                for step, cand in cands:
                    tol = tolerance_for(step.exactness)
                    try:
                        rows["whole"].append(whole(parent, cand, tol, args.seed))
                    except LoweringError as e:
                        failed.append({"program": label, "step": step.key, "message": e.message})
                        continue
                    ok.append((step, cand, tol))
                    sources["whole"].append(label)
                clear_build_cache()
                build_composed(parent)
                for _step, cand, tol in ok:
                    rows["statements"].append(statements(parent, cand, tol, args.seed))
                    sources["statements"].append(label)
                for mode, folder in (("batched", None), ("batched cache miss", cache_dir / "batch")):
                    if ok:
                        clear_build_cache()
                        ready(build(parent))
                        rows[mode] += batched([c for _, c, _ in ok], args.batch_size, folder)
                        sources[mode] += [label] * len(ok)
                for _, cand, _ in ok:
                    miss, hit = cached(cand, cache_dir)
                    rows["cache miss"].append(miss)
                    rows["cache hit"].append(hit)
                    sources["cache miss"].append(label)
                    sources["cache hit"].append(label)
            except LoweringError as e:
                failed.append({"program": label, "step": None, "message": e.message})
            print(f"[{n}/{len(sets)}] {label}: {len(cands)} candidates", file=sys.stderr, flush=True)
    os.rmdir(cache_dir)
    return {"rows": rows, "sources": sources, "failed": failed, "programs": [l for l, _ in sets]}


def summary(rows: list[dict], columns) -> dict:
    out = {}
    for k in (*columns, "build", "total"):
        xs = sorted(r.get(k, 0.0) for r in rows)
        if not xs or (k == "total" and "total" not in rows[0]):
            continue
        out[k] = {"median_s": round(statistics.median(xs), 4), "p90_s": round(xs[int(0.9 * (len(xs) - 1))], 4),
                  "total_s": round(sum(xs), 3)}
    return out


def report(args, got: dict, load0, load1, seconds: float) -> dict:
    import tvm

    from lowering.measure import machine_label
    from lowering.run import llvm_target
    modes = {}
    for mode, cols in COLUMNS.items():
        rs = got["rows"][mode]
        if not rs:
            continue
        corpus = [r for r, s in zip(rs, got["sources"][mode]) if s.startswith("corpus/")]
        modes[mode] = {"candidates": len(rs), "stages": summary(rs, cols),
                       "corpus_build_median_s": round(statistics.median(r["build"] for r in corpus), 4) if corpus
                       else None}
    return {"machine": machine_label("llvm"), "target": str(llvm_target()), "tvm": tvm.__version__,
            "load_average": {"before": [round(x, 2) for x in load0], "after": [round(x, 2) for x in load1]},
            "options": {"corpus": args.corpus, "neighbours": args.neighbours, "seed": args.seed,
                        "shrink": args.shrink, "batch_size": args.batch_size},
            "programs": got["programs"], "failed": got["failed"], "modes": modes, "wall_s": round(seconds, 1)}


def markdown(r: dict) -> str:
    m = r["machine"]
    lines = [f"Build profile: {m['cpu']}, {m['cores']} cores, {m['threads']} threads, target `{r['target']}`, "
             f"TVM {r['tvm']}; load average {r['load_average']['before'][0]} before, "
             f"{r['load_average']['after'][0]} after; {len(r['programs'])} programs, "
             f"{r['options']['neighbours']} neighbours each, seed {r['options']['seed']}. CPU seconds per candidate.",
             ""]
    for mode, d in r["modes"].items():
        stages = d["stages"]
        lines.append(f"**{mode}** ({d['candidates']} candidates; corpus build median "
                     f"{d['corpus_build_median_s'] if d['corpus_build_median_s'] is not None else '-'} s)")
        lines.append("")
        lines.append("| stage | median s | p90 s | total s |")
        lines.append("|---|---:|---:|---:|")
        for k, v in stages.items():
            name = f"**{k}**" if k in ("build", "total") else k
            lines.append(f"| {name} | {v['median_s']:.4f} | {v['p90_s']:.4f} | {v['total_s']:.3f} |")
        lines.append("")
    if r["failed"]:
        lines.append(f"{len(r['failed'])} candidate(s) did not build: " +
                     "; ".join(f"{f['program']} {f['step']}: {f['message']}" for f in r["failed"][:5]))
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> int:
    from engine.leir.cli import run_cli
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import write_atomic

    def _main(argv):
        ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        ap.add_argument("-o", "--out", default="out/build_profile", help="folder of the report (default %(default)s)")
        ap.add_argument("--corpus", type=int, default=6, help="corpus programs drawn (default 6)")
        ap.add_argument("--neighbours", type=int, default=4, help="one-step rewrites per program (default 4)")
        ap.add_argument("--seed", type=int, default=0, help="draws and inputs (default 0)")
        ap.add_argument("--no-shrink", dest="shrink", action="store_false",
                        help="corpus programs at their full sizes (default: shrunk as dataset.generate --shrink)")
        ap.add_argument("--batch-size", type=int, default=8, help="programs per batched module (default 8)")
        a = ap.parse_args(argv)
        for flag, v, lo in (("--corpus", a.corpus, 0), ("--neighbours", a.neighbours, 1),
                            ("--batch-size", a.batch_size, 1)):
            if v < lo:
                raise LeirError(f"{flag} must be at least {lo}, got {v}")
        load0, t0 = os.getloadavg(), time.perf_counter()
        got = profile(a)
        r = report(a, got, load0, os.getloadavg(), time.perf_counter() - t0)
        text = markdown(r)
        write_atomic(Path(a.out) / "build_profile.json", json.dumps(r, indent=1, sort_keys=True) + "\n")
        write_atomic(Path(a.out) / "build_profile.md", text)
        print(text, end="")
        return 0

    return run_cli(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
