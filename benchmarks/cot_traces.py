"""Chain-of-thought traces of a fixed, seeded sample of steps, captured and compared before/after
a change to the renderer or the rule blocks' ``@cot`` templates.

    python benchmarks/cot_traces.py capture OUT.jsonl [--per-rule 3] [--seed 0] [--children 8] [--check]
                                    [--corpus-only | --examples-only]
    python benchmarks/cot_traces.py compare BEFORE.jsonl AFTER.jsonl [--show 3]

``capture`` enumerates every program of examples/*.leir and examples/corpus/programs.jsonl
(as written, not shrunk) and a few probe equations for the algebraic strategies, takes up to
``--per-rule`` steps of each rule per program (seeded by the program's name), and renders their
traces. So that strategies whose precondition appears only after another step
(set_storage_scope, operator_fission, loop_fusion, the later attention steps) are covered too,
the results of ``--children`` seeded steps and of the first step of each strategy of every
example program are enumerated once more and sampled the same way (one step per rule). One JSON
line per step: origin, program, path of parent step keys, strategy, rule, site, key, and the
trace (or the renderer's error); with ``--check``, the claims of it that ``dataset.check.claims`` finds
false (none expected).

``compare`` joins two captures on (origin, program, path, key) and reports, per strategy, how many
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


_X, _Y = "A^{f32,g}_{tx,a}", "C^{f32,g}_{tx,a}"
PROBES = (f"{_X}/2+{_Y}/2", f"(exp(2*{_X})-1)/(exp(2*{_X})+1)", f"exp({_X})*exp(-{_Y})", f"2*{_X}+3*{_X}",
          f"log(exp({_X})+1)+log(exp({_Y})+1)", f"log((exp({_X})+1)*(exp({_Y})+1))", f"exp({_X})/(exp({_X})+1)",
          f"{_X}*{_X}+2*{_X}*{_Y}+{_Y}*{_Y}", f"1/{_X}+1/{_Y}")


def _probe(k: int, rhs: str):
    from engine.leir.files import program_from_json
    decl = [{"name": n, "dtype": "f32", "shape": [4, 8]} for n in "AC" if f"{n}^" in rhs]
    return program_from_json({"name": f"probe_{k}", "inputs": decl,
                              "outputs": [{"name": "F", "dtype": "f32", "shape": [4, 8]}],
                              "leir": f"B^{{4}}_{{tx=0}}L^{{8}}_{{a=0}}[F^{{f32,g}}_{{tx,a}}={rhs};];"})


def _programs(which: str):
    from engine import load_program
    from engine.leir.files import program_from_json
    out = []
    if which in ("both", "examples"):
        out += [("example", load_program(f)) for f in sorted((ROOT / "examples").glob("*.leir"))]
        out += [("probe", _probe(k, rhs)) for k, rhs in enumerate(PROBES)]
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


def render(engine, before, step, check: bool) -> dict:
    from dataset.text import cot
    from dataset.check import claims
    out = {"strategy": step.strategy, "rule": step.rule, "site": list(step.site), "key": step.key}
    block = engine.strategy(step.strategy)
    try:
        out["cot"] = cot.render(block, before, step.program, step)
    except cot.CotError as e:
        out["cot"], out["error"] = None, str(e)
    if check and out["cot"] is not None:
        out["claims"] = claims.check_trace(out["cot"], block, before, step.program, step)
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
            if origin == "example":
                parents = set(rng.sample(range(len(steps)), min(args.children, len(steps))))
                parents |= {min(i for i, s in enumerate(steps) if s.strategy == x) for x in {s.strategy for s in steps}}
                for parent in sorted(parents):
                    st = steps[parent]
                    child = st.program
                    todo += [((st.key,), child, s) for s in _sample(eng.enumerate(child), 1, rng)]
            for path, before, s in todo:
                row = {"origin": origin, "program": p.name, "path": list(path), **render(eng, before, s, args.check)}
                f.write(json.dumps(row, sort_keys=True) + "\n")
                n += 1
            print(f"{p.name}: {len(todo)} steps ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    Path(args.out + ".part").replace(args.out)
    print(f"{n} traces -> {args.out}")
    if args.check:
        bad = [r for r in map(json.loads, Path(args.out).read_text().splitlines()) if r.get("claims")]
        print(f"{len(bad)} traces with a claim that does not hold" + "".join(
            f"\n  {r['rule']} on {r['program']}: {r['claims']}" for r in bad[:10]))
    return 0


def _read(path: str) -> dict:
    rows = {}
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        rows[(r.get("origin"), r["program"], tuple(r["path"]), r["key"])] = r
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
    c.add_argument("--check", action="store_true", help="also check each trace with dataset.check.claims")
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
