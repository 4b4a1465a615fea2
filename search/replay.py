"""``python -m search.replay TRAJ.json [--json]``: re-apply the best program's steps to the
original with ``Engine.apply``, re-verify the result against the original and re-time both.

Prints ``reproduced`` (the steps give the recorded program byte for byte; a free-form step,
from ``llm-free``, is re-parsed from its recorded text), ``equal`` (verification: bitwise
when every step is bitwise, strict otherwise) and ``speedup`` (measured now against the original
in paired rounds, with its interval and verdict, next to the recorded one). Exit status 0 when reproduced and equal, 1 otherwise, 2 on bad input."""
from __future__ import annotations

import argparse
import json
import sys


def replay(record: dict, target: str | None = None, rounds: int | None = None, rules=None) -> dict:
    """``rules``: the rule sources the trajectory was made with (Engine's ``rules``); other rule
    files than the trajectory records are an error naming the difference."""
    from engine import Engine, StepError
    from engine.rewrite.rule_sources import check_same_rules
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import program_from_json
    from engine.leir.parser import parse_body

    from .candidate_eval import CandidateEvaluator, path_tolerance
    original = program_from_json(record["program"])
    opts = record["options"]
    best = record.get("best") or {}
    steps = best.get("steps", [])
    engine = Engine(rules=rules, strategies=opts.get("strategies", "paper"))
    check_same_rules(record.get("rules"), engine.rule_manifest, "the trajectory")
    program, error = original, None
    for i, st in enumerate(steps):
        try:
            if st.get("free"):
                program = program.with_body(parse_body(st["leir"]))
            else:
                program = engine.apply(program, st)
        except (StepError, LeirError) as e:
            error = f"step {i + 1} ({st.get('strategy', '?')}): {e.message}"
            break
    out = {"program": original.name, "steps": len(steps), "strategies": best.get("strategies", []),
           "recorded_speedup": best.get("speedup")}
    if error is not None:
        out.update({"reproduced": False, "equal": False, "speedup": None, "error": error})
        return out
    out["reproduced"] = program.to_leir() == best.get("leir", original.to_leir())
    from lowering.measure import Protocol
    protocol = Protocol(rounds=rounds or opts.get("rounds", 20), confidence=opts.get("confidence", 0.95),
                        noise_floor=opts.get("noise_floor", 0.02), look_every=opts.get("look_every", 4))
    ev = CandidateEvaluator(original, target or opts.get("target", "llvm"), opts.get("trials", 3), opts.get("timeout", 300.0),
                   min_repeat_ms=opts.get("min_repeat_ms", 2.0), repeat=opts.get("repeat", 7), protocol=protocol,
                   timed_build=opts.get("build", "exact"), threads=opts.get("threads"))
    try:
        tol = path_tolerance([s.get("exactness", "") for s in steps]) if steps else "exact"
        v = ev.verify_only(program, tol)
        out.update({"equal": v.equal, "verdict": v.reason, "tolerance": tol, "max_abs_err": v.max_abs_err})
        c = ev.confirm([program])[0] if steps else None
        if c is not None:
            out.update({"speedup": c["speedup"], "ci": c["ci"], "timing_verdict": c["verdict"],
                        "original_ms": c["parent_ms"], "median_ms": c["candidate_ms"], "rounds": c["rounds"]})
        else:
            out.update({"speedup": 1.0 if not steps else None})
    finally:
        ev.close()
    return out


def main(argv=None) -> int:
    from engine.leir.cli import run_cli
    return run_cli(_main, argv)


def _main(argv) -> int:
    from engine.leir.diagnostics import LeirError

    from .trajectory import load_trajectory
    ap = argparse.ArgumentParser(prog="python -m search.replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("trajectory")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--target", help="re-time on another target than the recorded one")
    ap.add_argument("--rounds", type=int, help="most paired timing rounds against the original (default: the "
                                               "trajectory's --rounds, 20)")
    from engine.rewrite.rule_sources import add_rules_options
    add_rules_options(ap)
    from engine.leir.cli import say_defaults
    a = say_defaults(ap).parse_args(argv)
    rec = load_trajectory(a.trajectory).record
    try:
        r = replay(rec, a.target, a.rounds, a.rules)
    except LeirError as e:
        raise LeirError(e.message, file=a.trajectory) from None
    if a.json:
        print(json.dumps(r, indent=1))
    else:
        yn = lambda b: "yes" if b else "no"  # noqa: E731
        print(f"reproduced: {yn(r['reproduced'])}")
        print(f"equal: {yn(r['equal'])}" + (f" ({r.get('verdict')}, {r.get('tolerance')})" if 'verdict' in r else ""))
        sp = r.get("speedup")
        rec_sp = r.get("recorded_speedup")
        ci = f" [{r['ci'][0]:.3f}x, {r['ci'][1]:.3f}x], {r['timing_verdict']}" if r.get("ci") else ""
        print(f"speedup: {sp:.3f}x{ci}" if sp else "speedup: -", end="")
        print(f" (recorded {rec_sp:.3f}x)" if rec_sp else "")
        if r.get("error"):
            print(f"error: {r['error']}")
    return 0 if r["reproduced"] and r["equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
