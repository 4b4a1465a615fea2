"""``python -m dataset.evaluate`` against a scripted OpenAI-compatible server, on a small dataset
folder built here from real enumerated steps of a tiny softmax: every metric on known answers
(correct, wrong, invalid LEIR, a changed known tensor, prose, the original echoed back; menu
answers: the fastest, a slower one, a step that failed verification, a number off the menu,
prose) with exact expected numbers; a server ignoring ``n``; kill -9 then resume; user errors."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_search_llm import TINY, FakeLLM, completion, tiny_program

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"(?:IR of|menu of) (\w+)")
WRONG = TINY.replace("C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/", "C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a})/")
BROKEN = TINY[:-3]                                                     # an unclosed statement
RESHAPED = TINY.replace("C^{f32,g}_{tx,a}=", "C^{f32,g}_{tx}=")        # writes the output C with another shape
MENU_SPEEDUPS = [(1.0, "equal"), (2.0, "equal"), (4.0, "equal"), (None, "not equal")]


def free(ir, strategy="loop_split"):
    return "<think>...</think><answer>" + json.dumps({"transformed_IR": ir, "applied_strategy": strategy}) + "</answer>"


@pytest.fixture(scope="module")
def steps():
    from engine import Engine
    engine = Engine(strategies=["loop_split", "loop_reorder", "cache_read_write"])
    by = {}
    for s in engine.enumerate(tiny_program()):
        by.setdefault(s.strategy, s)
    return by


def make_dataset(folder: Path, steps, single_names, menu_names) -> Path:
    """rows.jsonl + train/ and test/ single.jsonl (the generator's formats) and menu.jsonl (docs/dataset.md)."""
    from dataset.text import row_format
    folder.mkdir(parents=True, exist_ok=True)
    base = tiny_program()
    order = ["loop_split", "loop_reorder", "cache_read_write"]
    rows, chats, menus = [], [], []
    for i, name in enumerate(single_names):
        st = steps[order[i % len(order)]]
        prog = base.to_json() | {"name": name}
        rid = f"r{i}"
        rows.append({"id": rid, "program": prog, "transformed": st.leir,
                     "step": {"strategy": st.strategy, "category": st.category},
                     "difficulty": {"bucket": "medium" if st.strategy == "loop_reorder" else "difficult"}})
        chats.append({"id": rid, "messages": row_format.messages(row_format.single_prompt(prog), "<answer/>"),
                      "split": "test" if i < len(single_names) else "train"})
    chats.append({"id": "train0", "messages": row_format.messages("Give the following IR of train0: ...", "x"),
                  "split": "train"})
    rows.append(dict(rows[0], id="train0"))
    shown = [steps[s] for s in order] + [steps["loop_split"]]
    for j, name in enumerate(menu_names):
        menu = [{"number": k + 1, "key": st.key, "strategy": st.strategy, "speedup": sp,
                 "verdict": "faster" if sp and sp > 1 else ("tie" if sp else None), "verified": verdict == "equal"}
                for k, (st, (sp, verdict)) in enumerate(zip(shown, MENU_SPEEDUPS))]
        text = f"Choose the fastest step of the menu of {name}:\n" + "\n".join(
            f"{e['number']}. {e['strategy']} ({e['key']})" for e in menu)
        menus.append({"id": f"m{j}", "split": "test", "program": base.to_json() | {"name": name},
                      "messages": [{"role": "system", "content": "You are a helpful IR optimization assistant."},
                                   {"role": "user", "content": text}, {"role": "assistant", "content": "3"}],
                      "menu": menu, "answer": 3})
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for split in ("train", "test"):
        (folder / split).mkdir(exist_ok=True)
        (folder / split / "single.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chats
                                                           if r["split"] == split))
    if menus:
        (folder / "test").mkdir(exist_ok=True)          # menu rows live in split folders
        (folder / "test" / "menu.jsonl").write_text("".join(json.dumps(r) + "\n" for r in menus))
    return folder


def scripted(answers: dict, honour_n=True, delay=0.0):
    """A server answering by the program name in the prompt: ``answers[name]`` is a list of
    texts handed out in order (a server ignoring ``n`` returns one per request)."""
    used = {}

    def respond(body):
        name = NAME.search(body["messages"][-1]["content"]).group(1)
        if delay:
            time.sleep(delay)
        seq = answers[name]
        n = body.get("n", 1) if honour_n else 1
        k = used.get(name, 0)
        used[name] = k + n
        return ("texts", [seq[(k + i) % len(seq)] for i in range(n)])
    return respond


def evaluate(*args):
    from dataset.evaluate.evaluation import main
    return main([str(a) for a in args])


