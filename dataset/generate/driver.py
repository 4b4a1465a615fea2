"""``python -m dataset.generate SOURCES... -o OUT``: verified Step-TP rows with chain-of-thought.

One job is a set of tasks, one per program: each lists the program's one-step rewrites,
verifies a seeded sample of them on TVM and renders their traces (``dataset.generate.task``). The tasks
run in worker processes or on Ray (``engine.plumbing.jobs``); the driver commits each finished task
to the journal (``dataset.journal``) and, when all are done, assembles every output file in
program order (``dataset.assembly.assemble``). Killed at any moment and run again with the same
command, a job finishes with exactly the rows of an uninterrupted run; the output does not
depend on ``--workers`` or ``--backend``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from engine.leir.diagnostics import LeirError
from engine.plumbing.jobs import TIME_LIMIT
from engine.rewrite.rule_sources import add_rules_options

from lowering.builds import BUILD_NAMES, DEFAULT_TIMED
from lowering.measure.stats import CONFIDENCE, LOOK_EVERY, NOISE_FLOOR, ROUNDS, looks, min_rounds

DEFAULT_MAX_POINTS = 1 << 24
SPLIT_BY = ("type", "family")        # --split-by: what the test split holds out whole
# one program's task at most (seconds): a timed program of the corpus takes 5-150 s on 2 cores
PROGRAM_TIME_LIMIT = 1200.0

USAGE_EPILOG = """examples:
  python -m dataset.generate examples -o out/examples --per-program 6
  python -m dataset.generate examples/corpus/programs.jsonl -o out/corpus --per-program 40 --shrink --max-points 4194304 --workers 2
  python -m dataset.generate examples -o out/deep --per-program 6 --depth 3 --walks 2
  python -m dataset.generate examples -o out/kernels --per-program 4 --time --kernel-menu --kernel-moves 8
  python -m dataset.generate --workloads softmax,GELU --shapes random --variants 3 --dtypes f16,f32 -o out/wl
  python -m dataset.generate examples -o out/ex --backend ray --address auto     # on a running Ray cluster
