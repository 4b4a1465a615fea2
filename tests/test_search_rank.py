"""Log-probability ranking (``--llm-answer rank``, search/rank*.py): the score's definition on a fake
OpenAI-compatible server whose model is a table of next-token log-probabilities (so every score is
known exactly), the forms a server is asked in and what happens when it has none, the llm policy
ranking a menu and a kernel page, and the local transformers scorer on a tiny Llama built here,
against a plain forward pass without the key-value cache."""
import json
import math
import re

import pytest
from test_search_llm import FakeLLM, completion, menu_responder, opts, search, tiny_program

from search.rank import EntryScore, Ranking, best_first, end_logprob, rank_entries

MESSAGES = [{"role": "system", "content": "You are a helpful IR optimization assistant."},
            {"role": "user", "content": "1. loop_split\n2. loop_tiling\n...\nAnswer with its number only."}]
VOCAB = list("0123456789") + [".", "\n", " x"]


def model(prefix: str, favourite: str = "") -> dict:
    """The fake model: next-token log-probabilities after the answer written so far. It likes to
    start with 1 and then to go on with 2 (so "1" alone is unlikely: the number goes on), 3 next,
    unless it has a ``favourite`` digit; a number of two digits ends."""
    if prefix == "":
        logits = {d: -3.0 for d in "0123456789"} | {"1": 0.0, "3": -0.5, "2": -1.5, ".": -6.0, "\n": -6.0, " x": -2.0}
        if favourite:
            logits[favourite] = 2.0
    elif prefix == "1":
        logits = {d: -4.0 for d in "0123456789"} | {"2": 0.0, ".": -1.0, "\n": -2.0, " x": -6.0}
    elif len(prefix) == 1:
        logits = {d: -5.0 for d in "0123456789"} | {".": 0.0, "\n": -1.0, " x": -6.0}
    else:
        logits = {d: -7.0 for d in "0123456789"} | {".": 0.0, "\n": -1.0, " x": -6.0}
    z = math.log(sum(math.exp(v) for v in logits.values()))
    return {t: v - z for t, v in logits.items()}


def expected(answer: str, favourite: str = "") -> float:
    """The score of search.rank's definition, from the whole table."""
    lp = sum(model(answer[:i], favourite)[answer[i]] for i in range(len(answer)))
    after = model(answer, favourite)
    return lp + math.log(1 - sum(math.exp(v) for t, v in after.items() if t[0].isdigit()))


FIELDS = {"grammar": lambda b: b.get("grammar"),
          "structured-regex": lambda b: (b.get("structured_outputs") or {}).get("regex"),
          "regex": lambda b: b.get("regex")}
FORCED = {"grammar": re.compile(r'^root ::= "(\d+)" \[\^0-9\]$'), "structured-regex": re.compile(r"^(\d+)\[\^0-9\]$"),
          "regex": re.compile(r"^(\d+)\[\^0-9\]$")}


def logprob_server(speaks=("grammar",), unknown="ignore", logprobs="raw", favourite=lambda body: ""):
    """A responder: the fake model behind a server that follows the constraint fields of
    ``speaks`` (others: ignored, or ``unknown="reject"``: HTTP 400) and reports log-probabilities
    ``raw`` (the model's), ``none`` or ``constrained`` (after the constraint: 0 for the forced
    token, no alternative). ``favourite(body)``: the model's favourite first digit for a request."""
    def respond(body):
        forced, fav = None, favourite(body)
        for name, get in FIELDS.items():
            value = get(body)
            if value is None:
                continue
            if name not in speaks:
                if unknown == "reject":
                    return ("error", 400, f"unknown field for {name}")
                continue
            forced = FORCED[name].match(value).group(1)
        tokens, prefix = [], ""
        while len(tokens) < body.get("max_tokens", 4):
            dist = model(prefix, fav)
            if forced is not None and len(prefix) < len(forced):
                tok = forced[len(prefix)]
            elif forced is not None:
                tok = max((t for t in dist if not t[0].isdigit()), key=dist.get)
            else:
                tok = max(dist, key=dist.get)
            tokens.append((tok, dist))
            prefix += tok
            if not tok[0].isdigit():
                break
        text = "".join(t for t, _ in tokens)
        payload = completion([text], body.get("model", "fake"))
        if body.get("logprobs") and logprobs != "none":
            k = body.get("top_logprobs") or 0
            content = []
            for tok, dist in tokens:
                top = sorted(dist.items(), key=lambda kv: -kv[1])[:k]
                if logprobs == "constrained":
                    content.append({"token": tok, "logprob": 0.0, "bytes": None,
                                    "top_logprobs": [{"token": tok, "logprob": 0.0, "bytes": None}]})
                else:
                    content.append({"token": tok, "logprob": dist[tok], "bytes": None,
                                    "top_logprobs": [{"token": t, "logprob": v, "bytes": None} for t, v in top]})
            payload["choices"][0]["logprobs"] = {"content": content}
        return ("raw", json.dumps(payload).encode())
    return respond


