"""``python -m engine.check PROG...``: validate programs and print their canonical LEIR.

One line per program, in the order given; with ``--json`` one summary object per line
(known and intermediate tensors with shapes and roles, statements, reductions and their
axes). Invalid files are reported as ``file:line:col: error: ...``; the exit code is 2 if
any file was invalid, and the valid ones are still printed.
"""
from __future__ import annotations

import argparse
import json
import sys

from engine.leir.ast import Nest
from engine.leir.cli import EXIT_USER_ERROR, description, report, run_cli, say_defaults, warn
from engine.leir.diagnostics import LeirError
from engine.leir.files import load_programs
from engine.leir.printer import ref_to_str


def summary(p) -> dict:
    """A JSON-serialisable description of a checked program."""
    info = p.info
    return {
        "name": p.name,
        "leir": p.to_leir(),
        "tensors": [{"name": b.name, "role": b.role, "dtype": b.dtype, "scope": b.scope, "shape": list(b.shape)}
                    for b in info.buffers.values()],
        "statements": len(p.body),
        "equations": [
            {"path": list(e.path), "lhs": ref_to_str(e.eq.lhs),
             "loops": [{"kind": l.kind, "var": l.var, "extent": l.extent} for l in e.loops],
             "reads": list(e.reads), "init": e.eq.init, "reduction_axes": list(e.reduction_axes)}
            for e in info.equations],
        "reductions": [{"tensor": e.eq.lhs.name, "path": list(e.path), "axes": list(e.reduction_axes),
                        "init": e.eq.init}
                       for e in info.equations if e.reduction_axes or e.eq.init is not None],
        "nested": any(isinstance(it, Nest) for n in p.body for it in n.body),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.check", description=description(__doc__),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("programs", nargs="+", metavar="PROG", help=".leir, .json or .jsonl program files")
    ap.add_argument("--json", action="store_true", help="print a JSON summary per program")
    args = say_defaults(ap).parse_args(argv)
    status = 0
    for path in args.programs:
        try:
            progs = load_programs(path)
        except LeirError as err:
            report(err)
            status = EXIT_USER_ERROR
            continue
        for p in progs:
            for w in p.info.warnings:
                warn(w)
            print(json.dumps(summary(p), sort_keys=False) if args.json else p.to_leir())
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(run_cli(main))
