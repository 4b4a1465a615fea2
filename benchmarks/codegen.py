"""What TVM's llvm code generator makes of our CPU moves: the lowered loops and the instructions.

    python benchmarks/codegen.py [--asm DIR]

For each case (a bundled example taken through one step), prints the lowered TIR's loop lines
and counts in the x86 assembly of the build (``lowering.run.llvm_target``: this machine's CPU):
fused multiply-adds and other packed float instructions by register width (xmm 128, ymm 256,
zmm 512 bits), scalar float instructions, and calls of the C library's ``expf``. ``--asm DIR``
keeps each case's TIR and assembly there.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# name -> (example, strategy, parameters of the step taken), None: the example as it is
CASES = {
    "matmul": ("matmul", None, None),
    "matmul register_blocking 8x32": ("matmul", "register_blocking", {"row_block": 8, "col_block": 32}),
    "softmax": ("softmax", None, None),
    "softmax max reduction_vectorization 16": ("softmax", "reduction_vectorization", {"lanes": 16, "site": [0]}),
    "softmax sum reduction_vectorization 16": ("softmax", "reduction_vectorization", {"lanes": 16, "site": [1]}),
}
WIDTH = {"x": 128, "y": 256, "z": 512}


def case_program(engine, example: str, strategy, params):
    from engine import load_program
    prog = load_program(ROOT / "examples" / f"{example}.leir")
    if strategy is None:
        return prog
    want = dict(params)
    site = want.pop("site", None)
    for s in engine.enumerate(prog, strategies=[strategy]):
        if (site is None or list(s.site) == site) and all(s.params.get(k) == v for k, v in want.items()):
            return s.program
    raise SystemExit(f"error: no {strategy} step {params} on {example}")


def histogram(asm: str) -> dict:
    """Instruction counts of the assembly text (every function of the module)."""
    packed, scalar, fma = Counter(), 0, Counter()
    for m in re.finditer(r"^\s+(v[a-z0-9]+)\s+([^\n]*)$", asm, re.M):
        op, operands = m.group(1), m.group(2)
        regs = re.findall(r"%([xyz])mm", operands)
        if not regs:
            continue
        width = max(WIDTH[r] for r in regs)
        if re.match(r"vfn?m(add|sub)\d*ps", op):
            fma[width] += 1
        elif op.endswith("ps") and not op.startswith(("vmov", "vbroadcast", "vperm", "vshuf", "vinsert", "vextract")):
            packed[width] += 1
        elif op.endswith("ss") and not op.startswith("vmov"):
            scalar += 1
    return {"fma": dict(fma), "packed": dict(packed), "scalar": scalar,
            "expf_calls": len(re.findall(r"call\w*\s+expf", asm))}


def loop_lines(tir: str) -> list[str]:
    return [l.strip() for l in tir.splitlines() if l.strip().startswith("for ")]


def main(argv=None) -> int:
    import tvm

    from engine import Engine
    from lowering.run import llvm_target
    from lowering.tir import from_tvmscript, lower_to_tvmscript
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--asm", type=Path, help="keep each case's TIR and assembly in this folder")
    a = ap.parse_args(argv)
    engine = Engine(strategies="all")
    target = llvm_target()
    print(f"target: {target}\n")
    print("| case | loops (TIR) | FMA by width | other packed float ops | scalar float ops | expf calls |")
    print("|---|---|---|---|---|---|")
    for name, (example, strategy, params) in CASES.items():
        prog = case_program(engine, example, strategy, params)
        tir = lower_to_tvmscript(prog)
        asm = tvm.tirx.build(from_tvmscript(tir), target).inspect_source("asm")
        h = histogram(asm)
        if a.asm:
            a.asm.mkdir(parents=True, exist_ok=True)
            stem = re.sub(r"\W+", "_", name)
            (a.asm / f"{stem}.tir").write_text(tir)
            (a.asm / f"{stem}.s").write_text(asm)
        fma = ", ".join(f"{n} x {w}-bit" for w, n in sorted(h["fma"].items())) or "none"
        packed = ", ".join(f"{n} x {w}-bit" for w, n in sorted(h["packed"].items())) or "none"
        loops = "; ".join(f"`{l}`" for l in loop_lines(tir))
        print(f"| {name} | {loops} | {fma} | {packed} | {h['scalar']} | {h['expf_calls']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