"""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m dataset.generate", epilog=USAGE_EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 description="Generate a dataset of verified one-step rewrites (Step-TP rows with "
                                             "chain-of-thought, chat files, Parquet, a dataset card, statistics).")
    ap.add_argument("sources", nargs="*", help=".leir/.json/.jsonl program files, KernelBench-style .py files, "
                                               "or folders of them")
    ap.add_argument("-o", "--output", required=True, help="output folder (created; resumable)")
    w = ap.add_argument_group("workload library")
    w.add_argument("--workloads", help="NAME[,NAME...] or 'all': programs from dataset/workloads")
    w.add_argument("--shapes", default="default", help="default | test | random (seeded, --variants per workload)")
    w.add_argument("--variants", type=int, default=1, help="shape samples per workload with --shapes random")
    w.add_argument("--dtypes", default="f32", help="comma list of f16,f32,f64, or 'random' (default f32)")
    g = ap.add_argument_group("generation")
    g.add_argument("--seed", type=int, default=0, help="seed of every random choice (default 0)")
    g.add_argument("--per-program", type=int, help="verify a seeded sample of N rewrites per program (per state "
                                                   "with --depth), stratified by strategy (default: all)")
    g.add_argument("--strategies", "--strategy", default="paper", metavar="S",
                   help="strategy set (all, paper, extra, user, bitwise, graph, operator, memory, math) or comma list "
                        "of names and sets (default paper: the paper's 43; your own strategies need 'all', 'user' or "
                        "their names; --strategy is the same flag)")
    g.add_argument("--target", choices=("llvm", "cuda"), default="llvm",
                   help="TIR target of the rows (cuda: CUDA source too)")
    g.add_argument("--verify-on", choices=("auto", "llvm", "cuda"), default="auto",
                   help="where candidates run: auto = the CUDA device with --target cuda when one is present, "
                        "else the CPU")
    g.add_argument("--depth", type=int, default=1,
                   help="rows from states up to D-1 verified steps from each program, reached by seeded walks "
                        "(default 1: rows of the programs themselves)")
    g.add_argument("--walks", type=int, default=1,
                   help="walks per program with --depth > 1: at most 1 + W*(D-1) states per program, each "
                        "sampled with --per-program (default 1)")
    g.add_argument("--keep-noop", action="store_true",
                   help="with --target cuda, keep the rows whose CUDA kernel the step leaves unchanged "
                        "(noop_on_target: true; dropped by default)")
    g.add_argument("--time", action="store_true",
                   help="time each row's program against its parent in interleaved rounds: speedup, confidence "
                        "interval, verdict faster/slower/tie (lowering.measure); write preferences.jsonl")
    g.add_argument("--rounds", type=int,
                   help=f"with --time: most interleaved rounds per candidate (default {ROUNDS}); a candidate stops "
                        f"earlier once its verdict is clear (--look-every)")
    g.add_argument("--look-every", type=int,
                   help=f"with --time: rounds between two looks of the sequential rule, which stops timing a "
                        f"candidate once it is decided (default {LOOK_EVERY}; 0: always --rounds rounds)")
    g.add_argument("--noise-floor", type=float,
                   help=f"with --time: relative difference an A/A comparison shows on this machine, below which a "
                        f"speedup is a tie (default {NOISE_FLOOR}, measured by benchmarks/timing_noise.py)")
    g.add_argument("--confidence", type=float, help=f"with --time: confidence of the interval (default {CONFIDENCE})")
    g.add_argument("--build", choices=BUILD_NAMES,
                   help=f"with --time: the build rows are timed in (lowering.builds): exact (default {DEFAULT_TIMED}: "
                        "no fused multiply-add, what verification runs) or fast (this CPU's FMA and AVX-512), each "
                        "candidate's fast build checked against its exact build at the strict tolerance first")
    g.add_argument("--database", metavar="FILE",
                   help="with --time: the evaluation database (JSON lines, shared with python -m search): timings "
                        "it holds for this machine are reused, new ones are added, so a repeated job re-times "
                        "nothing")
    g.add_argument("--menu", action="store_true",
                   help="with --time: menu rows (train/menu.jsonl, test/menu.jsonl), the search's question at each "
                        "program, every entry shown verified and timed, answered with the measured-fastest faster "
                        "one; and their preference pairs")
    g.add_argument("--statement-builds", action="store_true",
                   help="build each top-level statement once, as a kernel every program that has it shares, "
                        "verify programs as their kernels run in order (bit for bit the whole build's outputs), "
                        "and time a candidate that changes one statement by its kernel against the parent's, its "
                        "speedup by the sum of the kernels' times (lowering.compose, lowering.measure.statements); "
                        "the default builds, verifies and times every candidate as one whole program, which "
                        "measured faster on the shrunk corpus programs (docs/dataset.md)")
    g.add_argument("--menu-size", type=int,
                   help="with --menu: menu entries the question shows at most, as the search's --menu-size (default "
                        "the search's, 40); a small model is asked a short menu")
    g.add_argument("--prompt-tokens", type=int,
                   help="with --menu or --kernel-menu: the question's prompt budget in estimated tokens (a kernel "
                        "question's, a page's), as the search's --prompt-tokens (default the search's, 2000)")
    g.add_argument("--kernel-menu", action="store_true",
                   help="with --time: kernel rows (train/kernel_menu.jsonl, test/kernel_menu.jsonl), the kernel "
                        "search's question at each slot kernel of each state, its moves verified and timed against "
                        "the kernel, answered with the measured-fastest faster one; and their preference pairs")
    g.add_argument("--kernel-moves", type=int,
                   help="with --kernel-menu: how many of a kernel's moves are timed, the first in the question's "
                        "order (default: the moves its first page shows)")
    g.add_argument("--max-points", type=int, default=DEFAULT_MAX_POINTS,
                   help=f"skip programs with more iteration points than this, with a note (default "
                        f"{DEFAULT_MAX_POINTS}; 0: no limit)")
    g.add_argument("--shrink", action="store_true",
                   help="verify a smaller instance of every program over --shrink-points iteration points: sizes "
                        "scaled down consistently, the finest instance within --shrink-points, else the smallest "
                        "valid one (a program still over --max-points is skipped)")
    g.add_argument("--shrink-points", type=int, default=16384, help="target size of --shrink (default 16384)")
    g.add_argument("--timeout", type=float, default=300.0, help="seconds per verification (default 300)")
    g.add_argument("--program-time-limit", type=float, default=PROGRAM_TIME_LIMIT,
                   help=f"seconds one program's task may take (default {PROGRAM_TIME_LIMIT:g}; 0: no limit); a "
                        "program past it is stopped and left out with the note 'time limit' (skipped.jsonl, "
                        "stats.json, the last line), the job goes on; a later run keeps the note")
    a = ap.add_argument_group("assembly")
    a.add_argument("--test-fraction", type=float, default=0.1, help="fraction of program types held out for the "
                                                                    "test split (default 0.1)")
    a.add_argument("--split-by", choices=SPLIT_BY, default="type",
                   help="what is held out whole: type (default: each program type, its shapes and dtypes) or family "
                        "(each operator family, dataset.families: Matmul_with_transposed_A, _B and _both together); "
                        "--test-fraction counts them")
    a.add_argument("--multi-items", type=int, default=6, help="most answers in a multi-answer row (default 6)")
    a.add_argument("--multi-rows", type=int, default=6, help="most multi-answer rows per program (default 6)")
    a.add_argument("--mix", choices=("paper",), help="down-sample the chat rows, after verification and the "
                                                     "paper's filters, to the paper's mix: 0.51/12.17/87.32 %% easy/"
                                                     "medium/difficult strategy uses and 30:70 single:multi rows "
                                                     "(seeded; stats.json reports target and achieved)")
    a.add_argument("--one-per-strategy", action="store_true",
                   help="one verified row per (program, strategy) in the chat rows, drawn by seeded hash, as the "
                        "paper samples one variant per strategy (rows.jsonl keeps every row)")
    a.add_argument("--no-plots", action="store_true", help="do not draw OUT/plots/*.png")
    r = ap.add_argument_group("running")
    r.add_argument("--workers", type=int, default=1, help="worker processes (local) or CPUs of a local Ray")
    r.add_argument("--backend", choices=("local", "ray"), default="local")
    r.add_argument("--address", help="Ray cluster address to join (e.g. 'auto' or HEAD:6379)")
    r.add_argument("--restart", action="store_true", help="discard the journal of an earlier job in OUT")
    add_rules_options(ap)
    from engine.leir.cli import say_defaults
    return say_defaults(ap)


def _positive(name: str, value, allow_zero: bool = False) -> None:
    if value is not None and (value < 0 or (value == 0 and not allow_zero)):
        raise LeirError(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {value}")


def _strategies(text: str, book):
    from engine.rewrite.engine import resolve_strategies
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise LeirError("--strategies is empty")
    resolve_strategies(book, items, flag="--strategies")        # raises on unknown names
    return items[0] if len(items) == 1 else items


def _strategy_names(args) -> list[str]:
    """The job's strategy set, by name (what the statistics' coverage is counted against)."""
    from engine.rewrite.engine import resolve_strategies
    from engine.rewrite.rulebook import load_rulebook
    items = [t.strip() for t in args.strategies.split(",") if t.strip()]
    return resolve_strategies(load_rulebook(args.rules), items)[0]


def timing_options(args):
    """False without --time, else the measurement's result options (rounds, floor, confidence)."""
    given = [n for n, v in (("--rounds", args.rounds), ("--noise-floor", args.noise_floor),
                            ("--confidence", args.confidence), ("--look-every", args.look_every),
                            ("--database", args.database), ("--build", args.build)) if v is not None]
    if not args.time:
        if given:
            raise LeirError(f"{given[0]} sets how --time measures: use it with --time")
        return False
    t = {"rounds": ROUNDS if args.rounds is None else args.rounds,
         "noise_floor": NOISE_FLOOR if args.noise_floor is None else args.noise_floor,
         "confidence": CONFIDENCE if args.confidence is None else args.confidence,
         "look_every": LOOK_EVERY if args.look_every is None else args.look_every,
         "statements": bool(args.statement_builds)}
    if args.build not in (None, DEFAULT_TIMED):       # named only when not the default: older jobs' fingerprints hold
        t["build"] = args.build
    if not 0.5 <= t["confidence"] < 1:
        raise LeirError(f"--confidence must be in [0.5, 1), got {t['confidence']}")
    if not 0 <= t["noise_floor"] < 1:
        raise LeirError(f"--noise-floor must be in [0, 1), got {t['noise_floor']}")
    if t["rounds"] < min_rounds(t["confidence"]):
        raise LeirError(f"--rounds {t['rounds']} cannot give a {t['confidence']:g} confidence interval: at least "
                        f"{min_rounds(t['confidence'])} rounds")
    if t["look_every"] < 0:
        raise LeirError(f"--look-every must be >= 0, got {t['look_every']}")
    looks(t["rounds"], t["confidence"], t["look_every"])
    return t