def scorer_for(srv, **kw):
    from search.scorers import make_scorer
    return make_scorer("server", endpoint=srv.url, model="fake", retries=0, **kw)


ANSWERS = [str(i) for i in range(1, 14)]


# ------------------------------------------------------------------------------------ the score


def test_the_end_term_and_the_order_ties_go_to_the_entry_shown_first():
    assert end_logprob([("1", math.log(0.25)), ("23", math.log(0.25)), (".", math.log(0.5)), ("", -0.1)]) == \
        pytest.approx(math.log(0.5))
    assert end_logprob([(".", -0.01)]) == 0.0                      # no digit listed: the number ends
    assert best_first([-2.0, -1.0, -1.0, -math.inf, -0.5]) == [4, 1, 2, 0, 3]
    r = Ranking([EntryScore("1", -1.0), EntryScore("2", None)], "server", "first-token")
    assert r.scores == [-1.0, -math.inf] and r.to_json()["entries"][1]["logprob"] is None
    with pytest.raises(ValueError, match="digits 0-9"):
        rank_entries(MESSAGES, ["1", "two"], None)
    with pytest.raises(ValueError, match="not distinct"):
        rank_entries(MESSAGES, ["1", "1"], None)


def test_the_server_scores_are_the_models_log_probabilities_of_each_forced_answer():
    """llama.cpp's form (a GBNF grammar forcing the answer and one non-digit): each score is the
    definition's value from the fake model's table; "12" wins over "1" (which the model would
    write first, but then go on) and over "3"."""
    with FakeLLM(responder=logprob_server(speaks=("grammar",))) as srv:
        scorer = scorer_for(srv)
        scores = rank_entries(MESSAGES, ANSWERS, scorer)
        again = scorer.score(MESSAGES, ANSWERS)
    assert scores == pytest.approx([expected(a) for a in ANSWERS], abs=1e-9)
    assert ANSWERS[best_first(scores)[0]] == "12" and max(model(""), key=model("").get) == "1"
    assert again.scores == scores and again.form == "grammar"     # same question, same scores
    bodies = [r["body"] for r in srv.requests]
    grammar = [b for b in bodies if "grammar" in b]
    assert grammar[ANSWERS.index("12")]["grammar"] == 'root ::= "12" [^0-9]'
    assert all(b["logprobs"] is True and b["top_logprobs"] == 20 and b["temperature"] == 0 for b in bodies)
    # the forms before llama.cpp's were tried once, found ignored (the answer was not forced), then never again
    state = scorer.state()
    assert state["kept"] == "grammar"
    assert [(t["form"], t["outcome"]) for t in state["tried"]] == [("structured-regex", "ignored"),
                                                                   ("regex", "ignored"), ("grammar", "accepted")]
    assert len(bodies) == 2 + 2 * len(ANSWERS)
    e12 = again.entries[ANSWERS.index("12")]
    assert e12.tokens == ("1", "2") and e12.token_logprobs == pytest.approx((model("")["1"], model("1")["2"]))


