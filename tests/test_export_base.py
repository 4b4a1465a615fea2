"""``python -m dataset.train --export-base``: the untuned control written through the tuned model's
export (the same float32 load, the same GGUF writer), so an evaluation compares training, not
quantisation. The refusals are fast; the export needs the train extra (marked ``train``)."""
import json

import pytest
from test_finetune_loop import dataset, extras, run_module, tiny  # noqa: F401  (fixtures)


def train(capsys, *args):
    from dataset.train.trainer import main
    rc = main([str(a) for a in args])
    return rc, capsys.readouterr().err


def test_export_base_takes_no_dataset_and_training_needs_one(tmp_path, capsys):
    rc, err = train(capsys, tmp_path, "-o", tmp_path / "out", "--export-base")
    assert rc == 2 and "--export-base writes the base model untrained: give no dataset folder" in err
    rc, err = train(capsys, "-o", tmp_path / "out")
    assert rc == 2 and "give the dataset folders to train on (or --export-base" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.train
def test_the_base_model_is_exported_as_a_tuned_one_is(request, tmp_path):
    base = request.getfixturevalue("tiny")           # the tiny Llama of tests/test_finetune_loop.py
    import numpy as np
    from gguf import GGUFReader
    from transformers import AutoModelForCausalLM
    out = tmp_path / "base"
    r = run_module("dataset.train", "-o", out, "--base", base, "--export-base", "--threads", 1)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((out / "train.json").read_text())["job"] == {"export_base": True, "base": base.name,
                                                                   "gguf_type": "f16"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stages"] == {}
    reader = GGUFReader(str(out / "model.gguf"))
    name = bytes(reader.fields["general.name"].parts[-1]).decode()
    assert name == f"{base.name} (base, untuned)"
    want = AutoModelForCausalLM.from_pretrained(base).model.embed_tokens.weight.detach().numpy()
    got = next(t for t in reader.tensors if t.name == "token_embd.weight")
    assert got.tensor_type.name == "F16"
    assert np.array_equal(np.asarray(got.data).reshape(want.shape), want.astype(np.float16))
    again = run_module("dataset.train", "-o", out, "--base", base, "--export-base")
    assert again.returncode == 2 and "holds a training run" in again.stderr        # never overwritten silently
