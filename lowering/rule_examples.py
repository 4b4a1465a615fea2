"""``python -m lowering.rule_examples [RULES_DIR] [--rules DIR ...] [--no-builtin-rules] [--only WHICH]``: lint the
rule files (``python -m engine.lint``), then run every strategy block's ``@example`` as a test:
the BEFORE program enumerated with the block's strategy lists the AFTER program, the step replays
from its JSON record, and the neighbour verifies on llvm against BEFORE at the block's exactness
(``engine.rewrite.example_check``; the verification is this floor's, the engine knows no lowering):
``bitwise`` when the two builds agree exactly and the reference evaluator (``lowering.reference``, no
compiler to fold ``(x+y)-y`` into ``x``) finds the outputs identical bit for bit, special values included.
``--only``: the examples of named strategies, sets or rule folders. One ``file:line:col: error:``
line per failing example, then a summary; exit 2 on a failure."""
from __future__ import annotations

import os
import sys
import time


def example_verify(verifier):
    """The ``Verify`` of ``engine.rewrite.example_check`` on a ``lowering.Verifier``: the tolerance
    of the exactness (bitwise: exactly, and decided by the reference evaluator), the verdict's reason
    and message (which trial and output differ, and where) as the message."""
    from .isolated import tolerance_for

    def verify(before, after, exactness: str):
        tolerance = tolerance_for(exactness)
        verdict = verifier.verify(before, after, tolerance)
        if verdict.equal:
            return None
        return (f"the neighbour does not verify on {verifier.target} at tolerance '{tolerance}': {verdict.reason}"
                f"{': ' + verdict.message if verdict.message else ''}")
    return verify


def run_examples(rules, verifier=None, only: set[str] | None = None) -> int:
    """Check the examples of the rules (``only``: of these strategies); one line per failure,
    then a summary. Exit 2 on a failure. ``verifier``: a ``Verifier`` to share (default: llvm,
    3 trials, 120 s each)."""
    from engine.rewrite.example_check import ExampleChecker, format_outcome

    from .isolated import Verifier
    t0 = time.perf_counter()
    own = verifier is None
    if own:
        verifier = Verifier(target="llvm", trials=3, timeout=120)
    failed = 0
    try:
        checker = ExampleChecker(example_verify(verifier), rules)
        exs = [ex for ex in checker.examples() if only is None or ex.strategy in only]
        for ex in exs:
            o = checker.check(ex)
            if not o.ok:
                failed += 1
                print(_relative(format_outcome(o)), file=sys.stderr)
    finally:
        if own:
            verifier.close()
    blocks = len({ex.strategy for ex in exs})
    print(f"{len(exs)} example(s) of {blocks} block(s): {len(exs) - failed} passed, {failed} failed "
          f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 2 if failed else 0


def _relative(line: str) -> str:
    """A message with the rule file's path relative to the working directory when it lies below it."""
    file, sep, rest = line.partition(":")
    try:
        rel = os.path.relpath(file)
    except ValueError:
        return line
    return (rel if not rel.startswith("..") else file) + sep + rest


def main(argv=None) -> int:
    from engine.lint import checked, parser, selection
    args = parser("python -m lowering.rule_examples", only=True).parse_args(argv)
    sources, book, status = checked(args)
    return status or run_examples(sources, only=selection(book, args.only))


if __name__ == "__main__":
    from engine.leir.cli import run_cli
    sys.exit(run_cli(main))
