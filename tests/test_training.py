"""docs/training.md, smoke-tested: a few steps of TRL's SFTTrainer (on the single- and multi-answer
prompt/completion files) and DPOTrainer (on the preference pairs) over files written by the
dataset's own code, with a tiny Llama built here from a config and a tokenizer trained here on the
same texts: no download, no hub access. The rows (tests/data/training/rows.jsonl) are real verified
rows of `python -m dataset.generate examples -o OUT --per-program 2 --time` (TIR text dropped), timed
again with lowering.measure.compare_many, and two rows of one shrunk corpus program from `--per-program 4
--time --shrink` (a faster and a slower one: the interleaved timings called none of the others faster);
the chat, TRL and preference records are made from them by dataset.assembly.assemble, as the generator
writes them. Needs the `train` extra (`pip install -e '.[train]'`)."""
import copy
import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.train

ROWS = Path(__file__).parent / "data" / "training" / "rows.jsonl"
MENU = Path(__file__).parent / "data" / "training" / "menu.jsonl"     # a menu row of the --time --menu job
INSTALL = "needs the train extra: pip install -e '.[train]' (trl, transformers)"
# the chat template of the tiny model: roles as plain markers, enough for TRL to find the completion
TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


@pytest.fixture(scope="module")
def trl():
    """TRL, with the hub unreachable by configuration: everything here is built locally."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        pytest.importorskip("transformers", reason=INSTALL)
        yield pytest.importorskip("trl", reason=INSTALL)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """single_trl.jsonl, multi_trl.jsonl, preferences.jsonl and preferences_menu.jsonl as
    dataset.generate writes them. The stored rows predate timing verdicts: each gets the verdict
    its speedup would have with a 5% noise floor; the menu row is a real one of `--time --menu`."""
    from dataset.assembly.assemble import chat_multi, chat_single
    from dataset.text.menu import menu_row_pairs, single_row_pairs
    rows = [json.loads(line) for line in ROWS.read_text().splitlines()]
    for r in rows:
        sp = r["timing"]["speedup"]
        r["timing"]["verdict"] = "faster" if sp > 1.05 else ("slower" if sp < 1 / 1.05 else "tie")
    by_program = defaultdict(list)
    for r in rows:
        by_program[r["program"]["leir"]].append(r)
    out = tmp_path_factory.mktemp("training")
    menus = [json.loads(line) | {"split": "train"} for line in MENU.read_text().splitlines()]
    records = {"single_trl.jsonl": [chat_single(r)[1] for r in rows],
               "multi_trl.jsonl": [chat_multi(g)[1] for g in by_program.values() if len(g) > 1],
               "preferences.jsonl": [p for g in by_program.values() for p in single_row_pairs(g, chat_single)],
               "preferences_menu.jsonl": [p for m in menus for p in menu_row_pairs(m)]}
    for name, recs in records.items():
        assert recs, name
        (out / name).write_text("".join(json.dumps(r) + "\n" for r in recs))
    return out


@pytest.fixture(scope="module")
def tiny(files, trl):
    """A 2-layer Llama and a byte-level BPE tokenizer trained on the files' texts."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    texts = [m["content"] for name in ("single_trl.jsonl", "multi_trl.jsonl")
             for line in (files / name).read_text().splitlines()
             for part in ("prompt", "completion") for m in json.loads(line)[part]]
    special = ["<|pad|>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=1024, special_tokens=special,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|end|>")
    tokenizer.chat_template = TEMPLATE
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=None, tie_word_embeddings=True)
    import torch
    torch.manual_seed(0)
    return LlamaForCausalLM(config), tokenizer


def _common(out: Path) -> dict:
    # the paper's optimiser settings (spec dataset.md §7: lr 1e-4, weight decay 0.1, warm-up 0.05,
    # cosine; transformers 5 takes the warm-up ratio as a fraction in warmup_steps), a few steps on the CPU
    return dict(output_dir=str(out), max_steps=3, per_device_train_batch_size=2, learning_rate=1e-4,
                weight_decay=0.1, warmup_steps=0.05, lr_scheduler_type="cosine", logging_steps=1,
                save_strategy="no", report_to=[], use_cpu=True, seed=0, dataloader_num_workers=0)


def _losses(trainer) -> list:
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


@pytest.mark.parametrize("config", ["single_trl", "multi_trl"])
def test_sft_runs_on_the_prompt_completion_files(files, tiny, trl, tmp_path, config):
    import datasets
    model, tokenizer = tiny
    data = datasets.load_dataset("json", data_files=str(files / f"{config}.jsonl"), split="train")
    args = trl.SFTConfig(max_length=1024, **_common(tmp_path))
    trainer = trl.SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    # prompt/completion rows: the loss is on the assistant's answer only
    sample = trainer.train_dataset[0]
    masked = sum(1 for x in sample["labels"] if x == -100)
    assert 0 < masked < len(sample["input_ids"])
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    trainer.train()
    losses = _losses(trainer)
    assert trainer.state.global_step == 3 and len(losses) == 3 and all(math.isfinite(x) for x in losses)
    assert any(not (before[k] == v).all() for k, v in model.named_parameters())


@pytest.mark.parametrize("name", ["preferences.jsonl", "preferences_menu.jsonl"])
def test_dpo_runs_on_the_preference_pairs(files, tiny, trl, tmp_path, name):
    import datasets
    model, tokenizer = tiny
    data = datasets.load_dataset("json", data_files=str(files / name), split="train")
    assert {"prompt", "chosen", "rejected"} <= set(data.column_names)
    assert all(r["chosen_speedup"] > r["rejected_speedup"] for r in data)
    # TRL leaves out pairs longer than max_length: the single-form pair here is ~1,400 characters
    args = trl.DPOConfig(max_length=4096, beta=0.1, **_common(tmp_path))
    # a model loaded by name gets its reference loaded the same way; one built here is copied
    trainer = trl.DPOTrainer(model=model, ref_model=copy.deepcopy(model), args=args, train_dataset=data,
                             processing_class=tokenizer)
    trainer.train()
    losses = _losses(trainer)
    assert trainer.state.global_step == 3 and all(math.isfinite(x) for x in losses)
    # the first step's loss is log 2: the policy starts as its own reference
    assert abs(losses[0] - math.log(2)) < 1e-3
