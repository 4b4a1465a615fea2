"""Training the shipped cost model from timed dataset rows.

    python -m search.costmodel train DATASET_DIR... -o search/models/llvm.json

Each row of ``DATASET_DIR/rows.jsonl`` made with ``python -m dataset.generate --time`` is one
step timed against the state it was applied to; each accepted sample of a search trajectory
(``python -m search ... -o TRAJ.json``; menu moves, composite moves among them, and rollouts, at
any depth) is a move timed against the node it was made at. Its example is the search's own input
(``features.relative``) of the resulting program against that state, the path being the move's
strategies, and its label the log of the paired speedup over the state: at a state, what the
``cost`` policy ranks and what the search decides on. Programs are split by a hash of their name: a held-out program never trains.
The output is deterministic (one thread, exact trees, rows in id order): the same datasets give
a byte-identical model and metadata.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path

from engine.leir.diagnostics import LeirError
from engine.leir.files import json_lines

from .costprior import meta_path_of
from .features import DEFAULT_STRATEGIES, FEATURES_VERSION, PROGRAM_FEATURES, feature_names, program_features, relative

PRIOR_PARAMS = {"max_depth": 4, "eta": 0.05, "subsample": 1.0, "min_child_weight": 2.0, "lambda": 1.0,
                "objective": "reg:squarederror", "nthread": 1, "tree_method": "exact", "seed": 0}
PRIOR_ROUNDS = 80        # chosen by 5-fold program-grouped CV on training programs only (docs/search.md)
HOLDOUT = 0.2


def is_held_out(program: str, fraction: float = HOLDOUT) -> bool:
    """Whether a program (by name) is held out of training: a fixed hash, so every tool agrees."""
    h = int(hashlib.sha256(f"costmodel-holdout:{program}".encode()).hexdigest()[:8], 16)
    return h % 1000 < round(fraction * 1000)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def trajectory_rows(path: Path) -> tuple[list[dict], dict]:
    """The moves of a search trajectory timed against the node they were made at, as rows."""
    from .trajectory import load_trajectory
    rec = load_trajectory(str(path)).record
    nodes = {n["id"]: n for n in rec["nodes"]}
    prog = rec["program"]
    out = []
    for s in rec["samples"]:
        o = s.get("outcome") or {}
        t = o.get("timing")
        node = nodes.get(s.get("node"))
        if s.get("kind") not in ("menu", "rollout", "free") or o.get("status") != "accepted" or not t \
                or node is None or not s.get("leir") or o.get("parent") != node["key"]:
            continue
        steps = s.get("steps") or ([s["step"]] if s.get("step") else [])
        moves = [st.get("strategy", "") for st in steps] or [s.get("strategy") or "free-form"]
        rid = hashlib.sha256(json.dumps([node["leir"], s["leir"]]).encode()).hexdigest()[:16]
        out.append({"id": rid, "program": prog["name"], "state": dict(prog, leir=node["leir"]),
                    "transformed": s["leir"], "strategy": moves[-1], "moves": moves,
                    "log_speedup": math.log(t["speedup"]), "target": t.get("target"), "machine": t.get("machine")})
    return out, {"name": path.name, "rows_sha256": _sha256(path), "sources": [prog["name"]],
                 "options": {"trajectory": True, "algorithm": rec["options"].get("algorithm"),
                             "policy": rec["options"].get("policy"), "budget": rec["options"].get("budget")}}


def timed_rows(dirs: list[str]) -> tuple[list[dict], list[dict]]:
    """The timed rows of finished datasets and search trajectories (a trajectory file, or a folder
    of them; sorted by id; a row in two sources once: the first source's) and a record of each
    source."""
    rows, sources = [], []
    for d in dirs:
        if Path(d).is_file() or not (Path(d) / "rows.jsonl").is_file() and any(Path(d).glob("*.json")):
            for f in ([Path(d)] if Path(d).is_file() else sorted(Path(d).glob("*.json"))):
                got, src = trajectory_rows(f)
                rows += got
                sources.append(src)
            continue
        p = Path(d) / "rows.jsonl"
        if not p.is_file():
            raise LeirError(f"{d}: no rows.jsonl (expected the output folder of python -m dataset.generate --time)")
        stats_path = Path(d) / "stats.json"
        job = json.loads(stats_path.read_text()).get("job", {}) if stats_path.is_file() else {}
        sources.append({"name": Path(d).name, "rows_sha256": _sha256(p), "sources": job.get("sources", []),
                        "options": {k: v for k, v in sorted(job.items()) if k != "sources"}})
        for _lineno, r in json_lines(p):
            t = r.get("timing") or {}
            s = t.get("speedup")
            if not isinstance(s, (int, float)) or not s > 0 or not math.isfinite(s):
                continue
            rows.append({"id": r["id"], "program": r["program"]["name"], "state": r["program"],
                         "transformed": r["transformed"], "strategy": r["step"]["strategy"],
                         "log_speedup": math.log(s), "target": t.get("target"), "machine": t.get("machine")})
    rows.sort(key=lambda r: r["id"])  # stable: equal ids keep dataset order
    unique = [r for i, r in enumerate(rows) if i == 0 or rows[i - 1]["id"] != r["id"]]
    return unique, sources


class Featurizer:
    """``features.relative`` of a row's transformed program against its state, programs cached
    by their text (a state has several rows)."""

    def __init__(self, target: str, strategies: tuple[str, ...]):
        self.target, self.strategies = target, tuple(strategies)
        self._cache: dict[tuple, list[float]] = {}

    def program(self, record: dict) -> list[float]:
        key = (record["name"], json.dumps(record["inputs"], sort_keys=True),
               json.dumps(record["outputs"], sort_keys=True), record["leir"])
        f = self._cache.get(key)
        if f is None:
            from engine.leir.files import program_from_json
            f = self._cache[key] = program_features(program_from_json(record), self.target)
        return f

    def row(self, r: dict) -> list[float]:
        state = self.program(r["state"])
        cand = self.program(dict(r["state"], leir=r["transformed"]))
        return relative(cand, state, r.get("moves") or [r["strategy"]], self.strategies)


def train_booster(X: list[list[float]], y: list[float], names: list[str], rounds: int = PRIOR_ROUNDS):
    import numpy as np
    import xgboost as xgb
    dm = xgb.DMatrix(np.asarray(X, dtype=np.float64), label=np.asarray(y, dtype=np.float64), feature_names=names)
    return xgb.train(dict(PRIOR_PARAMS), dm, num_boost_round=rounds)


def _tau(a, b):
    from scipy.stats import kendalltau
    if len(a) < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    return float(kendalltau(a, b).statistic)


def cross_validate(X, y, rows: list[dict], names: list[str], folds: int, rounds: int) -> dict:
    """Kendall tau of out-of-fold predictions, folds grouped by program (a hash of its name):
    pooled, and the mean within a state (>= 3 rows: one menu's ranking). Training rows only."""
    import numpy as np
    fold = [int(hashlib.sha256(r["program"].encode()).hexdigest()[:8], 16) % folds for r in rows]
    pred = [0.0] * len(rows)
    for k in range(folds):
        tr = [i for i, f in enumerate(fold) if f != k]
        te = [i for i, f in enumerate(fold) if f == k]
        if not tr or not te:
            continue
        b = train_booster([X[i] for i in tr], [y[i] for i in tr], names, rounds)
        import xgboost as xgb
        out = b.predict(xgb.DMatrix(np.asarray([X[i] for i in te], dtype=np.float64), feature_names=names))
        for i, v in zip(te, out):
            pred[i] = float(v)
    by: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by.setdefault(r["state"]["leir"], []).append(i)
    states = [t for t in (_tau([pred[i] for i in ix], [y[i] for i in ix]) for ix in by.values() if len(ix) >= 3)
              if t is not None]
    pooled = _tau(pred, y)
    return {"folds": folds, "pooled_tau": None if pooled is None else round(pooled, 4),
            "state_tau": round(sum(states) / len(states), 4) if states else None, "states": len(states)}


def _strategies(spec: str) -> tuple[str, ...]:
    from engine import Engine
    return tuple(Engine(strategies=spec).strategies)


def train(dirs: list[str], out: str, *, target: str = "llvm", strategies: str = "paper",
          holdout: float = HOLDOUT, rounds: int = PRIOR_ROUNDS, command: str = "", data_command: str = "",
          cv: int = 0) -> dict:
    """Train on the non-held-out rows of ``dirs``; write the booster to ``out`` and the
    metadata next to it (``model_paths``), each atomically. Returns the metadata."""
    from engine.leir.files import write_atomic
    from lowering.measure import machine_key
    rows, sources = timed_rows(dirs)
    rows = [r for r in rows if r["target"] == target]
    if not rows:
        raise LeirError(f"no timed rows for target {target} in {', '.join(Path(d).name for d in dirs)}")
    machines = sorted({machine_key({"target": r["target"], "machine": r["machine"]}) for r in rows})
    if len(machines) > 1:
        raise LeirError(f"rows timed on more than one machine ({'; '.join(machines)}): train one model per machine")
    strats = _strategies(strategies)
    names = feature_names(strats)
    train_rows = [r for r in rows if not is_held_out(r["program"], holdout)]
    if not train_rows:
        raise LeirError("every program is held out: lower --holdout")
    feat = Featurizer(target, strats)
    X = [feat.row(r) for r in train_rows]
    y = [r["log_speedup"] for r in train_rows]
    booster = train_booster(X, y, names, rounds)
    cv_result = cross_validate(X, y, train_rows, names, cv, rounds) if cv >= 2 else None
    per_program: dict[str, int] = {}
    for r in train_rows:
        per_program[r["program"]] = per_program.get(r["program"], 0) + 1
    meta = {"format": 1, "features_version": FEATURES_VERSION, "program_features": list(PROGRAM_FEATURES),
            "feature_names": names, "strategies": list(strats), "strategy_set": strategies, "target": target,
            "machine": rows[0]["machine"], "machine_label": machines[0], "label": "log speedup over the state",
            "params": PRIOR_PARAMS, "rounds": rounds, "holdout": holdout, "rows": len(train_rows),
            "programs": sorted(per_program), "rows_per_program": dict(sorted(per_program.items())),
            "held_out": sorted({r["program"] for r in rows} - set(per_program)),
            "held_out_rows": len(rows) - len(train_rows), "datasets": sources, "command": command,
            "data_command": data_command, "cv": cv_result}
    model_file = Path(out)
    meta_file = meta_path_of(model_file)
    model_file.parent.mkdir(parents=True, exist_ok=True)
    raw = booster.save_raw("json").decode()
    write_atomic(model_file, raw)
    write_atomic(meta_file, json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return meta


def main(argv: list[str] | None = None) -> int:
    from engine.leir.cli import run_cli
    return run_cli(_main, argv)


def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(prog="python -m search.costmodel", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train the cost model's prior from timed dataset rows")
    t.add_argument("datasets", nargs="+", help="output folders of python -m dataset.generate --time, search "
                                                "trajectories (python -m search -o TRAJ.json) or folders of them")
    t.add_argument("-o", "--output", required=True, help="model file (TARGET.json; metadata beside it)")
    t.add_argument("--target", default="llvm", choices=("llvm", "cuda"))
    t.add_argument("--strategies", default=DEFAULT_STRATEGIES,
                   help=f"strategy set of the feature layout (default: the search's, {DEFAULT_STRATEGIES})")
    t.add_argument("--holdout", type=float, default=HOLDOUT, help="share of programs held out by name hash")
    t.add_argument("--rounds", type=int, default=PRIOR_ROUNDS, help="boosting rounds")
    t.add_argument("--cv", type=int, default=5, help="program-grouped folds of the cross-validation "
                                                      "reported in the metadata (0: none)")
    t.add_argument("--data-command", default="", help="the command that made the datasets (kept in the metadata)")
    a = ap.parse_args(argv)
    if not 0.0 <= a.holdout < 1.0:
        raise LeirError("--holdout must be in [0, 1)")
    if a.cv == 1 or a.cv < 0:
        raise LeirError("--cv must be 0 (none) or at least 2 folds")
    if a.rounds < 1:
        raise LeirError("--rounds must be at least 1")
    def shown(path: str) -> str:          # no path of this machine in the metadata
        return Path(path).name if Path(path).is_absolute() else path
    command = (f"python -m search.costmodel train {' '.join(shown(d) for d in a.datasets)} -o {shown(a.output)} "
               f"--target {a.target} --strategies {a.strategies} --holdout {a.holdout} --rounds {a.rounds} --cv {a.cv}")
    meta = train(a.datasets, a.output, target=a.target, strategies=a.strategies, holdout=a.holdout,
                 rounds=a.rounds, command=command, data_command=a.data_command, cv=a.cv)
    print(f"{a.output}: {meta['rows']} rows of {len(meta['programs'])} programs "
          f"({len(meta['held_out'])} held out, {meta['held_out_rows']} rows), {meta['machine_label']}"
          + (f"; {a.cv}-fold CV tau pooled {meta['cv']['pooled_tau']}, within a state {meta['cv']['state_tau']}"
             if meta["cv"] else ""))
    return 0