def test_single_and_menu_metrics_on_known_answers(steps, tmp_path, capsys):
    names = ["good", "wrong", "broken", "reshaped", "prose", "echo"]
    ds = make_dataset(tmp_path / "ds", steps, names, ["fast", "slow", "failed", "offmenu", "chatty"])
    answers = {"good": [free(steps["loop_split"].leir, "Loop Split")], "wrong": [free(WRONG)],
               "broken": [free(BROKEN)], "reshaped": [free(RESHAPED, "loop_reorder")],
               "prose": ["I would split the loop."], "echo": [free(TINY)],
               "fast": ["3"], "slow": ['{"choices": [1]}'], "failed": ["4"], "offmenu": ["9"],
               "chatty": ["the third one"]}
    with FakeLLM(responder=scripted(answers)) as srv:
        rc = evaluate(ds, "--endpoint", srv.url, "--model", "fake", "-o", tmp_path / "ev", "--concurrency", "3")
    assert rc == 0
    res = json.loads((tmp_path / "ev" / "results.json").read_text())
    o = res["single"]["overall"]
    assert (o["prompts"], o["attempts"]) == (6, 6)          # the train row is not asked
    assert (o["diff"], o["build"], o["exec"], o["equal"]) == (0.666667, 0.333333, 0.333333, 0.166667)
    assert o["pass@1"] == 0.166667
    by = {p["id"]: p["attempts"][0] for p in res["prompts"] if p["kind"] == "single"}
    assert [by[f"r{i}"]["status"] for i in range(6)] == ["equal", "not equal", "invalid program", "invalid program",
                                                         "parse failed", "same as original"]
    # the engine names the good answer's step; the claim "Loop Split" is read as loop_split
    assert by["r0"]["reached"]["strategy"] == "loop_split" and by["r0"]["claimed"] == [["loop_split", "operator"]]
    assert by["r1"]["reached"] is None
    cat = res["single"]["by_category"]     # r0, r3 loop_split (operator), r1, r4 loop_reorder, r2, r5 cache
    assert cat["operator"]["prompts"] == 4 and cat["operator"]["equal"] == 0.25
    assert cat["memory"] == {"prompts": 2, "attempts": 2, "diff": 0.5, "build": 0.0, "exec": 0.0, "equal": 0.0,
                             "pass@1": 0.0}
    assert res["single"]["by_bucket"]["medium"]["prompts"] == 2
    d = res["single"]["strategies"]
    assert d["claimed"]["counts"] == {"loop_split": 4, "loop_reorder": 1}
    assert d["reached"]["counts"] == {"loop_split": 1}
    assert d["claimed_categories"]["counts"] == {"operator": 5}
    m = res["menu"]
    from dataset.evaluate.metrics import mean_interval, wilson
    baselines = m.pop("baselines")
    comparison = m.pop("comparison")
    assert m == {"prompts": 5, "valid": 3, "valid_rate": 0.6, "valid_interval": wilson(3, 5), "agreement": 0.2,
                 "agreement_interval": wilson(1, 5), "agreement_of_valid": 0.333333,
                 "label_agreement": 0.2, "mean_regret": 2.5, "regret_interval": mean_interval([1.0, 4.0]),
                 "regret_answers": 2, "unmeasured_choices": 1,
                 "out_of_form": 3,           # '{"choices": [1]}', "9" and prose are not a choice of 1-4
                 "statuses": {"not on menu": 1, "ok": 3, "parse failed": 1}}
    # random choice on the same menus: 1/4 agree (4.0 of 1, 2, 4, unverified); regrets 4, 2, 1 over 3/4
    assert baselines["random"]["agreement"] == 0.25 and baselines["random"]["mean_regret"] == round(7 / 3, 6)
    assert "unavailable" in baselines["cost model"]          # these rows carry no steps to rank
    # the comparison: every menu counts (no intervals here: the verdicts decide; tie 1.0 < faster 2.0, 4.0)
    assert comparison["menus"] == 5 and sum(comparison["left_out"].values()) == 0
    me, rnd = comparison["choosers"]["fake"], comparison["choosers"]["random"]
    assert (me["valid"], me["top1"], me["top1_interval"]) == (3, 0.2, wilson(1, 5))
    assert (me["pairwise"], me["pairwise_pairs"]) == (0.333333, 3)     # "3" beats 1; "1" loses to 2 and 3
    # regrets 1 ("3"), 4 ("1"), and the menu's largest, 4, for the unverified entry and the two non-answers
    assert me["geo_regret"] == round(4 ** 0.8, 6) and rnd["geo_regret"] == round(2 ** 1.25, 6)
    assert rnd["top1"] == 0.25 and me["vs_random"]["top1"]["p"] == 0.75
    assert [c for c in comparison["choosers"]] == ["fake", "random", "position 1", "position 2", "position 3",
                                                   "last", "strategy prior", "cost model"]
    assert comparison["choosers"]["position 3"]["top1"] == 1.0          # the engine's order here puts 4.0 third
    # the menu prompts were constrained to their numbers: the first form the server followed (vLLM's choice)
    assert res["job"]["constraint_kept"] == "choice"
    menu_bodies = [r["body"] for r in srv.requests if "menu of" in r["body"]["messages"][-1]["content"]]
    assert all(b["structured_outputs"] == {"choice": ["1", "2", "3", "4"]} for b in menu_bodies)
    md = (tmp_path / "ev" / "results.md").read_text()
    assert "| all | 6 | 6 | 66.7% | 33.3% | 33.3% | 16.7% | 16.7% |" in md and "Menu prompts" in md
    assert (tmp_path / "ev" / "results.png").read_bytes()[:4] == b"\x89PNG"
    assert str(tmp_path) not in (tmp_path / "ev" / "results.json").read_text()
    assert "6 single prompts" in capsys.readouterr().out


