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
    from .options import (
        ALGORITHM_NAMES,
        CONSTRAINTS,
        MENU_DETAILS,
        POLICY_NAMES,
        TARGET_NAMES,
        SearchOptions,
    )
    d = SearchOptions()
    ap = argparse.ArgumentParser(prog="python -m search",
                                 description="Search for a faster equivalent program, one verified step at a time.")
    ap.add_argument("program", help=".leir, .json or .jsonl program file (first program unless --name)")
    ap.add_argument("-o", "--output", required=True, help="trajectory JSON to write (atomically, after every sample)")
    ap.add_argument("--name", help="program name inside a multi-program file")
    g = ap.add_argument_group("search")
    g.add_argument("--algorithm", choices=ALGORITHM_NAMES, default=d.algorithm)
    g.add_argument("--policy", choices=POLICY_NAMES, default=d.policy)
    g.add_argument("--budget", type=int, default=d.budget, help="samples: candidates verified and timed (default 64)")
    g.add_argument("--target", choices=TARGET_NAMES, default=d.target)
    g.add_argument("--seed", type=int, default=d.seed)
    g.add_argument("--strategies", default=d.strategies,
                   help="strategy set or comma-separated names and sets (all, paper, extra, user, bitwise, graph, "
                        "operator, memory, math; default paper: the paper's 43; your own strategies need 'all', "
                        "'user' or their names)")
    g.add_argument("--iterations", type=int, help="override the paper's iterations (greedy, beam, mcts, chain)")
    g.add_argument("--per-node", type=int, help="override the proposals per expansion")
    g.add_argument("--beam-width", type=int, help="override beam's k (2)")
    g.add_argument("--max-depth", type=int, help="override BFS/DFS depth (20)")
    g.add_argument("--rollout-depth", type=int, help="override MCTS rollout length (3)")
    m = ap.add_argument_group("measurement")
    m.add_argument("--trials", type=int, default=d.trials, help="verification trials (default 3)")
    m.add_argument("--timeout", type=float, default=d.timeout, help="seconds per build/run (default 300)")
    m.add_argument("--workers", type=int, default=d.workers, help="verifier processes: builds in parallel")
    m.add_argument("--min-repeat-ms", type=float, default=d.min_repeat_ms)
    m.add_argument("--repeat", type=int, default=d.repeat)
    m.add_argument("--confirm", type=int, default=d.confirm, help="best nodes re-timed against the original at the end")
    p = ap.add_argument_group("policies")
    p.add_argument("--screen", type=int, default=d.screen, help="measure policy: candidates timed per choice")
    p.add_argument("--explore", type=float, default=d.explore, help="cost policy: share of random picks")
    p.add_argument("--cost-db", help="cost policy: JSON-lines database of earlier measurements (read, then extended)")
    p.add_argument("--lookahead", type=int, default=d.lookahead,
                   help="cost policy: rank each entry by the best predicted state within this many steps (1-3)")
    p.add_argument("--composites", default=d.composites,
                   help="composite moves in menus: auto (on except for llm policies), on, off, or a TOML table")
    p.add_argument("--endpoint", help="llm policies: OpenAI-compatible base URL, e.g. http://localhost:8000/v1")
    p.add_argument("--model", help="llm policies: model name as the server knows it")
    p.add_argument("--api-key-env", default=d.api_key_env, help="environment variable holding the API key")
    p.add_argument("--constraint", choices=CONSTRAINTS, default=d.constraint,
                   help="auto (default): the first form the server accepts and follows, tried in order: choice "
                        "(vLLM structured_outputs), regex (SGLang), grammar (llama.cpp GBNF), json (response_format "
                        "json_schema), json-object (llama.cpp json_object + schema), openai (strict json_schema), "
                        "none; vllm-json (structured_outputs json) on request only. Answers are parsed and checked "
                        "either way")
    p.add_argument("--temperature", type=float, default=d.temperature)
    p.add_argument("--max-tokens", type=int, default=d.max_tokens)
    p.add_argument("--llm-timeout", type=float, default=d.llm_timeout, help="seconds per LLM request")
    p.add_argument("--retries", type=int, default=d.retries, help="retries on 429/5xx/timeouts (backoff)")
    p.add_argument("--menu-size", type=int, default=d.menu_size, help="menu entries shown to the model at most")
    p.add_argument("--prompt-tokens", type=int, default=d.prompt_tokens,
                   help="menu entries beyond what keeps the prompt within this many tokens are left out (a "
                        "tokenizer-free estimate, on the high side; default 2000)")
    p.add_argument("--menu-detail", choices=MENU_DETAILS, default=d.menu_detail,
                   help="menu entries show what changes (compact, default) or the whole changed statements (full)")
    p.add_argument("--system-prompt", default=d.system_prompt)
    p.add_argument("--gpu-name", default=d.gpu_name, help="GPU named in the prompt for --target cuda")
    o = ap.add_argument_group("output")
    o.add_argument("--plot", help="also draw speedup against samples to this PNG")
    o.add_argument("--emit", help="also write the best program as a .leir file")
    o.add_argument("--resume", action="store_true",
                   help="continue an interrupted run from its trajectory file (its samples are not redone)")
    o.add_argument("--quiet", action="store_true", help="no progress lines")
    o.add_argument("--json", action="store_true", help="print the best result as JSON")
    from engine.rewrite.sources import add_rules_options
    add_rules_options(ap)
    return ap