@pytest.mark.parametrize("speaks", ["structured-regex", "regex"])
def test_vllm_and_sglang_forms_and_a_server_that_rejects_unknown_fields(speaks):
    with FakeLLM(responder=logprob_server(speaks=(speaks,), unknown="reject")) as srv:
        scorer = scorer_for(srv)
        scores = rank_entries(MESSAGES, ANSWERS, scorer)
    assert scores == pytest.approx([expected(a) for a in ANSWERS], abs=1e-9)
    tried = scorer.state()["tried"]
    assert tried[-1] == {"form": speaks, "outcome": "accepted", "detail": ""}
    assert all(t["outcome"] == "rejected" and "HTTP 400" in t["detail"] for t in tried[:-1])


def test_a_server_without_usable_log_probabilities_is_a_clear_error_or_first_token_ranking():
    """No constraint the server follows: menus of one-digit numbers are ranked from the first
    token's listed alternatives (no end term), longer ones cannot be ranked (unsupported, saying
    why); no log-probabilities at all, or constrained ones, are each an unsupported error."""
    from search.rank import RankError
    with FakeLLM(responder=logprob_server(speaks=())) as srv:
        scorer = scorer_for(srv)
        short = scorer.score(MESSAGES, ANSWERS[:9])
        with pytest.raises(RankError) as e:
            scorer.score(MESSAGES, ANSWERS)
    assert short.form == "first-token" and short.scores == pytest.approx([model("")[a] for a in ANSWERS[:9]])
    assert all(x.end is None for x in short.entries)
    assert e.value.unsupported and "one character only" in e.value.message and "grammar: ignored" in e.value.message
    with FakeLLM(responder=logprob_server(logprobs="none")) as srv:
        with pytest.raises(RankError) as e:
            scorer_for(srv).score(MESSAGES, ANSWERS[:9])
    assert e.value.unsupported and "grammar: no logprobs" in e.value.message
    assert "first-token: no logprobs" in e.value.message and e.value.requests == 4
    with FakeLLM(responder=logprob_server(logprobs="constrained")) as srv:
        with pytest.raises(RankError) as e:
            scorer_for(srv).score(MESSAGES, ANSWERS)
    assert e.value.unsupported and "grammar: constrained logprobs" in e.value.message


def test_a_server_fault_fails_the_question_and_is_no_verdict_on_the_form():
    from search.rank import RankError
    with FakeLLM(responder=lambda body: ("status", 503)) as srv:
        scorer = scorer_for(srv)
        with pytest.raises(RankError) as e:
            scorer.score(MESSAGES, ANSWERS)
    assert not e.value.unsupported and "503" in e.value.message and scorer.state()["tried"] == []


# ------------------------------------------------------------------------------------ the llm policy


def test_the_llm_policy_takes_the_best_ranked_entries_and_records_every_score(tmp_path, engine, verifier):
    """Greedy wants 2 proposals a node: the two best-ranked entries of the menu, in that order;
    the call records each entry's score, tokens and end term and the order; the best path replays;
    a resumed run keeps the form."""
    from engine import Engine
    with FakeLLM(responder=logprob_server()) as srv:
        rec = search(tmp_path, srv, engine, verifier, algorithm="greedy", budget=2, llm_answer="rank")
        n_first = len(srv.requests)
        from search.run import run_search
        run_search(tiny_program(), opts(srv, algorithm="greedy", budget=3, llm_answer="rank"), engine=engine,
                   verifier=verifier, out=str(tmp_path / "t.json"), progress=lambda m: None, resume=rec)
        later = [r["body"] for r in srv.requests[n_first:]]
    call = rec["llm_calls"][0]
    m = len(call["menu"])
    answers = [str(i) for i in range(1, m + 1)]
    scores = [expected(a) for a in answers]
    assert [e["logprob"] for e in call["rank"]["entries"]] == pytest.approx(scores, abs=1e-9)
    assert call["rank"]["order"] == [i + 1 for i in best_first(scores)] and call["answer"] == "rank"
    assert call["constraint"] == "grammar" and call["error"] is None and call["attempts"] == call["rank"]["requests"]
    assert call["usage"]["total_tokens"] > 0 and call["messages"][1]["content"].endswith("Answer with its number only.")
    menu_samples = [s for s in rec["samples"] if s["kind"] == "menu"]
    assert [s["shown_number"] for s in menu_samples] == call["rank"]["order"][:2]
    assert [s["key"] for s in menu_samples] == [call["menu"][n - 1]["key"] for n in call["rank"]["order"][:2]]
    ranking = rec["summary"]["policy"]["ranking"]
    assert ranking["kept"] == "grammar" and ranking["questions"] >= 1 and ranking["fallbacks"] == 0
    assert rec["options"]["llm_answer"] == "rank" and rec["options"]["scorer"] == "server"
    program = tiny_program()
    for st in rec["best"]["steps"]:                              # what search.replay applies
        program = Engine(strategies="paper").apply(program, st)
    assert program.to_leir() == rec["best"]["leir"]
    assert later and all("grammar" in b and "structured_outputs" not in b for b in later)


