"""``python -m lowering.tir PROG [--target llvm|cuda] [--cuda-source] [--ptx]``: the TVMScript (or
CUDA source / PTX) of a LEIR program."""
from __future__ import annotations

import argparse
import sys

from ..errors import LoweringError
from . import TARGETS, cuda_ptx, cuda_source, lower_to_tvmscript


def main(argv=None) -> int:
    from engine.leir.cli import report, run_cli
    from engine.leir.files import load_program

    def _main(argv):
        ap = argparse.ArgumentParser(prog="python -m lowering.tir",
                                     description="Print the TVMScript (or CUDA source / PTX) of a LEIR program.")
        ap.add_argument("prog", help=".leir, .json or .jsonl file (first program unless --name)")
        ap.add_argument("--name", help="program name inside a multi-program file")
        ap.add_argument("--target", choices=TARGETS, default="llvm")
        ap.add_argument("--arch", default="sm_90", help="CUDA architecture (default sm_90)")
        ap.add_argument("--cuda-source", action="store_true", help="print the generated CUDA C source")
        ap.add_argument("--ptx", action="store_true", help="print PTX compiled by nvcc")
        a = ap.parse_args(argv)
        prog = load_program(a.prog, a.name)
        try:
            if a.cuda_source or a.ptx:
                src = cuda_source(prog, a.arch)
                print(cuda_ptx(src, a.arch) if a.ptx else src, end="")
            else:
                print(lower_to_tvmscript(prog, a.target), end="")
        except LoweringError as e:
            e.file = e.file or a.prog
            report(e)
            return 1
        return 0

    return run_cli(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