def menu_options(args):
    """False without --menu, else the question's size options (``dataset.text.menu.search_options``
    asks it with them, as ``python -m search --menu-size N --prompt-tokens T`` does)."""
    given = [n for n, v in (("--menu-size", args.menu_size), ("--prompt-tokens", args.prompt_tokens)) if v is not None
             and not (n == "--prompt-tokens" and args.kernel_menu)]
    if not args.menu:
        if given:
            raise LeirError(f"{given[0]} sets the menu question: use it with --menu"
                            + (" or --kernel-menu" if given[0] == "--prompt-tokens" else ""))
        return False
    from search.options import SearchOptions
    d = SearchOptions()
    out = {"menu_size": d.menu_size if args.menu_size is None else args.menu_size,
           "prompt_tokens": d.prompt_tokens if args.prompt_tokens is None else args.prompt_tokens}
    for name, v in out.items():
        if v < 1:
            raise LeirError(f"--{name.replace('_', '-')} must be at least 1, got {v}")
    return out


def kernel_menu_options(args):
    """False without --kernel-menu, else the kernel question's options: its prompt budget (the
    search's --prompt-tokens) and the moves timed per kernel (None: its first page's)
    (``dataset.text.kernel_menu``)."""
    if not args.kernel_menu:
        if args.kernel_moves is not None:
            raise LeirError("--kernel-moves sets how many moves of a kernel are timed: use it with --kernel-menu")
        return False
    from search.options import SearchOptions
    out = {"prompt_tokens": SearchOptions().prompt_tokens if args.prompt_tokens is None else args.prompt_tokens,
           "moves": args.kernel_moves}
    if out["prompt_tokens"] < 1:
        raise LeirError(f"--prompt-tokens must be at least 1, got {out['prompt_tokens']}")
    if args.kernel_moves is not None and args.kernel_moves < 1:
        raise LeirError(f"--kernel-moves must be at least 1, got {args.kernel_moves}")
    return out


