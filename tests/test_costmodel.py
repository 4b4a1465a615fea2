"""The shipped cost model (issue 21 item 3): training from timed dataset rows is deterministic,
a prior of another feature version or layout is refused with its reason, the shipped prior
predicts finite values for the examples' menus, the online residual moves the prior toward the
run's rows, and the ``cost`` policy ranks its first menu with the prior (no cold start)."""
import json
import math

import pytest
from conftest import EXAMPLES, ROOT
from test_search_llm import tiny_program


@pytest.fixture(scope="module")
def engine():
    from engine import Engine
    return Engine(strategies="paper")


def _dataset(folder, engine, n=8):
    """A dataset folder as ``dataset.generate --time`` writes it, with made-up timings: rows of
    the tiny program's first ``n`` steps."""
    prog = tiny_program()
    rec = prog.to_json()
    steps = engine.enumerate(prog)[:n]
    assert len(steps) == n
    rows = []
    for i, st in enumerate(steps):
        d = st.to_json()
        speedup = 0.5 + 0.25 * (i % 5)
        rows.append({"id": f"r{i:03d}", "program": rec, "transformed": d["leir"], "step": d,
                     "timing": {"speedup": speedup, "target": "llvm",
                                "machine": {"cpu": "test cpu", "gpu": None, "cores": 2}}})
    folder.mkdir()
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reversed(rows)))
    (folder / "stats.json").write_text(json.dumps({"job": {"sources": [{"name": "tiny", "sha256": "0"}],
                                                            "seed": 0}}))
    return rows


def test_training_is_deterministic_and_records_its_inputs(tmp_path, engine):
    from search.costtrain import train
    from search.features import FEATURES_VERSION, feature_names
    _dataset(tmp_path / "ds", engine)
    metas = []
    for out in ("a", "b"):
        (tmp_path / out).mkdir()
        metas.append(train([str(tmp_path / "ds")], str(tmp_path / out / "llvm.json"), holdout=0.0, rounds=20,
                           command="test"))
    assert (tmp_path / "a" / "llvm.json").read_bytes() == (tmp_path / "b" / "llvm.json").read_bytes()
    assert (tmp_path / "a" / "llvm.meta.json").read_bytes() == (tmp_path / "b" / "llvm.meta.json").read_bytes()
    meta = metas[0]
    assert meta["rows"] == 8 and meta["programs"] == ["tiny_softmax"] and meta["held_out"] == []
    assert meta["features_version"] == FEATURES_VERSION
    assert meta["feature_names"] == feature_names(tuple(engine.strategies))
    assert meta["machine_label"] == "llvm on test cpu, 2 cores"
    assert meta["datasets"][0]["name"] == "ds" and len(meta["datasets"][0]["rows_sha256"]) == 64
    assert str(tmp_path) not in (tmp_path / "a" / "llvm.meta.json").read_text()


def test_a_prior_of_another_feature_version_or_layout_is_refused(tmp_path, engine, monkeypatch):
    import search.costprior as costprior
    from search.costmodel import CostModel, pretrained_status
    from search.costtrain import train
    from search.features import FEATURES_VERSION
    _dataset(tmp_path / "ds", engine)
    models = tmp_path / "models"
    models.mkdir()
    train([str(tmp_path / "ds")], str(models / "llvm.json"), holdout=0.0, rounds=5)
    monkeypatch.setattr(costprior, "MODELS_DIR", models)
    strategies = tuple(engine.strategies)
    assert CostModel.pretrained("llvm", strategies) is not None
    model, why = pretrained_status("cuda", strategies)
    assert model is None and why == "no shipped cost model for target cuda"
    # a run without one of the model's strategies: that path count is 0 in the run, and given as 0
    narrow, why = pretrained_status("llvm", strategies[:-1])
    assert narrow is not None and "not trained on" not in why
    full = CostModel.pretrained("llvm", strategies)
    x = [0.5] * (len(full.prior.names) - len(strategies)) + [1.0] + [0.0] * (len(strategies) - 1)
    assert narrow.prior.margins([x[:-1]]) == pytest.approx(full.prior.margins([x]))
    # a run with strategies the model never saw: their path columns are left out of its input
    wider = strategies[:3] + ("register_blocking",) + strategies[3:] + ("reduction_vectorization",)
    model, why = pretrained_status("llvm", wider)
    assert model is not None and "not trained on: register_blocking, reduction_vectorization" in why
    base = CostModel.pretrained("llvm", strategies)
    row = [0.5] * (len(base.prior.names) - len(strategies)) + [1.0] + [0.0] * (len(strategies) - 1)
    wide = row[:len(row) - len(strategies)] + [1.0, 0.0, 0.0, 2.0] + [0.0] * (len(strategies) - 3) + [1.0]
    assert model.prior.margins([wide]) == pytest.approx(base.prior.margins([row]))
    meta = json.loads((models / "llvm.meta.json").read_text())
    (models / "llvm.meta.json").write_text(json.dumps(dict(meta, feature_names=meta["feature_names"][1:])))
    model, why = pretrained_status("llvm", strategies)      # a program feature it does not know
    assert model is None and "feature layout differs" in why and "not in the model: log_work" in why
    meta["features_version"] = FEATURES_VERSION + 1
    (models / "llvm.meta.json").write_text(json.dumps(meta))
    assert CostModel.pretrained("llvm", strategies) is None
    model, why = pretrained_status("llvm", strategies)
    assert model is None and f"feature version {FEATURES_VERSION + 1}" in why and "retrain" in why


