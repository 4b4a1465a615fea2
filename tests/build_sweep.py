"""The build sweep: every one-step neighbour the engine offers on every corpus program is lowered
and built for llvm. A step the engine offers must build (issue 29).

``python tests/build_sweep.py -o DIR [--chunk K/N] [--exact] [--programs A,B]`` writes one
JSON line per program to ``DIR/sweep-K-of-N.jsonl`` (neighbours, failures with strategy, rule,
site, parameters and TVM's message, seconds) and resumes where it stopped: programs already
written are skipped, and a program whose sweep died (a TVM crash) is swept again with every
build in a worker process, where a crash is a "crashed" failure. ``--report -o DIR`` sums the
files: neighbours built, failures by rule and message. tests/test_build_sweep.py runs it
(whole corpus: slow; a sample of every rule: default run).

What is built: ``lowering.run.build``'s two attempts (the TVMScript of ``lower_module``,
vectorised loops first, all serial when that does not build), by default one top-level
statement at a time. A neighbour rewrites a few top-level statements of its program, and a
statement's build depends only on its own text and the declarations of the buffers it names
(the llvm passes that can fail are per loop nest), so each distinct (statement, declarations)
is compiled once, under a header declaring just those buffers, and a neighbour builds when all
its statements build vectorised, or all serially. A statement with an unrolled (U) loop is
compiled with the unrolling left to LLVM (an unroll hint): TVM's explicit unrolling only copies
the loop body, so it builds when the loop does, and the copies of a loop of hundreds of
iterations around inner loops cost LLVM minutes. That is what makes the 54,000 neighbours of
the corpus a few CPU-hours rather than a few days. Every neighbour this finds failing is built
again whole with ``lowering.run.build`` in a worker process; only a whole-build failure counts
(one that builds whole is recorded as ``incremental_only``, a disagreement the tests require to
be absent). ``--exact`` builds every neighbour whole with ``lowering.run.build``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

from tvmscript_pieces import _IDENT, declarations, header_for, split_tvmscript

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = ROOT / "examples" / "corpus" / "programs.jsonl"
UNROLL_HINT = {"tirx.UnrollLoop": {"explicit_unroll": False}}


def corpus_programs(names=None) -> list:
    from engine.leir.files import program_from_json
    out = []
    for line in CORPUS.read_text().splitlines():
        if line.strip():
            p = program_from_json(json.loads(line))
            if names is None or p.name in names:
                out.append(p)
    return out


# ----------------------------------------------------------------- TVMScript, statement by statement


class IncrementalBuilder:
    """``lowering.run.build``'s verdict, one distinct top-level statement at a time (module doc)."""

    def __init__(self):
        self.seen: dict[tuple, str | None] = {}     # (statement, declarations) -> None or TVM's error
        self.whole = 0                              # programs built whole (unsplittable text)

    def error(self, program) -> str | None:
        """None when ``program`` builds, else why not (the first failing statement's error)."""
        from lowering.errors import LoweringError
        from lowering.tir import lower_module
        try:
            low = lower_module(program, "llvm")
            err = self._text(low.text)
            if err is not None and "T.vectorized(" in low.text:
                serial = self._text(lower_module(program, "llvm", vectorize=False).text)
                err = None if serial is None else err
        except LoweringError as e:
            return e.message
        return err

    def _text(self, text: str) -> str | None:
        split = split_tvmscript(text)
        decls = declarations(split[0]) if split else None
        if decls is None:
            self.whole += 1
            return self._compile(text)
        params, allocs = decls
        for chunk in split[1]:
            names = {n for n in _IDENT.findall(chunk) if n in params or n in allocs}
            key = (chunk, tuple(sorted((n, params.get(n) or allocs[n]) for n in names)))
            if key not in self.seen:
                self.seen[key] = self._compile(header_for(params, allocs, names) + "\n" + chunk + "\n")
            if self.seen[key] is not None:
                return self.seen[key]
        return None

    @staticmethod
    def _compile(text: str) -> str | None:
        import tvm

        from lowering.errors import LoweringError
        from lowering.run import compile_tir
        from lowering.tir import first_line, from_tvmscript, pass_config
        try:
            f = from_tvmscript(text)
            if "T.unroll(" not in text:
                compile_tir(f, "llvm")
            else:       # the copies of an unrolled body are left to LLVM (module doc)
                with tvm.transform.PassContext(config={**pass_config("llvm"), **UNROLL_HINT}):
                    tvm.compile(f, target="llvm")
        except LoweringError as e:
            return e.message
        except Exception as e:                       # TVM's build errors, as lowering.run.build words them
            return f"TVM could not build the program for llvm: {first_line(e)}"
        return None


# ----------------------------------------------------------------- the sweep of one program


def step_record(step) -> dict:
    return {"strategy": step.strategy, "rule": step.rule, "site": list(step.site),
            "params": {k: v for k, v in step.params.items() if k != "new_names"}}


def spread(items: list, n: int) -> list:
    """n items taken evenly over ``items`` (first and last included when n >= 2)."""
    if len(items) <= n:
        return list(items)
    return [items[round(k * (len(items) - 1) / (n - 1))] for k in range(n)] if n > 1 else items[:1]


