"""Chain-of-thought traces of a fixed, seeded sample of steps, captured and compared before/after
a change to the renderer or the rule blocks' ``@cot`` templates.

    python benchmarks/cot_traces.py capture OUT.jsonl [--per-rule 3] [--seed 0] [--children 8]
                                    [--corpus-only | --examples-only]
    python benchmarks/cot_traces.py compare BEFORE.jsonl AFTER.jsonl [--show 3]

``capture`` enumerates every program of examples/*.leir and examples/corpus/programs.jsonl
(as written, not shrunk), takes up to ``--per-rule`` steps of each rule per program (seeded by
the program's name), and renders their traces. So that strategies whose precondition appears
only after another step (set_storage_scope, operator_fission, loop_fusion, the later attention
steps) are covered too, ``--children`` seeded first steps of each example program are
enumerated once more and sampled the same way. One JSON line per step: program, path of parent
step keys, strategy, rule, site, key, and the trace (or the renderer's error).

``compare`` joins two captures on (program, path, key) and reports, per strategy, how many
traces are identical and how many differ (with the first ``--show`` differences of each).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _programs(which: str):
    from engine import load_program
    from engine.leir.files import program_from_json
    out = []
    if which in ("both", "examples"):
        out += [("example", load_program(f)) for f in sorted((ROOT / "examples").glob("*.leir"))]
    if which in ("both", "corpus"):
        for line in (ROOT / "examples" / "corpus" / "programs.jsonl").read_text().splitlines():
            if line.strip():
                out.append(("corpus", program_from_json(json.loads(line))))
    return out


def _sample(steps, per_rule: int, rng: random.Random):
    by_rule = defaultdict(list)
    for i, s in enumerate(steps):
        by_rule[s.rule].append(i)
    picked = []
    for rule in sorted(by_rule):
        idx = by_rule[rule]
        picked += sorted(rng.sample(idx, min(per_rule, len(idx))))
    return [steps[i] for i in sorted(picked)]


def render(engine, before, step) -> dict:
    from dataset import cot
    out = {"strategy": step.strategy, "rule": step.rule, "site": list(step.site), "key": step.key}
    try:
        out["cot"] = cot.render(engine.strategy(step.strategy), before, step.program, step)
    except cot.CotError as e:
        out["cot"], out["error"] = None, str(e)
    return out


def capture(args) -> int:
    from engine import Engine
    eng = Engine(strategies="all")
    which = "corpus" if args.corpus_only else "examples" if args.examples_only else "both"
    n, t0 = 0, time.time()
    with open(args.out + ".part", "w") as f:
        for origin, p in _programs(which):
            rng = random.Random(f"{args.seed}:{p.name}")
            steps = eng.enumerate(p)
            todo = [((), p, s) for s in _sample(steps, args.per_rule, rng)]
            if origin == "example" and args.children:
                for parent in sorted(rng.sample(range(len(steps)), min(args.children, len(steps)))):
                    st = steps[parent]
                    child = st.program
                    todo += [((st.key,), child, s) for s in _sample(eng.enumerate(child), 1, rng)]
            for path, before, s in todo:
                row = {"program": p.name, "path": list(path), **render(eng, before, s)}
                f.write(json.dumps(row, sort_keys=True) + "\n")
                n += 1
            print(f"{p.name}: {len(todo)} steps ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    Path(args.out + ".part").replace(args.out)
    print(f"{n} traces -> {args.out}")
    return 0


def _read(path: str) -> dict:
    rows = {}
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        rows[(r["program"], tuple(r["path"]), r["key"])] = r
    return rows


def compare(args) -> int:
    a, b = _read(args.before), _read(args.after)
    stats = defaultdict(lambda: {"identical": 0, "differing": 0, "missing": 0})
    shown = defaultdict(list)
    for k, r in a.items():
        st = stats[r["strategy"]]
        other = b.get(k)
        if other is None:
            st["missing"] += 1
        elif other.get("cot") == r.get("cot"):
            st["identical"] += 1
        else:
            st["differing"] += 1
            if len(shown[r["strategy"]]) < args.show:
                shown[r["strategy"]].append((r, other))
    extra = len(set(b) - set(a))
    width = max(len(s) for s in stats) if stats else 10
    print(f"{'strategy':<{width}}  identical  differing  missing")
    for s in sorted(stats):
        x = stats[s]
        print(f"{s:<{width}}  {x['identical']:>9}  {x['differing']:>9}  {x['missing']:>7}")
    tot = {k: sum(x[k] for x in stats.values()) for k in ("identical", "differing", "missing")}
    print(f"{'total':<{width}}  {tot['identical']:>9}  {tot['differing']:>9}  {tot['missing']:>7}"
          f"   ({extra} steps only in the second capture)")
    for s in sorted(shown):
        for r, o in shown[s]:
            print(f"\n--- {s} {r['rule']} on {r['program']} {r['path']} site {r['site']}")
            print(f"before: {r.get('cot') or r.get('error')}")
            print(f"after:  {o.get('cot') or o.get('error')}")
    return 1 if tot["differing"] or tot["missing"] else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("out")
    c.add_argument("--per-rule", type=int, default=3)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--children", type=int, default=8)
    g = c.add_mutually_exclusive_group()
    g.add_argument("--corpus-only", action="store_true")
    g.add_argument("--examples-only", action="store_true")
    d = sub.add_parser("compare")
    d.add_argument("before")
    d.add_argument("after")
    d.add_argument("--show", type=int, default=3)
    args = ap.parse_args(argv)
    return capture(args) if args.cmd == "capture" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
