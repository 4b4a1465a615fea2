"""How well does the shipped cost model rank steps of programs it was not trained on?

    PYTHONPATH=. python benchmarks/costmodel.py DATASET_DIR... [--model search/models/llvm.json]
                                                [--online 4,8] [--draws 20] [-o out/costmodel.json]

The held-out programs are every program of the datasets the model was not trained on (its
metadata's ``programs``): the corpus programs held out by the training's name hash, and any
other dataset given (the bundled examples, say). For each, Kendall tau (scipy.stats.kendalltau, tau-b) of predicted
against measured log speedups over its timed rows, and pooled over all held-out rows, for:

* ``shipped``: the prior alone (what the ``cost`` policy has at its first choice);
* ``empty``: what the policy has before any row without a prior: its stratified random draw,
  i.e. a random ranking (mean tau over ``--draws`` seeded permutations; expected 0);
* ``online n``: n rows of the program (a seeded draw) added to the model as a run adds its
  measurements, tau on the program's other rows: the prior with its residual booster
  (``prior+n``) and the empty model trained on the n rows alone (``empty+n``; under
  ``costmodel.MIN_ROWS`` rows it is still the random ranking), and the prior alone on the same rows.

``state`` columns: the mean tau within a state (the rows of one menu, >= 3 rows), which is the
ranking the policy actually makes. Features are the training's (``search.costtrain``).
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def tau(pred, meas):
    """Kendall tau-b, None when undefined (fewer than 2 rows or a constant side)."""
    from scipy.stats import kendalltau
    if len(pred) < 2 or len(set(pred)) < 2 or len(set(meas)) < 2:
        return None
    v = kendalltau(pred, meas).statistic
    return None if v is None or math.isnan(v) else float(v)


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _draw(n: int, seed: str) -> list[float]:
    rng = random.Random(seed)
    return [rng.random() for _ in range(n)]


def random_tau(meas, draws: int, seed: str) -> float | None:
    return mean([tau(_draw(len(meas), f"{seed}:{d}"), meas) for d in range(draws)])


def state_tau(rows, scores) -> float | None:
    """Mean within-state tau (states with at least 3 rows)."""
    by: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by.setdefault(r["state"]["leir"], []).append(i)
    return mean([tau([scores[i] for i in ix], [rows[i]["log_speedup"] for i in ix]) for ix in by.values()
                 if len(ix) >= 3])


def evaluate(dirs, model_file: Path, online: list[int], draws: int) -> dict:
    from lowering.measure import machine_key
    from search.costmodel import CostModel
    from search.costprior import Prior, meta_path_of
    from search.costtrain import Featurizer, timed_rows
    import numpy as np
    import xgboost as xgb

    meta = json.loads(meta_path_of(model_file).read_text())
    booster = xgb.Booster()
    booster.load_model(str(model_file))
    prior = Prior(booster, meta, list(meta["feature_names"]))
    strategies = tuple(meta["strategies"])
    rows, sources = timed_rows(dirs)
    trained = set(meta["programs"])
    rows = [r for r in rows if r["target"] == meta["target"] and r["program"] not in trained]
    if not rows:
        raise SystemExit("error: no timed rows of a program the model was not trained on")
    feat = Featurizer(meta["target"], strategies)
    X = [feat.row(r) for r in rows]
    shipped = [float(v) for v in prior.margins(np.asarray(X, dtype=np.float64))]
    by_program: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_program.setdefault(r["program"], []).append(i)

    programs, pooled_online = [], {n: {"meas": [], "prior+n": [], "empty+n": [], "prior": []} for n in online}
    for name in sorted(by_program):
        ix = by_program[name]
        meas = [rows[i]["log_speedup"] for i in ix]
        sub = [rows[i] for i in ix]
        rec = {"program": name, "rows": len(ix), "states": len({r["state"]["leir"] for r in sub}),
               "shipped": tau([shipped[i] for i in ix], meas), "empty": random_tau(meas, draws, name),
               "state_shipped": state_tau(sub, [shipped[i] for i in ix]),
               "state_empty": mean([state_tau(sub, _draw(len(ix), f"{name}:{d}")) for d in range(draws)]),
               "online": {}}
        for n in online:
            if len(ix) < n + 3:
                continue
            order = list(ix)
            random.Random(f"{name}:{n}").shuffle(order)
            seen, rest = order[:n], order[n:]
            m_rest = [rows[i]["log_speedup"] for i in rest]
            with_prior = CostModel(strategies, 0, prior=prior)
            empty = CostModel(strategies, 0)
            for i in seen:
                with_prior.add(X[i], rows[i]["log_speedup"])
                empty.add(X[i], rows[i]["log_speedup"])
            p_prior = with_prior.predict([X[i] for i in rest])
            p_empty = empty.predict([X[i] for i in rest]) if empty.ready else _draw(len(rest), f"{name}:{n}:e")
            p_ship = [shipped[i] for i in rest]
            rec["online"][str(n)] = {"eval_rows": len(rest), "prior": tau(p_ship, m_rest),
                                     "prior+n": tau(p_prior, m_rest), "empty+n": tau(p_empty, m_rest)}
            po = pooled_online[n]
            po["meas"] += m_rest
            po["prior+n"] += p_prior
            po["empty+n"] += p_empty
            po["prior"] += p_ship
        programs.append(rec)

    all_meas = [r["log_speedup"] for r in rows]
    pooled = {"rows": len(rows), "programs": len(programs), "shipped": tau(shipped, all_meas),
              "empty": random_tau(all_meas, draws, "pooled"),
              "mean_program_shipped": mean([p["shipped"] for p in programs]),
              "mean_program_empty": mean([p["empty"] for p in programs]),
              "state_shipped": state_tau(rows, shipped),
              "online": {str(n): {k: tau(v, po["meas"]) for k, v in po.items() if k != "meas"} | {"rows": len(po["meas"])}
                         for n, po in pooled_online.items()},
              "mean_program_online": {str(n): {k: mean([p["online"].get(str(n), {}).get(k) for p in programs])
                                               for k in ("prior", "prior+n", "empty+n")} for n in online}}
    machines = sorted({machine_key({"target": r["target"], "machine": r["machine"]}) for r in rows})
    return {"model": {k: meta[k] for k in ("features_version", "target", "rows", "machine_label", "holdout",
                                            "rounds", "command")} | {"programs": len(meta["programs"])},
            "timings_measured_on": machines, "datasets": [s["name"] for s in sources], "draws": draws,
            "empty_model": "random ranking (the cold policy's draw), mean over draws",
            "programs": programs, "pooled": pooled}


def fmt(v) -> str:
    return "   -  " if v is None else f"{v:+.3f}"


def table(res: dict, online: list[int]) -> str:
    head = "| program | rows | states | shipped | empty | state shipped | state empty |" + "".join(
        f" prior {n} | prior+{n} | empty+{n} |" for n in online)
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for p in res["programs"]:
        cells = [p["program"], str(p["rows"]), str(p["states"]), fmt(p["shipped"]), fmt(p["empty"]),
                 fmt(p["state_shipped"]), fmt(p["state_empty"])]
        for n in online:
            o = p["online"].get(str(n), {})
            cells += [fmt(o.get("prior")), fmt(o.get("prior+n")), fmt(o.get("empty+n"))]
        lines.append("| " + " | ".join(cells) + " |")
    q = res["pooled"]
    cells = ["**pooled**", str(q["rows"]), "", fmt(q["shipped"]), fmt(q["empty"]), fmt(q["state_shipped"]), ""]
    for n in online:
        o = q["online"].get(str(n), {})
        cells += [fmt(o.get("prior")), fmt(o.get("prior+n")), fmt(o.get("empty+n"))]
    lines.append("| " + " | ".join(cells) + " |")
    cells = ["**mean per program**", "", "", fmt(q["mean_program_shipped"]), fmt(q["mean_program_empty"]), "", ""]
    for n in online:
        o = q["mean_program_online"][str(n)]
        cells += [fmt(o["prior"]), fmt(o["prior+n"]), fmt(o["empty+n"])]
    lines.append("| " + " | ".join(cells) + " |")
    lines.append(f"timings: {', '.join(res['timings_measured_on'])}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("datasets", nargs="+", help="dataset.generate --time output folders (held-out rows are read)")
    ap.add_argument("--model", default=str(ROOT / "search" / "models" / "llvm.json"))
    ap.add_argument("--online", default="4,8", help="comma list of in-run row counts")
    ap.add_argument("--draws", type=int, default=20, help="random rankings averaged for the empty model")
    ap.add_argument("-o", "--output", help="write the results as JSON")
    a = ap.parse_args(argv)
    online = [int(x) for x in a.online.split(",") if x.strip()]
    res = evaluate(a.datasets, Path(a.model), online, a.draws)
    print(table(res, online))
    if a.output:
        from engine.leir.files import write_atomic
        Path(a.output).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(a.output, json.dumps(res, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