def test_without_log_probabilities_the_policy_asks_for_a_number_and_says_why(tmp_path, engine, verifier):
    with FakeLLM(responder=menu_responder) as srv:          # answers "1" whatever is asked: no logprobs
        rec = search(tmp_path, srv, engine, verifier, algorithm="chain", budget=2, llm_answer="rank")
    calls = rec["llm_calls"]
    ranked = [c for c in calls if c.get("answer") == "rank"]
    assert ranked and all("unavailable" in c["rank"] and c["error"] is None for c in ranked)
    assert "no usable log-probabilities" in ranked[0]["rank"]["unavailable"]
    named = [c for c in calls if c.get("answer") != "rank"]
    assert named and rec["samples"][0]["status"] == "accepted" and rec["samples"][0]["call"] == named[0]["index"]
    assert rec["summary"]["policy"]["ranking"]["fallbacks"] == len(ranked)


@pytest.fixture(scope="module")
def kernel_engine():
    from engine import Engine
    return Engine(strategies="paper,extra")


def test_the_kernel_search_ranks_each_page_and_follows_the_best_line(kernel_engine):
    """Pages of a kernel question (``more`` lines when the moves do not fit): each page's lines are
    ranked, the best line is followed (a model that favours a "more" line asks its page), and the
    move measured is the best line of the last page."""
    from test_kernel_policy import chosen, run

    def more_line(body):
        more = re.findall(r"^(\d)\. more ", body["messages"][-1]["content"], re.M)
        return more[0] if more else ""
    with FakeLLM(responder=logprob_server(favourite=more_line)) as srv:
        rec = run(kernel_engine, policy="llm", endpoint=srv.url, model="fake", budget=8, prompt_tokens=700,
                  llm_answer="rank")
    picks = chosen(rec)
    assert picks and all(s["choice"]["pick"] == "llm rank" for s in picks)
    assert any(len(s["choice"]["pages"]) >= 2 for s in picks)        # a "more" line ranked first, then its page
    calls = {c["index"]: c for c in rec["llm_calls"]}
    for s in picks:
        last = calls[s["choice"]["call"]]
        lines = last["kernel"]["lines"]
        best = last["rank"]["order"][0]
        assert s["choice"]["pages"][-1] == best and lines[best - 1].get("key") == s["key"]
        assert "more" not in lines[best - 1]
        fav = more_line({"messages": last["messages"]})
        assert [e["logprob"] for e in last["rank"]["entries"]] == pytest.approx(
            [expected(str(n), fav) for n in range(1, len(lines) + 1)], abs=1e-9)
    for c in rec["llm_calls"]:                                         # every page: its best line taken
        if c["index"] not in {s["choice"]["call"] for s in picks}:
            best = c["rank"]["order"][0]
            assert "more" in c["kernel"]["lines"][best - 1]


# ------------------------------------------------------------------------------------ options