def main(argv=None) -> int:
    from engine.leir.cli import run_cli
    return run_cli(_main, argv)


def _main(argv) -> int:
    import os

    from engine.leir.diagnostics import LeirError
    from engine.leir.files import load_program, write_atomic

    from .options import SearchOptions
    from .run import run_search
    a = build_parser().parse_args(argv)
    program = load_program(a.program, a.name)
    opts = SearchOptions(**{k: getattr(a, k) for k in (
        "algorithm", "policy", "budget", "target", "seed", "strategies", "iterations", "per_node", "beam_width",
        "max_depth", "rollout_depth", "trials", "timeout", "workers", "min_repeat_ms", "repeat", "confirm", "screen",
        "explore", "cost_db", "lookahead", "composites", "endpoint", "model", "api_key_env", "constraint",
        "temperature", "max_tokens", "llm_timeout", "retries", "menu_size", "menu_detail", "prompt_tokens",
        "system_prompt", "gpu_name")})
    if "," in opts.strategies:
        opts.strategies = [s.strip() for s in opts.strategies.split(",") if s.strip()]
    opts.validate()
    from engine import Engine
    from engine.rewrite.sources import check_same_rules
    engine = Engine(rules=a.rules, strategies=opts.strategies)
    resume = None
    if a.resume and os.path.exists(a.output):
        from .trajectory import load_trajectory
        prev = load_trajectory(a.output).record
        if prev["program"] != program.to_json() or prev["options"] != opts.to_json():
            raise LeirError("--resume: the trajectory was written for another program or other options",
                            file=a.output)
        try:
            check_same_rules(prev.get("rules"), engine.rule_manifest, "the trajectory")
        except LeirError as e:
            raise LeirError(f"--resume: {e.message}", file=a.output) from None
        resume = prev
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
        print(json.dumps({k: best[k] for k in ("speedup", "search_speedup", "median_ms", "original_ms",
                                                "strategies", "steps")}, indent=1))
    else:
        print(f"{program.name}: {best['speedup']:.3f}x faster ({best['original_ms']:.4f} -> "
              f"{(best['confirmed'] or {}).get('median_ms') or best['median_ms']:.4f} ms), "
              f"{len(best['steps'])} step(s): {' -> '.join(s.get('strategy', '?') for s in best['steps']) or '(none)'}; "
              f"{traj.samples} samples; trajectory {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