def test_bad_training_input_is_a_clear_error(tmp_path):
    from search.costtrain import main
    (tmp_path / "empty").mkdir()
    assert main(["train", str(tmp_path / "empty"), "-o", str(tmp_path / "m.json")]) == 2


def test_the_shipped_prior_predicts_finite_values_for_the_examples_menus(engine):
    from engine import load_program
    from search.costmodel import CostModel
    from search.features import program_features, relative
    model = CostModel.pretrained("llvm", tuple(engine.strategies))
    assert model is not None, "search/models/llvm.json must ship and fit the features"
    assert (ROOT / "search" / "models" / "llvm.json").stat().st_size < 1_000_000
    for f in sorted(EXAMPLES.glob("*.leir")):
        prog = load_program(f)
        base = program_features(prog)
        steps = engine.enumerate(prog)[:12]
        xs = [relative(program_features(s.program), base,
                       [s.strategy], model.strategies) for s in steps]
        preds = model.predict(xs)
        assert len(preds) == len(steps) and all(math.isfinite(p) for p in preds), f.name
        assert len(set(preds)) > 1, f"{f.name}: the prior ranks nothing (one value for every step)"


def test_online_rows_refine_the_prior_deterministically(tmp_path, engine, monkeypatch):
    import random

    import search.costprior as costprior
    from search.costmodel import MIN_ROWS, CostModel
    from search.costtrain import train
    from search.features import PROGRAM_FEATURES
    _dataset(tmp_path / "ds", engine)
    models = tmp_path / "models"
    models.mkdir()
    train([str(tmp_path / "ds")], str(models / "llvm.json"), holdout=0.0, rounds=10)
    monkeypatch.setattr(costprior, "MODELS_DIR", models)
    strategies = tuple(engine.strategies)
    rng = random.Random(0)
    width = 2 * len(PROGRAM_FEATURES) + len(strategies)
    xs = [[rng.random() for _ in range(width)] for _ in range(12)]
    a, b = CostModel.pretrained("llvm", strategies), CostModel.pretrained("llvm", strategies)
    before = a.predict(xs)
    assert a.ready and not a.rows                 # ranked before any row of the run
    for m in (a, b):
        for x in xs[:MIN_ROWS + 3]:
            m.add(x, 3.0)                         # this program is much faster than the prior thinks
    after = a.predict(xs)
    assert after == b.predict(xs)                 # deterministic
    assert all(y > x for x, y in zip(before[:MIN_ROWS + 3], after[:MIN_ROWS + 3]))


def test_the_cost_policy_ranks_its_first_menu_with_the_prior(engine):
    from search import SearchOptions
    from search.run import run_search
    from lowering import Verifier
    v = Verifier("llvm", trials=2, timeout=120, repeat=3)
    try:
        opts = dict(algorithm="greedy", policy="cost", budget=2, iterations=1, per_node=2, explore=0.0, confirm=1,
                    min_repeat_ms=0.2, repeat=3, trials=2)
        on = run_search(tiny_program(), SearchOptions(**opts), engine=engine, verifier=v,
                        progress=lambda m: None).record
        off = run_search(tiny_program(), SearchOptions(cost_prior="off", **opts), engine=engine, verifier=v,
                         progress=lambda m: None).record
    finally:
        v.close()
    picks = on["summary"]["policy"]["picks"]
    assert picks["model"] == 2 and picks["cold"] == 0
    assert off["summary"]["policy"]["picks"]["cold"] == 2