def options_of(args) -> dict:
    """The job's options. ``rules``: the rule files (names and hashes: a result option, recorded
    in every row); ``rule_bundle``: their texts, for the workers (engine.rewrite.rule_sources)."""
    from engine.rewrite.rulebook import load_rulebook
    from engine.rewrite.validate import check_rulebook
    book = load_rulebook(args.rules)
    check_rulebook(book)                 # every rule-file error, located, before any work
    return {"seed": args.seed, "per_program": args.per_program, "strategies": _strategies(args.strategies, book),
            "rules": book.manifest(), "rule_bundle": args.rules.bundle(),
            "target": args.target, "verify_target": args.verify_on, "time": timing_options(args), "menu": menu_options(args),
            "kernel_menu": kernel_menu_options(args),
            "depth": args.depth, "walks": args.walks, "keep_noop": bool(args.keep_noop),
            "max_points": args.max_points or None, "shrink": args.shrink_points if args.shrink else None, "timeout": args.timeout,
            "trials": 3, "database": _database_path(args), "whole_builds": not args.statement_builds}


def _database_path(args):
    """The evaluation database's absolute path (workers may run elsewhere; it is not a result
    option: a cached timing is the timing that would have been measured)."""
    return str(Path(args.database).resolve()) if args.database else None


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if not args.sources and not args.workloads:
        raise LeirError("nothing to do: give program files or folders, or --workloads")
    _positive("--per-program", args.per_program)
    _positive("--workers", args.workers)
    _positive("--variants", args.variants)
    _positive("--depth", args.depth)
    _positive("--walks", args.walks)
    if args.keep_noop and args.target != "cuda":
        raise LeirError("--keep-noop keeps the rows that change nothing on the CUDA target: use it with --target cuda")
    _positive("--max-points", args.max_points, allow_zero=True)
    _positive("--shrink-points", args.shrink_points)
    _positive("--multi-items", args.multi_items)
    _positive("--multi-rows", args.multi_rows)
    if args.multi_items < 2 or args.multi_rows < 2:
        raise LeirError("--multi-items and --multi-rows must be at least 2")
    if not 0 <= args.test_fraction < 1:
        raise LeirError(f"--test-fraction must be in [0, 1), got {args.test_fraction}")
    if args.menu and not args.time:
        raise LeirError("--menu needs --time: a menu row's answer is the entry measured fastest")
    if args.kernel_menu and not args.time:
        raise LeirError("--kernel-menu needs --time: a kernel row's answer is the move measured fastest")
    if args.address and args.backend != "ray":
        raise LeirError("--address joins a Ray cluster: use it with --backend ray")
    if args.timeout <= 0:
        raise LeirError("--timeout must be positive")
    if args.program_time_limit < 0:
        raise LeirError("--program-time-limit must be 0 (no limit) or positive")
    timing_options(args)            # its errors before any work
    menu_options(args)
    kernel_menu_options(args)
    return run(args)


