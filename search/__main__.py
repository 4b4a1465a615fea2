"""``python -m search PROG -o TRAJ.json``: multi-step search from a program.

Examples::

    python -m search examples/softmax.leir -o softmax.json --algorithm greedy --policy cost --budget 16
    python -m search examples/softmax.leir -o softmax.json --policy llm \\
        --endpoint http://localhost:8000/v1 --model Qwen/Qwen3-8B
"""
from __future__ import annotations

import argparse
import json
import sys


def build_parser() -> argparse.ArgumentParser:
    """The parser: the program and output flags here, every search option's flag from the
    ``SearchOptions`` registry (``search.options.add_option_flags``)."""
    from .options import GROUPS, add_option_flags
    ap = argparse.ArgumentParser(prog="python -m search",
                                 description="Search for a faster equivalent program, one verified step at a time.")
    ap.add_argument("program", help=".leir, .json or .jsonl program file (first program unless --name)")
    ap.add_argument("-o", "--output", required=True, help="trajectory JSON to write (atomically, after every sample)")
    ap.add_argument("--name", help="program name inside a multi-program file")
    add_option_flags(ap, {g: ap.add_argument_group(g) for g in GROUPS})
    o = ap.add_argument_group("output")
    o.add_argument("--plot", help="also draw speedup against samples to this PNG")
    o.add_argument("--emit", help="also write the best program as a .leir file")
    o.add_argument("--resume", action="store_true",
                   help="continue an interrupted run from its trajectory file (its samples are not redone)")
    o.add_argument("--quiet", action="store_true", help="no progress lines")
    o.add_argument("--json", action="store_true", help="print the best result as JSON")
    from engine.rewrite.rule_sources import add_rules_options
    add_rules_options(ap)
    from engine.leir.cli import say_defaults
    return say_defaults(ap)


def main(argv=None) -> int:
    from engine.leir.cli import run_cli
    return run_cli(_main, argv)


def _main(argv) -> int:
    import os

    from engine.leir.diagnostics import LeirError
    from engine.leir.files import load_program, write_atomic

    from .options import SearchOptions, options_from_args
    from .run import run_search
    a = build_parser().parse_args(argv)
    program = load_program(a.program, a.name)
    opts = options_from_args(a)
    if "," in opts.strategies:
        opts.strategies = [s.strip() for s in opts.strategies.split(",") if s.strip()]
    opts.validate()
    if opts.policy in LLM_POLICIES and opts.endpoint:  # a server that cannot answer fails here, not per sample
        from .client import check_endpoint
        check_endpoint(opts.endpoint, opts.model, api_key_env=opts.api_key_env, timeout=min(opts.llm_timeout, 30.0))
    from engine import Engine
    from engine.rewrite.rule_sources import check_same_rules
    from engine.rewrite.unknown import UnknownStrategy
    try:
        engine = Engine(rules=a.rules, strategies=opts.strategies)
    except UnknownStrategy as e:
        raise e.for_flag("--strategies") from None
    resume = None
    if a.resume and os.path.exists(a.output):
        from .trajectory import load_trajectory
        prev = load_trajectory(a.output).record
        if prev["program"] != program.to_json():
            raise LeirError("--resume: the trajectory was written for another program", file=a.output)
        was, now = SearchOptions.from_json(prev["options"]).to_json(), opts.to_json()
        if was != now:
            differ = "; ".join(f"{k}: {was[k]!r} there, {now.get(k)!r} here" for k in sorted(was) if was[k] != now.get(k))
            raise LeirError(f"--resume: the trajectory was written with other options ({differ})", file=a.output)
        try:
            check_same_rules(prev.get("rules"), engine.rule_manifest, "the trajectory")
        except LeirError as e:
            raise LeirError(f"--resume: {e.message}", file=a.output) from None
        resume = prev
    elif a.resume and opts.database:
        resume = {}                 # no trajectory left: this run's outcomes come from the database
    progress = (lambda msg: None) if a.quiet else None
    traj = run_search(program, opts, engine=engine, out=a.output, progress=progress, resume=resume)
    best = traj.best
    if a.emit:
        from engine.leir.parser import parse_body
        write_atomic(a.emit, program.with_body(parse_body(best["leir"])).to_leir_file())
    if a.plot:
        from .plot import plot_trajectories
        plot_trajectories([traj], a.plot)
    if a.json:
        print(json.dumps({k: best.get(k) for k in ("speedup", "ci", "significant", "search_speedup", "median_ms",
                                                    "original_ms", "strategies", "steps")}, indent=1))
    else:
        from .run import closing
        steps = " -> ".join(s.get("strategy", "?") for s in best["steps"]) or "(none)"
        if best.get("significant"):
            # the two times the speedup is the ratio of: the confirmation's medians when there was one
            line = (f"{best['speedup']:.3f}x faster [{best['ci'][0]:.3f}x, {best['ci'][1]:.3f}x] "
                    f"({best['original_ms']:.4f} -> {best['median_ms']:.4f} ms), {len(best['steps'])} step(s): {steps}")
        else:
            line = closing(best)
        print(f"{program.name}: {line}; {traj.samples} samples; trajectory {a.output}")
    why = model_failure(traj.record.get("samples") or [])
    if why:
        print(f"error: {why}; the trajectory {a.output} holds each failure", file=sys.stderr)
        return 1
    return 0


LLM_POLICIES = ("llm", "llm-free")


def model_failure(samples: list[dict]) -> str | None:
    """Why the search could not do its job when every sample the policy was asked for failed at
    the model boundary (no answer, or none that could be used), else None. (The kernel search's
    own samples, the kernels timed alone, structures and compositions, are not the policy's.)"""
    asked = [s for s in samples if s.get("kind") != "kernel" or s.get("choice")] if any(
        s.get("kind") == "kernel" for s in samples) else samples
    asked = [s for s in asked if s.get("kind") not in ("structure", "composed")]
    if not asked or any(s.get("kind") != "failed answer" for s in asked):
        return None
    samples = asked
    by_reason: dict[str, list] = {}
    for s in samples:
        by_reason.setdefault(s.get("status") or "failed answer", []).append(s)
    parts = [f"{len(v)} {k}" + (f" ({str(v[0]['message'])[:160]})" if v[0].get("message") else "")
             for k, v in sorted(by_reason.items(), key=lambda kv: -len(kv[1]))]
    return f"every one of the {len(samples)} sample(s) failed at the model: " + "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
