"""``python -m dataset.translate FILE.py``: KernelBench file → ``.leir`` program file.

Options: ``--set NAME=VALUE`` (override a module-level constant, repeatable), ``--dtype``
(f16/f32/f64/bf16), ``-o OUT`` (default: standard output), ``--name``, ``--verify`` (run the
program against torch eager, 3 trials), ``--json`` (JSON program, or with ``--verify`` one JSON
verification object). User mistakes exit with status 2 and ``file:line:col: error: …``; a
verification that finds a difference exits with status 1.
"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dataset.translate",
                                 description="Translate a KernelBench-format PyTorch file to an LEIR program.")
    ap.add_argument("file", help="a Python file defining Model, get_inputs() and get_init_inputs()")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                    help="override a module-level constant (e.g. batch_size=4); repeatable")
    ap.add_argument("--dtype", help="cast the model and its floating-point inputs (f16, f32, f64, bf16)")
    ap.add_argument("--name", help="program name (default: the file name)")
    ap.add_argument("-o", "--output", help="write the program here (default: standard output)")
    ap.add_argument("--json", action="store_true", help="JSON output (the program record, or the verification)")
    ap.add_argument("--verify", action="store_true", help="check the program against torch eager")
    ap.add_argument("--trials", type=int, default=3, help="verification trials (default 3)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the verification inputs (default 0)")
    args = ap.parse_args(argv)

    from engine.leir.files import write_atomic

    from .graph import translate
    from .kernelbench import load, parse_override
    overrides = dict(parse_override(s) for s in args.sets)
    loaded = load(args.file, overrides, args.dtype, args.seed)
    tr = translate(loaded.model, loaded.inputs, args.name or loaded.name)
    prog = tr.program
    text = json.dumps(prog.to_json()) + "\n" if args.json and not args.verify else prog.to_leir_file()
    if args.output:
        write_atomic(args.output, text)
    elif not (args.verify and args.json):
        sys.stdout.write(text)
    if not args.verify:
        return 0
    from .verify import verify_translation
    res = verify_translation(tr, loaded.model, loaded.fresh_inputs, args.trials, args.seed)
    if args.json:
        print(json.dumps(res))
    else:
        verdict = "Equal" if res["equal"] else "NOT equal"
        detail = res["error"]["message"] if res["error"] else \
            f"max_abs_err={res['max_abs_err']:.3g} max_rel_err={res['max_rel_err']:.3g}"
        print(f"{prog.name}: {verdict} to torch over {args.trials} trials ({detail})", file=sys.stderr)
    return 0 if res["equal"] else 1


if __name__ == "__main__":
    from engine.leir.cli import run_cli
    sys.exit(run_cli(main))