def run(args) -> int:
    from engine.plumbing.jobs import backend as job_backend

    from ..assembly.assemble import Assembly, held_out_types
    from ..journal import Journal
    from ..progress import Progress
    from .program_sources import job_sources, resolve_sources
    from .task import fingerprint, task_id
    from .task_module import crashed_result

    t0 = time.perf_counter()
    out = Path(args.output)
    options = options_of(args)
    specs, notes = resolve_sources(args.sources, args.workloads, args.shapes, args.dtypes, args.variants, args.seed)
    if not specs:
        shown = "; ".join(n["message"] for n in notes[:3]) + (f"; ... {len(notes) - 3} more" if len(notes) > 3 else "")
        raise LeirError(f"no program to generate from{': ' + shown if shown else ''}")
    out.mkdir(parents=True, exist_ok=True)
    journal = Journal(out)
    journal.open(fingerprint(options), restart=args.restart)
    journal.clean_partial()
    tasks = [(task_id(s, options), s) for s in specs]
    pending = [(tid, s) for tid, s in tasks if not journal.done(tid)]

    counts = {"rows": 0, "failures": 0}
    bar = Progress(total=len(tasks), done=len(tasks) - len(pending), unit="program")

    def commit(tid: str, result: dict) -> None:
        journal.commit(tid, result)
        counts["rows"] += len(result["rows"])
        counts["failures"] += len(result["failures"])
        bar.advance(rows=counts["rows"], failures=counts["failures"])

    backend = job_backend(args.backend, args.workers, "dataset.generate.task_module", crashed_result, address=args.address,
                          task_timeout=args.program_time_limit or None,
                          log=str(journal.root / "workers.log"))
    try:
        backend.run(pending, options, commit)
    finally:
        bar.close()

    seed = args.seed
    group = None
    if args.split_by == "family":
        from ..families import family as group
    held_out = held_out_types([s["type"] for s in specs], seed, args.test_fraction, group)
    asm = Assembly(out, options | {"multi_items": args.multi_items, "multi_rows": args.multi_rows,
                                   "plots": not args.no_plots, "strategy_names": _strategy_names(args),
                                   "mix": args.mix, "one_per_strategy": args.one_per_strategy})
    for n in notes:
        asm.left_out(n["source"], n["reason"], n["message"])
    for tid, spec in tasks:
        asm.add(spec, journal.load(tid), "test" if spec["type"] in held_out else "train")
    types = list(dict.fromkeys(s["type"] for s in specs))
    split_info = {"test_fraction": args.test_fraction, "types": {"train": len([t for t in types if t not in held_out]),
                                                                 "test": len(held_out)},
                  "test_types": sorted(held_out), "split_by": args.split_by}
    if group is not None:
        fams = list(dict.fromkeys(group(t) for t in types))
        held_fams = sorted({group(t) for t in held_out})
        split_info |= {"families": {"train": len(fams) - len(held_fams), "test": len(held_fams)},
                       "test_families": held_fams}
    job = {"sources": job_sources(args.sources), "workloads": args.workloads,
           "shapes": args.shapes if args.workloads else None, "variants": args.variants if args.workloads else None,
           "dtypes": args.dtypes if args.workloads else None,
           **{k: v for k, v in options.items() if k != "rule_bundle"}, "test_fraction": args.test_fraction,
           "split_by": args.split_by,
           "multi_items": args.multi_items, "multi_rows": args.multi_rows, "mix": args.mix,
           "one_per_strategy": args.one_per_strategy}
    wall = time.perf_counter() - t0
    throughput = {"backend": args.backend, "workers": args.workers, "tasks_run": len(pending),
                  "rows_this_run": counts["rows"], "wall_seconds_this_run": round(wall, 3),
                  "rows_per_wall_minute_this_run": round(counts["rows"] / (wall / 60), 2) if wall else None}
    stats = asm.finish(job, throughput, split_info)
    skipped = sum(stats["sources"]["skipped"].values())
    limited = stats["sources"]["skipped"].get(TIME_LIMIT, 0)
    print(f"{stats['rows']} verified rows, {stats['failures']} failures (rule bugs), {skipped} sources skipped"
          f"{f' ({limited} past --program-time-limit)' if limited else ''} -> {out} ({wall:.1f} s)", file=sys.stderr)
    if stats["mix"]:
        from ..assembly.mix import summary
        print(f"mix {args.mix}:\n" + summary(stats["mix"]["splits"]), file=sys.stderr)
    return 0