def per_rule(steps: list, n: int) -> list:
    """``n`` steps of each rule, spread over the rule's steps in the engine's order."""
    by_rule: dict[str, list] = {}
    for st in steps:
        by_rule.setdefault(st.rule, []).append(st)
    keep = {id(st) for group in by_rule.values() for st in spread(group, n)}
    return [st for st in steps if id(st) in keep]


def sweep_program(engine, program, builder, verifier, exact: bool = False, rule_sample: int | None = None) -> dict:
    """{"program", "neighbours", "failures", "incremental_only", "seconds"} of one program
    (``rule_sample``: only that many neighbours of each rule)."""
    t0 = time.perf_counter()
    steps = engine.enumerate(program)
    if rule_sample:
        steps = per_rule(steps, rule_sample)
    failures, disagree = [], []
    for st in steps:
        q = st.program
        if exact:
            got = verifier.build(q)
            if not got["ok"]:
                failures.append({**step_record(st), "reason": got["reason"], "error": got["message"], "leir": st.leir})
            continue
        err = builder.error(q)
        if err is None:
            continue
        got = verifier.build(q)                     # confirmed by the whole build, isolated
        if got["ok"]:
            disagree.append({**step_record(st), "error": err, "leir": st.leir})
        else:
            failures.append({**step_record(st), "reason": got["reason"], "error": got["message"], "leir": st.leir})
    return {"program": program.name, "neighbours": len(steps), "failures": failures,
            "incremental_only": disagree, "seconds": round(time.perf_counter() - t0, 1)}


def sweep(out: Path, chunk: tuple[int, int] = (1, 1), exact: bool = False, names=None, log=print,
          rule_sample: int | None = None) -> Path:
    """Sweep this chunk's programs (every N-th, from the K-th) into ``out``, resuming."""
    from engine import Engine
    from lowering import Verifier
    k, n = chunk
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"sweep-{k}-of-{n}{'-exact' if exact else ''}{f'-per-rule-{rule_sample}' if rule_sample else ''}.jsonl"
    started = out / (path.stem + ".started")
    done = {json.loads(l)["program"] for l in path.read_text().splitlines() if l.strip()} if path.exists() else set()
    died = set(started.read_text().split("\n")) - done - {""} if started.exists() else set()
    engine = Engine()
    builder = IncrementalBuilder()
    with Verifier(target="llvm", timeout=600) as verifier:
        programs = corpus_programs(names)
        mine = [p for i, p in enumerate(programs) if i % n == k - 1 and p.name not in done]
        for p in mine:
            with open(started, "a") as f:
                f.write(p.name + "\n")
            again = p.name in died              # it died here before: every build isolated
            res = sweep_program(engine, p, builder, verifier, exact=exact or again, rule_sample=rule_sample)
            with open(path, "a") as f:
                f.write(json.dumps(res) + "\n")
                f.flush()
                os.fsync(f.fileno())
            log(f"{p.name}: {res['neighbours']} neighbours, {len(res['failures'])} failed, "
                f"{len(res['incremental_only'])} incremental-only, {res['seconds']} s")
    return path


def report(out: Path) -> dict:
    """Totals over every sweep file of ``out``: programs, neighbours, failures by (rule, message)."""
    rows = {}
    for f in sorted(out.glob("sweep-*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                rows[r["program"]] = r
    by_cause: dict[tuple, list] = {}
    for r in rows.values():
        for x in r["failures"]:
            msg = re.sub(r"\d+", "N", (x["error"] or x["reason"]).splitlines()[0])[:160]
            by_cause.setdefault((x["rule"], msg), []).append(r["program"])
    return {"programs": len(rows), "neighbours": sum(r["neighbours"] for r in rows.values()),
            "failures": sum(len(r["failures"]) for r in rows.values()),
            "incremental_only": sum(len(r["incremental_only"]) for r in rows.values()),
            "seconds": round(sum(r["seconds"] for r in rows.values())),
            "causes": [{"rule": rule, "error": msg, "count": len(ps), "programs": sorted(set(ps))[:5]}
                       for (rule, msg), ps in sorted(by_cause.items(), key=lambda kv: -len(kv[1]))]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python tests/build_sweep.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", required=True, help="folder of the sweep files")
    ap.add_argument("--chunk", default="1/1", help="K/N: every N-th corpus program from the K-th (default 1/1)")
    ap.add_argument("--exact", action="store_true", help="build every neighbour whole (lowering.run.build)")
    ap.add_argument("--programs", help="comma list of corpus program names (default: all)")
    ap.add_argument("--per-rule", type=int, help="only N neighbours of each rule per program, spread (a quick look)")
    ap.add_argument("--report", action="store_true", help="only print the totals of the sweep files")
    a = ap.parse_args(argv)
    out = Path(a.output)
    if not a.report:
        k, _, n = a.chunk.partition("/")
        sweep(out, (int(k), int(n or 1)), a.exact, set(a.programs.split(",")) if a.programs else None,
              log=lambda m: print(m, file=sys.stderr, flush=True), rule_sample=a.per_rule)
    print(json.dumps(report(out), indent=1))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
