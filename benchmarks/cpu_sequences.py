"""Hand-found step sequences that take the benchmark workloads to library speed on a CPU (issue 27).

    python benchmarks/cpu_sequences.py [--threads 1,2] [--workloads matmul,...] [--json FILE]

Each workload's sequence (``SEQUENCES``: strategy, the tensor the statement at the site writes, and
the step's parameters) is applied with ``Engine.apply`` from the enumerated steps, so every step is
an ordinary, replayable rewrite; the result is verified against the original (bitwise when every
step is, else at the strict tolerance), then timed in one process per thread count against the
original and torch eager (``benchmarks/versus.py``: rotating order, medians over 9 rounds).
Prints the steps and a table: milliseconds, speedup over the original, GFLOP/s or GB/s
(``benchmarks/roofline.py``) and the ratio to torch (preallocated outputs where it has them).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(Path(__file__).resolve().parent))

_SOFTMAX_EXP = "exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})"
_ATT_EXP = "exp(J^{f32,g}_{tx,a,c}-G^{f32,g}_{tx,a})"

# workload -> [(strategy, tensor written at the site or None, parameters)], applied in order
SEQUENCES = {
    "matmul": [("register_blocking", "D", {"row_block": 8, "col_block": 32})],
    "gemm_relu": [("layout_transformation", "C", {"tensor": "F", "dim1": 0, "dim2": 1}),
                  ("register_blocking", "C", {"row_block": 4, "col_block": 32})],
    "softmax": [("common_subexpression_elimination", "E", {"expr": _SOFTMAX_EXP}),
                ("loop_split", "C", {"loop": "a", "factor": 16}), ("loop_vectorization", "C", {"loop": "a"}),
                ("loop_split", "F", {"loop": "a", "factor": 16}), ("loop_vectorization", "F", {"loop": "a"}),
                ("reduction_vectorization", "E", {"lanes": 16}), ("reduction_vectorization", "D", {"lanes": 16})],
    "layernorm": [("loop_vectorization", "C", {"loop": "c"}), ("loop_vectorization", "J", {"loop": "c"}),
                  ("reduction_vectorization", "H", {"lanes": 32}), ("reduction_vectorization", "F", {"lanes": 32})],
    "attention": [("register_blocking", "E", {"row_block": 4, "col_block": 32}),
                  ("layout_transformation", "F", {"tensor": "C", "dim1": 1, "dim2": 2}),
                  ("register_blocking", "F", {"row_block": 4, "col_block": 16}),
                  ("common_subexpression_elimination", "H", {"expr": _ATT_EXP}),
                  ("loop_vectorization", "J", {"loop": "c"}), ("loop_vectorization", "I", {"loop": "c"}),
                  ("loop_vectorization", "M", {"loop": "c"}),
                  ("reduction_vectorization", "G", {"lanes": 16}), ("reduction_vectorization", "H", {"lanes": 16})],
    "conv2d": [("register_blocking", "C", {"rows": "c", "row_block": 4, "col_block": 32})],
}


def site_of(program, tensor: str) -> list:
    """The top-level statement that first writes ``tensor``."""
    from engine.leir.ast import equations
    for i, st in enumerate(program.body):
        if any(eq.lhs.name == tensor for _, eq in equations([st])):
            return [i]
    raise SystemExit(f"error: no statement of {program.name} writes {tensor}")


def apply_sequence(engine, program, seq):
    """(result, steps): each step the enumerated one matching strategy, site and parameters."""
    path = []
    for strategy, tensor, params in seq:
        site = site_of(program, tensor) if tensor else None
        found = [s for s in engine.enumerate(program, strategies=[strategy])
                 if (site is None or list(s.site) == site) and all(s.params.get(k) == v for k, v in params.items())]
        if not found:
            raise SystemExit(f"error: {program.name}: no {strategy} step {params} at {site}")
        step = found[0]
        program = engine.apply(program, {"rule": step.rule, "site": list(step.site), "params": dict(step.params)})
        path.append(step)
    return program, path


def main(argv=None) -> int:
    from engine import Engine
    from engine.leir.cli import run_cli
    return run_cli(lambda a: _main(a, Engine), argv)


def _main(argv, Engine) -> int:
    import roofline
    from versus import in_process

    import benchmarks.search as bench
    from lowering import Verifier, tolerance_for
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1")
    ap.add_argument("--workloads", default=",".join(SEQUENCES))
    ap.add_argument("--json", type=Path, help="write the rows here too")
    a = ap.parse_args(argv)
    threads = [int(t) for t in a.threads.split(",")]
    names = a.workloads.split(",")
    bad = [n for n in names if n not in SEQUENCES]
    if bad:
        from engine.leir.diagnostics import LeirError
        raise LeirError(f"unknown workload {bad[0]} (known: {', '.join(SEQUENCES)})")
    progs = bench.workloads()
    engine = Engine(strategies="all")
    rows = []
    with Verifier("llvm", trials=3, timeout=600) as v:
        for name in names:
            prog, path = apply_sequence(engine, progs[name], SEQUENCES[name])
            exact = "bitwise" if all(s.exactness == "bitwise" for s in path) else "reassociating"
            verdict = v.verify(progs[name], prog, tolerance_for(exact, "strict"))
            print(f"{name}: " + " -> ".join(f"{s.strategy}({', '.join(f'{k}={x}' for k, x in s.params.items() if k != 'new_names')})"
                                             for s in path) + f"; verified {verdict.equal} ({exact})")
            if not verdict.equal:
                raise SystemExit(f"error: {name}: the sequence's result differs from the original: {verdict.message}")
            for t in threads:
                lib = bench.GEMM_ACT if name == "gemm_relu" else None
                r = in_process({"workload": lib[0] if lib else name, "shapes": lib[1] if lib else None,
                                "threads": t, "program": prog.to_json(), "original": progs[name].to_json()})
                w = roofline.work(progs[name])
                f = roofline.figure(r["ours"]["median_ms"], w, None)
                torch_ms = (r.get("torch") or r["torch_alloc"])["median_ms"]
                rows.append({"workload": name, "threads": t, "ms": r["ours"]["median_ms"],
                             "original_ms": r["original"]["median_ms"],
                             "speedup": r["original"]["median_ms"] / r["ours"]["median_ms"],
                             "rate": f["rate"], "unit": f["unit"], "torch_ms": torch_ms,
                             "torch_alloc_ms": r["torch_alloc"]["median_ms"],
                             "x_torch": r["ours"]["median_ms"] / torch_ms})
    print("\n| workload | threads | ms | original ms | speedup | rate | torch ms (prealloc) | torch ms (alloc) | ours / torch |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['threads']} | {r['ms']:.4f} | {r['original_ms']:.4f} | {r['speedup']:.1f} | "
              f"{r['rate']:.1f} {r['unit']} | {r['torch_ms']:.4f} | {r['torch_alloc_ms']:.4f} | {r['x_torch']:.2f} |")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
