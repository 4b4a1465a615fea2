"""`python -m dataset.train`'s input handling (what it reads, what it refuses, exit 2 with one line)
and the comparison figures of a menu evaluation (intervals, the random baseline), without a model:
fast, in the default run. The training loop itself is tests/test_finetune_loop.py (marked train)."""
import json
from pathlib import Path

import pytest

MENU = Path(__file__).parent / "data" / "training" / "menu.jsonl"


def menu_row(**kw) -> dict:
    return json.loads(MENU.read_text().splitlines()[0]) | kw


def dataset(folder: Path, rows: list[dict], split="train") -> Path:
    (folder / split).mkdir(parents=True, exist_ok=True)
    (folder / split / "menu.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def fake_base(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text("{}")
    return folder


def train(capsys, *args) -> tuple[int, str]:
    from dataset.train.trainer import main
    rc = main([str(a) for a in args])
    err = capsys.readouterr().err
    return rc, err


@pytest.mark.parametrize("args,message", [
    (("--lora-r", "0"), "--lora-r must be positive, got 0"),
    (("--warmup", "1.5"), "--warmup must be a fraction in [0, 1)"),
    (("--max-steps", "-3"), "--max-steps must be positive"),
    (("--resume", "--restart"), "--resume goes on with the run in OUT, --restart discards it"),
    (("--method", "full", "--lora-layers", "4"), "--lora-layers is for --method lora"),
])
def test_bad_flags_exit_2_with_one_line(tmp_path, capsys, args, message):
    ds = dataset(tmp_path / "ds", [menu_row()])
    rc, err = train(capsys, ds, "-o", tmp_path / "out", "--base", fake_base(tmp_path / "base"), *args)
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_an_unknown_choice_is_argparses_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        train(capsys, tmp_path, "-o", tmp_path / "out", "--method", "qlora")
    assert e.value.code == 2


def test_bad_inputs_name_the_file(tmp_path, capsys):
    base = fake_base(tmp_path / "base")
    rc, err = train(capsys, tmp_path / "nope", "-o", tmp_path / "out", "--base", base)
    assert rc == 2 and "nope: error: no such dataset folder" in err
    empty = dataset(tmp_path / "empty", [], split="test")              # test rows only: none to train on
    rc, err = train(capsys, empty, "-o", tmp_path / "out", "--base", base)
    assert rc == 2 and "no menu rows in split 'train'" in err
    bad = dataset(tmp_path / "bad", [menu_row(), menu_row(messages=menu_row()["messages"][:-1] +
                                                          [{"role": "assistant", "content": "the third"}])])
    rc, err = train(capsys, bad, "-o", tmp_path / "out", "--base", base)
    assert rc == 2 and "train/menu.jsonl:2:1: error: the assistant message is not" in err
    (bad / "train" / "menu.jsonl").write_text("{not json\n")
    rc, err = train(capsys, bad, "-o", tmp_path / "out", "--base", base)
    assert rc == 2 and "menu.jsonl:1:2: error: not a JSON line" in err
    ds = dataset(tmp_path / "ds", [menu_row()])
    rc, err = train(capsys, ds, "-o", tmp_path / "out", "--base", tmp_path / "no-model")
    assert rc == 2 and "no-model: error: no such model folder or file (--base)" in err
    (tmp_path / "weights.bin").write_text("x")
    rc, err = train(capsys, ds, "-o", tmp_path / "out", "--base", tmp_path / "weights.bin")
    assert rc == 2 and "a .gguf file" in err
    rc, err = train(capsys, ds, "-o", tmp_path / "out", "--base", base, "--dpo")
    assert rc == 2 and "--dpo: no menu preference pairs" in err
    rc, err = train(capsys, ds, "-o", tmp_path / "out", "--base", base, "--resume")
    assert rc == 2 and "--resume: no training run in this folder" in err


def test_a_folder_with_a_run_is_resumed_or_restarted_never_overwritten(tmp_path, capsys):
    from dataset.train.trainer import RESULT_OPTIONS, job_of, open_run, parser
    from dataset.train.base_model import resolve_base
    from engine.leir.diagnostics import LeirError
    base = fake_base(tmp_path / "base")
    a = parser().parse_args([str(tmp_path / "ds"), "-o", str(tmp_path / "out"), "--base", str(base)])
    job = job_of(a, resolve_base(str(base)))
    assert set(job) == set(RESULT_OPTIONS) and str(tmp_path) not in json.dumps(job)   # portable record
    out = tmp_path / "out"
    open_run(out, job, resume=False, restart=False)
    (out / "sft").mkdir()
    with pytest.raises(LeirError, match="holds a training run: --resume goes on with it"):
        open_run(out, job, resume=False, restart=False)
    with pytest.raises(LeirError, match=r"other options than the run in this folder \(lr\)"):
        open_run(out, job | {"lr": 1.0}, resume=True, restart=False)
    open_run(out, job, resume=True, restart=False)
    assert (out / "sft").exists()
    open_run(out, job, resume=False, restart=True)
    assert not (out / "sft").exists() and json.loads((out / "train.json").read_text())["job"] == job


def test_the_completion_is_the_menu_number_or_the_whole_answer(tmp_path):
    from dataset.train.training_examples import menu_examples
    row = menu_row()
    ds = dataset(tmp_path / "ds", [row, row | {"split": "test"}])
    (ds / "test").mkdir()
    (ds / "test" / "menu.jsonl").write_text(json.dumps(row | {"split": "test"}) + "\n")
    got = menu_examples([str(ds)], "train", "number")
    assert len(got) == 2 and got[0]["prompt"] == row["messages"][:-1]
    assert got[0]["completion"] == [{"role": "assistant", "content": str(row["answer"])}]
    assert menu_examples([str(ds)], "train", "reason")[0]["completion"][0]["content"] == row["messages"][-1]["content"]
    assert len(menu_examples([str(ds)], "all", "number")) == 3


def test_last_checkpoint_is_the_newest_complete_one(tmp_path):
    from dataset.train.trainer import last_checkpoint
    assert last_checkpoint(tmp_path) is None
    for step, complete in ((5, True), (10, True), (15, False)):       # 15: killed while it was written
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        if complete:
            (d / "trainer_state.json").write_text("{}")
    assert last_checkpoint(tmp_path).name == "checkpoint-10"


# ------------------------------------------------------------------ the comparison's figures


def test_wilson_intervals_and_the_bootstrap_are_the_known_values():
    from dataset.evaluate.metrics import mean_interval, wilson
    assert wilson(5, 10) == [0.236593, 0.763407]
    assert wilson(0, 10) == [0.0, 0.277533] and wilson(10, 10) == [0.722467, 1.0]
    assert wilson(0, 0) is None
    lo, hi = mean_interval([1.0, 1.0, 2.0, 4.0])
    assert 1.0 <= lo < 2.0 < hi <= 4.0 and mean_interval([1.0, 1.0, 2.0, 4.0]) == [lo, hi]   # seeded
    assert mean_interval([]) is None


def test_the_random_baseline_is_the_exact_expectation():
    from dataset.evaluate.baselines import random_baseline

    def e(sp, verified=True):
        return {"speedup": sp, "verified": verified}
    items = [{"menu": [e(2.0), e(1.0), e(0.5), e(None)]},          # best 2.0: agreement 1/4
             {"menu": [e(1.5), e(1.5)]}]                           # a tie: both agree
    r = random_baseline(items)
    assert r["agreement"] == round((1 / 4 + 1) / 2, 6)
    # regret over the choices of a measured entry: (1 + 2 + 4)/4 + (1 + 1)/2, over 3/4 + 2/2 choices
    assert r["mean_regret"] == round((7 / 4 + 1) / (3 / 4 + 1), 6)
    lo, hi = r["agreement_interval"]
    assert lo <= r["agreement"] <= hi and random_baseline(items) == r      # seeded draws


def test_the_comparison_table_has_one_row_per_chooser():
    from dataset.evaluate.scorecard import comparison_table
    m = {"prompts": 10, "valid_rate": 1.0, "valid_interval": [0.72, 1.0], "agreement": 0.5,
         "agreement_interval": [0.24, 0.76], "mean_regret": 1.25, "regret_interval": [1.1, 1.4]}
    table = comparison_table({"tuned": m, "cost model": {"unavailable": "no prior"}})
    assert "| tuned | 10 | 100.0% [72.0, 100.0] | 50.0% [24.0, 76.0] | 1.250 [1.100, 1.400] |" in table
    assert "| cost model | - | - | - | unavailable: no prior |" in table