def test_rank_options_are_checked_with_errors_naming_the_flag(tmp_path):
    from engine.leir.diagnostics import LeirError
    from search import SearchOptions
    base = dict(policy="llm", endpoint="http://x/v1", model="m", llm_answer="rank")
    SearchOptions(**base).validate()
    with pytest.raises(LeirError, match="--llm-answer rank ranks the menu of --policy llm, not of --policy cost"):
        SearchOptions(**dict(base, policy="cost")).validate()
    with pytest.raises(LeirError, match="--scorer: 'nowhere' is not a scorer"):
        SearchOptions(**dict(base, scorer="nowhere")).validate()
    with pytest.raises(LeirError, match="no such model folder or file"):
        SearchOptions(**dict(base, scorer=f"local:{tmp_path / 'none'}")).validate()
    with pytest.raises(LeirError, match="needs --endpoint"):
        SearchOptions(policy="llm", model="m", llm_answer="rank").validate()
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    SearchOptions(policy="llm", llm_answer="rank", scorer=f"local:{tmp_path / 'm'}").validate()   # no server needed


# ------------------------------------------------------------------------------------ the local scorer


TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


@pytest.fixture(scope="module")
def tiny_llama():
    """A 2-layer Llama with random weights and a byte-level BPE tokenizer (digits one token each)
    trained here on a menu prompt: no download."""
    pytest.importorskip("transformers", reason="needs the train extra: pip install -e '.[train]'")
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    special = ["<|pad|>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([m["content"] for m in MESSAGES] * 4,
                            trainers.BpeTrainer(vocab_size=400, special_tokens=special,
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|end|>")
    tokenizer.chat_template = TEMPLATE
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval(), tokenizer


def plain_scores(model, tokenizer, messages, answers) -> list[float]:
    """The definition computed the slow way: one forward pass over prompt + answer, no cache."""
    import torch
    prompt = tokenizer(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
                       add_special_tokens=False)["input_ids"]
    digits = [i for i in range(len(tokenizer)) if tokenizer.decode([i])[:1].isdigit()]
    out = []
    for a in answers:
        ids = tokenizer(a, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=torch.tensor([prompt + ids])).logits[0], dim=-1)
        n = len(prompt)
        lp = sum(float(logp[n - 1 + i, t]) for i, t in enumerate(ids))
        out.append(lp + math.log(1 - float(logp[n - 1 + len(ids), digits].exp().sum())))
    return out


def test_the_local_scorer_equals_a_plain_forward_pass_and_loads_from_a_folder(tiny_llama, tmp_path):
    from search.rank_local import LocalScorer
    from search.scorers import make_scorer
    model, tokenizer = tiny_llama
    answers = [str(i) for i in range(1, 23)]
    assert [len(tokenizer(a, add_special_tokens=False)["input_ids"]) for a in ("7", "12")] == [1, 2]
    got = LocalScorer(model=model, tokenizer=tokenizer).score(MESSAGES, answers)
    assert got.scores == pytest.approx(plain_scores(model, tokenizer, MESSAGES, answers), abs=1e-4)
    assert got.form == "local" and got.entries[11].tokens == ("1", "2")
    assert got.entries[11].logprob == pytest.approx(sum(got.entries[11].token_logprobs) + got.entries[11].end)
    model.save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    loaded = make_scorer(f"local:{tmp_path / 'tiny'}")
    assert rank_entries(MESSAGES, answers, loaded) == pytest.approx(got.scores, abs=1e-5)
    assert loaded.state() == {"scorer": "local", "model": "tiny"}


def test_a_search_ranks_with_a_local_model_and_no_server(tiny_llama, tmp_path, engine, verifier):
    from search import SearchOptions
    from search.run import run_search
    model, tokenizer = tiny_llama
    model.save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    options = SearchOptions(algorithm="chain", policy="llm", llm_answer="rank", scorer=f"local:{tmp_path / 'tiny'}",
                            budget=1, confirm=0, min_repeat_ms=0.2, repeat=3, trials=1, prompt_tokens=400)
    rec = run_search(tiny_program(), options, engine=engine, verifier=verifier, out=str(tmp_path / "t.json"),
                     progress=lambda m: None).record
    call = rec["llm_calls"][0]
    assert call["scorer"] == "local" and call["constraint"] == "local" and call["attempts"] == 0
    assert rec["samples"][0]["shown_number"] == call["rank"]["order"][0]
    assert rec["summary"]["policy"]["ranking"]["model"] == "tiny"