def test_pass_at_k_with_a_server_ignoring_n(steps, tmp_path):
    from dataset.evaluate.metrics import pass_at_k
    assert pass_at_k(2, 1, 1) == 0.5 and pass_at_k(2, 1, 2) == 1.0 and pass_at_k(4, 1, 2) == 0.5
    ds = make_dataset(tmp_path / "ds", steps, ["half", "none"], [])
    answers = {"half": [free(steps["loop_split"].leir), free(WRONG)], "none": [free(WRONG), "prose"]}
    with FakeLLM(responder=scripted(answers, honour_n=False)) as srv:
        assert evaluate(ds, "--endpoint", srv.url, "--model", "fake", "-o", tmp_path / "ev", "--attempts", 2,
                        "--no-plot", "--concurrency", 1) == 0
        asked = [r["body"]["n"] for r in srv.requests]
    assert asked == [2, 1, 2, 1]                     # one answer came back: the missing one is asked again
    res = json.loads((tmp_path / "ev" / "results.json").read_text())
    o = res["single"]["overall"]
    assert (o["attempts"], o["pass@1"], o["pass@2"], o["diff"]) == (4, 0.25, 0.5, 0.75)
    assert res["job"]["temperature"] == 0.7


def _cli(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "dataset.evaluate", *map(str, args)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


@pytest.mark.long
def test_kill_9_then_resume_gives_the_uninterrupted_results(steps, tmp_path):
    names = [f"m{i}" for i in range(8)]
    ds = make_dataset(tmp_path / "ds", steps, ["good", "wrong"], names)
    answers = {"good": [free(steps["loop_split"].leir)], "wrong": [free(WRONG)]}
    answers |= {n: [str(1 + i % 4)] for i, n in enumerate(names)}
    with FakeLLM(responder=scripted(answers)) as srv:
        assert evaluate(ds, "--endpoint", srv.url, "--model", "fake", "-o", tmp_path / "full", "--no-plot") == 0
    with FakeLLM(responder=scripted(answers, delay=0.3)) as srv:
        p = _cli(ds, "--endpoint", srv.url, "--model", "fake", "-o", tmp_path / "cut", "--concurrency", 1,
                 "--no-plot")
        tasks = tmp_path / "cut" / ".journal" / "tasks"
        deadline = time.time() + 240
        while time.time() < deadline and len(list(tasks.glob("*.json")) if tasks.exists() else []) < 4:
            time.sleep(0.05)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        done_before = len(list(tasks.glob("*.json")))
        assert 4 <= done_before < 10
        asked_before = len(srv.requests)
        q = _cli(ds, "--endpoint", srv.url, "--model", "fake", "-o", tmp_path / "cut", "--no-plot")
        out, err = q.communicate(timeout=300)
        assert q.returncode == 0, err
        # the rerun asks only what was not journalled (a prompt in flight at the kill is asked again)
        assert len(srv.requests) - asked_before == 10 - done_before
    full = json.loads((tmp_path / "full" / "results.json").read_text())
    cut = json.loads((tmp_path / "cut" / "results.json").read_text())
    assert cut == full
    assert (tmp_path / "full" / "results.md").read_text() == (tmp_path / "cut" / "results.md").read_text()


def test_user_errors_exit_2_with_one_line(steps, tmp_path):
    ds = make_dataset(tmp_path / "ds", steps, ["good"], [])

    def run(*args):
        r = subprocess.run([sys.executable, "-m", "dataset.evaluate", *map(str, args)], cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        return r.stderr
    assert "no such dataset folder" in run(tmp_path / "nope", "--endpoint", "http://x/v1", "--model", "m")
    assert "not an http(s) URL" in run(ds, "--endpoint", "localhost:8000", "--model", "m")
    assert "unknown split 'dev'" in run(ds, "--endpoint", "http://x/v1", "--model", "m", "--split", "dev")
    assert "cannot reach the endpoint" in run(ds, "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
                                              "--retries", "0", "-o", tmp_path / "ev")
    (tmp_path / "ds" / "test").mkdir(exist_ok=True)
    (tmp_path / "ds" / "test" / "menu.jsonl").write_text('{"id": "x", "split": "test"}\n')
    assert "menu.jsonl:1:1: error: not a menu row" in run(ds, "--endpoint", "http://x/v1", "--model", "m")


def test_menu_constraint_is_negotiated_like_the_search_does(steps, tmp_path):
    """A server that refuses vLLM's choice list (a validation error) and ignores SGLang's regex
    (prose comes back) is asked with llama.cpp's grammar, which it follows: every menu prompt
    then goes out with the grammar of its own numbers; the negotiation is in the journal, so a
    second run asks nothing again and keeps the form."""
    ds = make_dataset(tmp_path / "ds", steps, ["good"], ["m0", "m1", "m2"])     # --kind menu: the single one is not asked

    def respond(body):
        if "structured_outputs" in body:
            return ("error", 400, "structured_outputs: Extra inputs are not permitted")
        if "regex" in body:
            return ("text", "I would take the third one.")
        return ("text", "3")
    with FakeLLM(responder=respond) as srv:
        assert evaluate(ds, "--endpoint", srv.url, "--model", "fake", "-o", tmp_path / "ev", "--no-plot",
                        "--no-baselines", "--kind", "menu") == 0
        bodies = [r["body"] for r in srv.requests]
        res = json.loads((tmp_path / "ev" / "results.json").read_text())
        assert res["job"]["constraint_kept"] == "grammar" and "baselines" not in res["menu"]
        assert [("structured_outputs" in b, "regex" in b, "grammar" in b) for b in bodies[:3]] == \
            [(True, False, False), (False, True, False), (False, False, True)]
        assert all(b["grammar"] == 'root ::= "1" | "2" | "3" | "4"' for b in bodies[3:]) and len(bodies) == 3 + 3
        assert res["menu"]["valid"] == 3 and res["menu"]["agreement"] == 1.0 and res["single"] is None
        asked = len(srv.requests)
        assert evaluate(ds, "--endpoint", srv.url, "--model", "fake", "-o", tmp_path / "ev", "--no-plot",
                        "--no-baselines", "--kind", "menu") == 0
        assert len(srv.requests) == asked
    assert json.loads((tmp_path / "ev" / "results.json").read_text()) == res


REAL_MENU = ROOT / "tests" / "data" / "training" / "menu.jsonl"     # a --time --menu row: intervals, steps


def real_menu_rows(split: str) -> list[dict]:
    """Three menus of the real row (13 timed entries of layernorm, loop_unrolling 11 the fastest):
    as it is; its best entry alone (one entry); four entries whose intervals overlap (no decisive pair)."""
    row = json.loads(REAL_MENU.read_text().splitlines()[0])

    def sub(name, numbers):
        menu = [dict(row["menu"][n - 1], number=i + 1) for i, n in enumerate(numbers)]
        msgs = [dict(m, content=m["content"].replace("IR of layernorm", f"IR of {name}")) for m in row["messages"]]
        return row | {"id": name, "split": split, "messages": msgs, "menu": menu, "answer": 1}
    return [sub("full", range(1, 14)), sub("single", [11]), sub("tied", [4, 5, 6, 7])]


def test_the_comparison_on_real_menus_with_every_baseline(tmp_path):
    ds, train = tmp_path / "ds", tmp_path / "train-ds"
    for folder, split in ((ds, "test"), (train, "train")):
        (folder / split).mkdir(parents=True)
        (folder / split / "menu.jsonl").write_text("".join(json.dumps(r) + "\n" for r in real_menu_rows(split)))
    (ds / "stats.json").write_text(json.dumps({"job": {"strategies": ["paper", "extra"]}}))
    answers = {"full": ["11"], "single": ["1"], "tied": ["2"]}
    with FakeLLM(responder=scripted(answers)) as srv:
        assert evaluate(ds, "--endpoint", srv.url, "--model", "fake", "-o", tmp_path / "ev", "--no-plot",
                        "--train-data", train) == 0
    c = json.loads((tmp_path / "ev" / "results.json").read_text())["menu"]["comparison"]
    assert c["menus"] == 1 and c["left_out"] == {"one entry": 1, "fewer than two timed entries": 0,
                                                 "no decisive pair": 1}
    assert c["left_out_model"]["valid"] == 2
    ch = c["choosers"]
    me = ch["fake"]
    assert (me["top1"], me["geo_regret"], me["pairwise"], me["pairwise_pairs"]) == (1.0, 1.0, 1.0, 11)   # not 2: their intervals overlap
    assert list(ch)[:2] == ["fake", "random"] and "position 12" in ch and "position 13" not in ch
    # the prior of the training folder's timed entries (here the same menu: it ranks by the measured speedups)
    prior = ch["strategy prior"]
    assert (prior["top1"], prior["ranking_pairwise"]) == (1.0, 1.0) and "18 timed training entries of 13" in prior["note"]
    # the cost model with the dataset's strategies ranks every entry (expand_factorization first)
    cost = ch["cost model"]
    assert cost["valid"] == 1 and cost["ranked_menus"] == 1 and "strategies paper,extra" in cost["note"]
    assert cost["geo_regret"] == round(1.429412 / 0.957814, 6)
    md = (tmp_path / "ev" / "results.md").read_text()
    assert "| fake | 100.0% [20.7, 100.0] | 100.0% [20.7, 100.0] | 100.0% [100.0, 100.0] | - | 1.000 [1.000, 1.000] |" in md
    assert "Left out: 2 menu(s): 1 one entry, 1 no decisive pair." in md


def logprob_server(preference):
    """A server that ranks: a forced answer (vLLM's structured_outputs regex "N[^0-9]") comes back
    as N then a newline, one token a digit, the first with log-probability ``preference(menu, N)``,
    the newline's alternatives holding no digit (the number ends: end term 0)."""
    def respond(body):
        regex = (body.get("extra_body") or body).get("structured_outputs", {}).get("regex")
        name = NAME.search(body["messages"][-1]["content"]).group(1)
        answer = regex[:-len("[^0-9]")]
        toks = [{"token": c, "logprob": preference(name, int(answer)) if i == 0 else 0.0, "bytes": None,
                 "top_logprobs": [{"token": c, "logprob": -0.1, "bytes": None}]} for i, c in enumerate(answer)]
        toks.append({"token": "\n", "logprob": -0.01, "bytes": None,
                     "top_logprobs": [{"token": "\n", "logprob": -0.01, "bytes": None},
                                      {"token": " ", "logprob": -5.0, "bytes": None}]})
        payload = completion([answer + "\n"])
        payload["choices"][0]["logprobs"] = {"content": toks}
        return ("raw", json.dumps(payload).encode())
    return respond


def test_answer_rank_scores_the_model_as_a_ranker(tmp_path):
    ds = tmp_path / "ds"
    (ds / "test").mkdir(parents=True)
    rows = real_menu_rows("test")
    (ds / "test" / "menu.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    speed = {r["id"]: [e["speedup"] for e in r["menu"]] for r in rows}
    with FakeLLM(responder=logprob_server(lambda name, n: speed[name][n - 1])) as srv:   # prefers the fastest
        assert evaluate(ds, "--endpoint", srv.url, "--model", "fake", "-o", tmp_path / "ev", "--no-plot",
                        "--answer", "rank", "--no-baselines") == 0
        assert len(srv.requests) == 13 + 1 + 4 and all("structured_outputs" in r["body"] for r in srv.requests)
    res = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert res["job"]["answer"] == "rank" and res["job"]["rank_form"] == "structured-regex"
    full = next(p for p in res["prompts"] if p["id"] == "full")
    assert full["chosen"] == 11 and full["ranking"][:3] == [11, 2, 10] and len(full["ranking"]) == 13
    me = res["menu"]["comparison"]["choosers"]["fake"]
    assert (me["top1"], me["ranking_pairwise"], me["ranking_pairs"], me["ranked_menus"]) == (1.0, 1.0, 31, 1)
    with FakeLLM(responder=scripted({"full": ["1"]})) as srv:           # no log-probabilities: one line, exit 2
        r = subprocess.run([sys.executable, "-m", "dataset.evaluate", str(ds), "--endpoint", srv.url, "--model",
                            "fake", "-o", str(tmp_path / "ev2"), "--answer", "rank", "--no-baselines"], cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--answer rank: the server gives no usable log-probabilities" in r.stderr, r.stderr
