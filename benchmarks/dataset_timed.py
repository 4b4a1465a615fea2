"""``benchmarks/dataset.py --timed``: the ``--time --menu`` job with and without statement-level
builds and timings, on the same programs in the same run (see that file's text)."""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {"whole": [], "statements": ["--statement-builds"]}


def job(src: Path, out: Path, args, extra: list, env: dict, run_timed) -> dict:
    cmd = [sys.executable, "-m", "dataset.generate", str(src), "-o", str(out), "--time", "--menu", "--shrink",
           "--max-points", "16384", "--per-program", str(args.per_program), "--depth", str(args.depth),
           "--seed", str(args.seed), "--workers", "1", "--no-plots", *extra]
    load = [round(x, 2) for x in os.getloadavg()]
    p, cpu, wall = run_timed(cmd, env)
    if p.returncode != 0:
        raise SystemExit(f"dataset.generate failed ({p.returncode}):\n{p.stderr[-2000:]}")
    rows = [json.loads(l) for l in (out / "rows.jsonl").read_text().splitlines()]
    menus = [json.loads(l) for split in ("train", "test") if (out / split / "menu.jsonl").exists()
             for l in (out / split / "menu.jsonl").read_text().splitlines()]
    stats = json.loads((out / "stats.json").read_text())
    timed = sum(1 for r in rows if r["timing"])
    states = stats["depth"]["states"]
    per_min = lambda n: round(n / (cpu / 60), 2) if cpu else None  # noqa: E731
    methods: dict = {}
    for t in [r["timing"] for r in rows] + [e["timing"] for m in menus for e in m["menu"]]:
        if t:
            methods[t["method"]] = methods.get(t["method"], 0) + 1
    return {"rows": rows, "menus": menus, "timed_rows": timed, "menu_rows": len(menus), "menus_measured": states,
            "cpu_seconds": round(cpu, 1), "wall_seconds": round(wall, 1),
            "timed_rows_per_core_minute": per_min(timed), "menu_rows_per_core_minute": per_min(len(menus)),
            "menus_measured_per_core_minute": per_min(states), "timing_methods": methods,
            "builds": stats.get("builds"), "load_average_before": load,
            "load_average_after": [round(x, 2) for x in os.getloadavg()]}


def verdicts(run: dict) -> dict:
    """Verdicts by row id and by (the menu's state program, entry key): a menu row's id holds the
    measured speedups of its path, which the two methods measure apart."""
    out = {("row", r["id"]): r["timing"]["verdict"] for r in run["rows"] if r["timing"]}
    out.update({("menu", m["program"]["leir"], e["key"]): e["verdict"] for m in run["menus"] for e in m["menu"]
                if e["verdict"]})
    return out


def agreement(a: dict, b: dict) -> dict:
    """Of the items both runs timed: those both call faster or slower, the share agreeing, the flips."""
    both = sorted(set(a) & set(b))
    decisive = [k for k in both if a[k] != "tie" and b[k] != "tie"]
    same = sum(1 for k in decisive if a[k] == b[k])
    return {"in_both": len(both), "decisive_in_both": len(decisive),
            "agreement_decisive_pct": round(100 * same / len(decisive), 2) if decisive else None,
            "flips": len(decisive) - same,
            "decisive_in_one_only": sum(1 for k in both if (a[k] == "tie") != (b[k] == "tie"))}


def timed_main(args, env: dict, programs: list[dict], run_timed) -> int:
    sys.path.insert(0, str(ROOT))
    from lowering.measure import machine_label
    args.per_program = args.per_program or 6
    runs: dict = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        src = d / "programs.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in programs))
        for k in range(args.repeat):
            for name, extra in CONFIGS.items():
                runs[name].append(job(src, d / f"{name}{k}", args, extra, env, run_timed))
    pairs = [agreement(verdicts(w), verdicts(s)) for w, s in zip(runs["whole"], runs["statements"])]
    result = {"machine": machine_label("llvm"), "target": "llvm", "programs": len(programs),
              "per_program": args.per_program, "depth": args.depth, "repeat": args.repeat,
              "jobs": {name: [{k: v for k, v in r.items() if k not in ("rows", "menus")} for r in rs]
                       for name, rs in runs.items()},
              "agreement": {"rows": [agreement({k: v for k, v in verdicts(w).items() if k[0] == "row"},
                                               {k: v for k, v in verdicts(s).items() if k[0] == "row"})
                                     for w, s in zip(runs["whole"], runs["statements"])],
                            "rows_and_menu_entries": pairs}}
    if args.json:
        print(json.dumps(result))
        return 0
    m = result["machine"]
    print(f"machine: {m['cpu']}, {m['cores']} cores (llvm); {len(programs)} corpus programs shrunk, --per-program "
          f"{args.per_program}, --depth {args.depth}, --time --menu, one worker")
    for name, rs in result["jobs"].items():
        for k, r in enumerate(rs):
            print(f"{name:10s} run {k + 1}: {r['timed_rows']} timed rows, {r['menu_rows']} menu rows "
                  f"({r['menus_measured']} menus measured) in {r['cpu_seconds']} CPU s ({r['wall_seconds']} s wall): "
                  f"{r['timed_rows_per_core_minute']} timed rows and {r['menu_rows_per_core_minute']} menu rows "
                  f"({r['menus_measured_per_core_minute']} menus) per core-minute; timings {r['timing_methods']}, "
                  f"builds {r['builds']}; load average {r['load_average_before']} -> {r['load_average_after']}")
    for k, (rows, both) in enumerate(zip(result["agreement"]["rows"], pairs)):
        print(f"agreement, run {k + 1}: rows: {rows['decisive_in_both']} decisive in both, "
              f"{rows['agreement_decisive_pct']}% agree, {rows['flips']} flips; rows and menu entries: "
              f"{both['decisive_in_both']} decisive in both, {both['agreement_decisive_pct']}% agree, "
              f"{both['flips']} flips, {both['decisive_in_one_only']} decisive in one method only")
    return 0
