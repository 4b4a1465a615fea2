"""The whole loop of issue 28 at toy scale: `python -m dataset.train` tunes a tiny Llama (random
init, a small config, a byte-level BPE tokenizer trained here and saved beside it: nothing is
downloaded) on a real menu row for a few steps, checkpointing; killed with SIGKILL after a
checkpoint and run again with --resume, it goes on from that checkpoint; its model.gguf is read
by llama.cpp with the same logits as the Hugging Face model; llama.cpp's server serves it; one
`python -m dataset.evaluate` on the menu row (answers constrained to the menu numbers); one
`python -m search --policy llm` sample with it.

Needs the train extra (TRL, peft, gguf) and, for the server, the llm-local extra (llama.cpp);
without them these tests skip and say so."""
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.train

MENU = Path(__file__).parent / "data" / "training" / "menu.jsonl"     # a menu row of a --time --menu job
INSTALL = "needs the train extra: pip install -e '.[train]' (trl, transformers, peft, gguf)"
SERVER = "needs the llm-local extra (llama.cpp's server): see tests/test_llm_local.py"
TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def run_module(*args, timeout=1800, env=None):
    e = dict(os.environ, PYTHONPATH=str(ROOT), **OFFLINE, **(env or {}))
    return subprocess.run([sys.executable, "-m", *map(str, args)], cwd=ROOT, env=e, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def extras():
    for m in ("trl", "peft", "gguf", "transformers"):
        if importlib.util.find_spec(m) is None:
            pytest.skip(INSTALL)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, extras):
    """A dataset folder holding the real menu row, in train/ and (for the evaluation) test/."""
    folder = tmp_path_factory.mktemp("menus")
    row = json.loads(MENU.read_text().splitlines()[0])
    for split in ("train", "test"):
        (folder / split).mkdir()
        (folder / split / "menu.jsonl").write_text(json.dumps(row | {"split": split}) + "\n")
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, dataset):
    """A 2-layer Llama with grouped-query attention and a tokenizer trained on the row's texts,
    saved as a Hugging Face folder (the --base a user gives)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    texts = [m["content"] for line in MENU.read_text().splitlines() for m in json.loads(line)["messages"]]
    special = ["<|pad|>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=512, special_tokens=special,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|end|>")
    tokenizer.chat_template = TEMPLATE
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
                         tie_word_embeddings=True)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny")
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def train_cmd(dataset, tiny, out, steps):
    return ("dataset.train", dataset, "-o", out, "--base", tiny, "--max-steps", steps, "--save-steps", 1,
            "--grad-accum", 1, "--max-length", 8192, "--gguf-type", "f32", "--threads", 1)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, dataset, tiny):
    """Four steps, killed (SIGKILL) once the second checkpoint is complete, then --resume."""
    out = tmp_path_factory.mktemp("run") / "tuned"
    env = dict(os.environ, PYTHONPATH=str(ROOT), **OFFLINE)
    proc = subprocess.Popen([sys.executable, "-m", *map(str, train_cmd(dataset, tiny, out, 4))], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = out / "sft" / "checkpoint-2" / "trainer_state.json"
    deadline = time.monotonic() + 900
    while not state.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    killed_at = 2 if proc.poll() is None else None
    proc.kill()
    proc.wait()
    r = run_module(*train_cmd(dataset, tiny, out, 4), "--resume")
    assert r.returncode == 0, r.stderr[-3000:]
    return out, killed_at, r.stderr


def test_training_resumes_from_its_last_checkpoint_and_writes_a_model(trained):
    out, killed_at, log = trained
    if killed_at is not None:          # killed mid-run: the rerun goes on from the checkpoint, not from 0
        assert "resuming from checkpoint-" in log and "sft: from step" in log
        first = int(log.split("sft: from step ")[1].split()[0])
        assert first >= killed_at
        assert f"sft: step {first}/" not in log          # the steps before it are not trained again
    summary = json.loads((out / "summary.json").read_text())
    sft = summary["stages"]["sft"]
    assert sft["steps"] == 4 and sft["rows"] == 1 and sft["left_out_too_long"] == 0
    assert len(sft["losses"]) == 4 and all(x == x for x in sft["losses"])
    job = json.loads((out / "train.json").read_text())["job"]
    assert job["completion"] == "number" and str(out.parent) not in json.dumps(job)
    assert (out / "model" / "config.json").exists() and (out / "model.gguf").stat().st_size > 0


def test_the_trained_answer_is_the_menu_number(dataset, tiny, tmp_path):
    from dataset.train.training_examples import menu_examples
    rows = menu_examples([str(dataset)], "train", "number")
    row = json.loads(MENU.read_text().splitlines()[0])
    assert rows[0]["prompt"] == row["messages"][:-1]                 # the search's request as it is
    assert rows[0]["completion"] == [{"role": "assistant", "content": str(row["answer"])}]
    full = menu_examples([str(dataset)], "train", "reason")
    assert full[0]["completion"][0]["content"] == row["messages"][-1]["content"]


def test_llama_cpp_reads_the_gguf_with_the_models_logits(trained):
    llama_cpp = pytest.importorskip("llama_cpp", reason=SERVER)
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    out = trained[0]
    tokenizer = AutoTokenizer.from_pretrained(out / "model")
    model = AutoModelForCausalLM.from_pretrained(out / "model")
    text = "B^{64}_{tx=0}L^{512}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});] loop_split 3"
    ids = tokenizer(text)["input_ids"]
    llm = llama_cpp.Llama(model_path=str(out / "model.gguf"), n_ctx=512, logits_all=True, verbose=False)
    assert llm.tokenize(text.encode(), add_bos=False, special=False) == ids     # the same tokenizer
    llm.eval(ids)
    with torch.no_grad():
        want = model(torch.tensor([ids])).logits[0].numpy()
    got = np.array(llm.scores[:len(ids)])
    assert np.abs(got - want).max() < 1e-3 * max(1.0, np.abs(want).max())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(trained, tmp_path_factory):
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
        pytest.skip(SERVER)
    port = _free_port()
    log = tmp_path_factory.mktemp("srv") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(trained[0] / "model.gguf"), "--model_alias",
           "tuned", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192", "--n_threads", "1",
           "--verbose", "False"]
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the server exited: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_the_tuned_model_is_evaluated_behind_the_server_with_the_menu_constraint(server, dataset, tmp_path):
    out = tmp_path / "eval"
    r = run_module("dataset.evaluate", dataset, "--endpoint", server, "--model", "tuned", "--max-tokens", 8,
                   "--concurrency", 1, "-o", out, "--no-plot", "--no-baselines")
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    m = res["menu"]
    assert m["prompts"] == 1 and m["valid"] == 1        # constrained: a random model still names an entry
    assert res["job"]["constraint_kept"] == "grammar"   # llama.cpp's form, negotiated
    lo, hi = m["agreement_interval"]
    assert 0 <= lo <= m["agreement"] <= hi <= 1


def test_one_search_sample_with_the_tuned_model(server, tmp_path):
    row = json.loads(MENU.read_text().splitlines()[0])
    prog = tmp_path / "state.json"
    prog.write_text(json.dumps(row["program"]))
    out = tmp_path / "t.json"
    r = run_module("search", prog, "-o", out, "--algorithm", "greedy", "--policy", "llm", "--endpoint", server,
                   "--model", "tuned", "--budget", 1, "--menu-size", 6, "--prompt-tokens", 1000, "--max-tokens", 8, "--confirm", 0,
                   "--trials", 1, "--quiet")
    assert r.returncode == 0, r.stderr[-3000:]
    traj = json.loads(out.read_text())
    (sample,) = traj["samples"]
    shown = traj["llm_calls"][sample["call"]]["menu"]
    assert 1 <= sample["shown_number"] <= len(shown) <= 6
    assert shown[sample["shown_number"] - 1]["key"] == sample["key"]
