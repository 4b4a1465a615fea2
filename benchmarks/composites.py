"""Composite moves against single steps, per program (llvm):

    python benchmarks/composites.py [PROGRAM.leir ...] [--singles 16] [--rounds 3] [--out FILE]

For each program: how many composite instances the built-in table gives and what finding them
costs (enumeration seconds, engine calls, cache hits); then every instance and a sample of the
one-step menu (the first step of each instance, plus ``--singles`` entries of the loop
strategies spread over the menu) are verified against the original, and the equal ones are
timed in one interleaved schedule with the original (``Verifier.measure_schedule``: same
process, same load, order reversed every other round). It prints the best composite's speedup
and the best measured single step's; the figures name the target and machine, and a loaded
machine makes them noisy (compare only within one run).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LOOP_STRATEGIES = ("loop_split", "loop_tiling", "loop_reorder", "loop_vectorization", "loop_parallelization",
                   "loop_unrolling")


def one(path: str, singles: int, rounds: int) -> dict:
    from lowering.measure import machine_label
    from engine import Engine
    from engine.leir.canonical import renaming_key
    from engine.leir.files import load_program
    from lowering import Verifier
    from search.composite import CompositeMenu, load_table, spread
    from search.candidate_eval import path_tolerance

    engine = Engine(strategies="paper")
    program = load_program(path)
    table = load_table(None, [s.name for s in engine.rulebook.strategies])
    cm = CompositeMenu(engine, table)
    t0 = time.perf_counter()
    found = cm.of(program)
    seconds = time.perf_counter() - t0
    menu = [s for s in engine.enumerate(program) if s.strategy in LOOP_STRATEGIES]
    firsts = {inst.steps[0].key for inst in found}
    chosen = [s for s in menu if s.key in firsts] + [s for s in spread(menu, singles) if s.key not in firsts]
    entries = [("original", None, program, "bitwise")]
    entries += [("single", s.strategy, s.program, path_tolerance([s.exactness])) for s in chosen]
    entries += [("composite", inst.composite.name, inst.program, path_tolerance([s.exactness for s in inst.steps]))
                for inst in found]
    seen, keep = set(), []
    with Verifier("llvm", trials=2, timeout=300) as ver:
        for kind, label, prog, tol in entries:
            key = renaming_key(prog)
            if key in seen:
                continue
            seen.add(key)
            if kind != "original":
                v = ver.verify(program, prog, tol)
                if not v.equal:
                    continue
            keep.append((kind, label, prog))
        while True:
            n = len(keep)
            schedule = [list(range(n)) if r % 2 == 0 else list(reversed(range(n))) for r in range(rounds)]
            out = ver.measure_schedule([p for _, _, p in keep], schedule, min_ms=1.0)
            if out["ok"] or out.get("failed") in (None, 0):
                break
            keep.pop(out["failed"])
    if not out["ok"]:
        return {"program": program.name, "error": out.get("message")}
    n = len(keep)
    per = [[] for _ in range(n)]
    for r, row in enumerate(out["times"]):
        for j, ms in enumerate(row):
            per[schedule[r][j]].append(ms)
    med = [statistics.median(x) for x in per]
    base = med[0]

    def best(kind):
        rows = [(base / med[i], keep[i][1]) for i in range(n) if keep[i][0] == kind]
        return (max(rows), len(rows)) if rows else ((None, None), 0)
    (bc, bcl), nc = best("composite")
    (bs, bsl), ns = best("single")
    return {"program": program.name, "target": "llvm", "machine": machine_label("llvm"),
            "instances": len(found), "by_composite": {c.name: sum(1 for i in found if i.composite is c)
                                                      for c in table},
            "find_seconds": round(seconds, 2), "enumeration_seconds": round(cm.enums.stats["seconds"], 2),
            "enumerations": cm.enums.stats["calls"], "cache_hits": cm.enums.stats["hits"],
            "original_ms": round(base, 4), "composites_timed": nc, "singles_timed": ns,
            "best_composite": bcl, "best_composite_speedup": round(bc, 3) if bc else None,
            "best_single": bsl, "best_single_speedup": round(bs, 3) if bs else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("programs", nargs="*", default=[str(ROOT / "examples" / f"{n}.leir")
                                                     for n in ("matmul", "conv2d", "attention")])
    ap.add_argument("--singles", type=int, default=16, help="one-step loop entries timed besides the composites' first steps")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", help="JSON file to write the rows to")
    a = ap.parse_args(argv)
    rows = []
    for p in a.programs:
        r = one(p, a.singles, a.rounds)
        print(json.dumps(r), flush=True)
        rows.append(r)
    if a.out:
        from engine.leir.files import write_atomic
        write_atomic(Path(a.out), json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
