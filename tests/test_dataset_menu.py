"""Menu rows (the search's own question, answered with the measured-fastest faster entry), their
preference pairs, and the benefit sentences of the traces (issue 20, items 3 and 4)."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_search_llm import FakeLLM, menu_responder, tiny_program

ROOT = Path(__file__).resolve().parents[1]


def entry(number, verdict, speedup, reason="why"):
    return {"number": number, "key": f"k{number}", "strategy": "loop_split", "verdict": verdict, "speedup": speedup,
            "reason": reason}


# ------------------------------------------------------------------ the answer and the pairs, on fixed records


def test_the_answer_is_the_fastest_of_the_entries_measured_faster():
    from dataset.text.menu import menu_answer
    # a tie with a higher point estimate than every faster entry is still not the answer
    entries = [entry(1, "faster", 1.2), entry(2, "tie", 1.9), entry(3, "faster", 1.5), entry(4, "slower", 0.5)]
    assert menu_answer(entries) == 3
    # equal speedups: the lowest number
    assert menu_answer([entry(1, "faster", 1.5), entry(2, "faster", 1.5)]) == 1
    # an entry without a reason (no trace fits) is never the answer
    assert menu_answer([entry(1, "faster", 2.0, reason=None), entry(2, "faster", 1.1)]) == 2


def test_no_answer_when_no_entry_is_measured_faster():
    from dataset.text.menu import menu_answer, menu_pairs
    entries = [entry(1, "tie", 1.02), entry(2, "slower", 0.7), entry(3, None, None)]
    assert menu_answer(entries) is None
    assert menu_pairs(entries, None) == []


def test_menu_pairs_reject_only_slower_or_tied_entries_slowest_first():
    from dataset.text.menu import PAIRS_PER_STATE, menu_pairs
    entries = [entry(1, "faster", 1.3), entry(2, "faster", 1.6), entry(3, "tie", 1.0), entry(4, "slower", 0.4),
               entry(5, "slower", 0.8), entry(6, None, None), entry(7, "slower", 0.9)]
    pairs = menu_pairs(entries, 2)
    assert [(c["number"], r["number"]) for c, r in pairs] == [(2, 4), (2, 5), (2, 7)][:PAIRS_PER_STATE]
    assert all(r["verdict"] in ("slower", "tie") for _, r in pairs)       # never a faster one rejected


def _row(i, verdict, speedup):
    return {"id": f"r{i}", "program": {"name": "p", "inputs": [], "outputs": [], "leir": "x"},
            "step": {"key": f"k{i}", "strategy": "loop_split"}, "timing": {"verdict": verdict, "speedup": speedup},
            "split": "train", "cot": "c", "transformed": f"t{i}"}


def test_single_pairs_need_a_significant_difference_of_verdicts():
    from dataset.text.menu import single_pairs
    rows = [_row(1, "tie", 1.3), _row(2, "faster", 1.2), _row(3, "slower", 0.9), _row(4, "faster", 1.5),
            _row(5, "slower", 0.5)]
    got = [(a["id"], b["id"]) for a, b in single_pairs(rows)]
    assert got == [("r4", "r5"), ("r2", "r3")]                 # r1 (tie, 1.3x) is never chosen
    assert single_pairs([_row(1, "tie", 1.5), _row(2, "tie", 0.9)]) == []
    assert single_pairs([_row(1, "faster", 1.5), _row(2, None, 0.9)]) == []


# ------------------------------------------------------------------ the prompt is the search's request


@pytest.fixture(scope="module")
def engine():
    from engine import Engine
    return Engine(strategies="paper")


@pytest.mark.parametrize("size", [None, (6, 1000)], ids=["defaults", "small-model"])
def test_the_menu_prompt_is_byte_for_byte_the_search_request(tmp_path, engine, size):
    """The real CLI against a scripted server: its first request (the root state) is the menu
    row's prompt for the same program, seed, target and menu options (the defaults, and the
    small model's --menu-size 6 --prompt-tokens 1000)."""
    from engine import load_program

    from dataset.text.menu import question
    program = load_program(str(ROOT / "examples" / "softmax.leir"))
    flags = ["--menu-size", str(size[0]), "--prompt-tokens", str(size[1])] if size else []
    with FakeLLM(responder=menu_responder) as srv:
        r = subprocess.run([sys.executable, "-m", "search", str(ROOT / "examples" / "softmax.leir"),
                            "-o", str(tmp_path / "t.json"), "--policy", "llm", "--endpoint", srv.url,
                            "--model", "fake", "--algorithm", "greedy", "--per-node", "1", "--budget", "1",
                            "--strategies", "paper",         # the dataset's default set (the search's is paper,extra)
                            "--seed", "7", "--confirm", "0", "--trials", "1", "--repeat", "2",
                            "--min-repeat-ms", "0.1", "--quiet", *flags],
                           capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                           timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        sent = srv.requests[0]["body"]["messages"]
    options = {"seed": 7, "target": "llvm"}
    if size:     # as dataset.generate --menu-size --prompt-tokens records them
        options["menu"] = {"menu_size": size[0], "prompt_tokens": size[1]}
    q = question(engine, options, program)
    assert len(engine.enumerate(program)) > 40          # the menu is cut: the seeded order and the budget matter
    assert q.messages("number") == sent
    if size:
        from search.prompt import estimate_tokens
        assert 1 <= len(q.shown) <= size[0] and sum(estimate_tokens(m["content"]) for m in sent) <= size[1]
        assert q.messages("number") != question(engine, {"seed": 7, "target": "llvm"}, program).messages("number")
    # the question of another seed is another request (the shuffle is seeded)
    assert question(engine, dict(options, seed=8), program).messages("number") != sent


def test_menu_size_options_need_menu_and_are_recorded(tmp_path):
    from engine.leir.diagnostics import LeirError

    from dataset.generate.driver import main
    for extra, message in ((["--menu-size", "6"], "--menu-size sets the menu question: use it with --menu"),
                           (["--time", "--menu", "--prompt-tokens", "0"], "--prompt-tokens must be at least 1")):
        with pytest.raises(LeirError, match=re.escape(message)):
            main([str(tmp_path), "-o", str(tmp_path / "o"), *extra])


# ------------------------------------------------------------------ benefit sentences


def _step_of(engine, program, strategy):
    return next(s for s in engine.enumerate(program) if s.strategy == strategy)


def test_a_trace_states_the_benefit_for_this_instance_and_the_checker_rederives_it(engine):
    from dataset.text import cot
    from dataset.check.claims import check_trace
    p = tiny_program()
    s = _step_of(engine, p, "loop_parallelization")
    block = engine.strategy(s.strategy)
    assert block.benefit == ("parallelism",)
    text = cot.render(block, p, s.program, s)
    loop = s.params["loop"]
    assert text.endswith(f" This can improve parallelism: the loop `{loop}` becomes parallelized.")
    assert check_trace(text, block, p, s.program, s) == []
    tampered = text.replace(f"the loop `{loop}` becomes", "the loop `zz` becomes")
    assert any("parallelism" in x for x in check_trace(tampered, block, p, s.program, s))
    dropped = text[:text.index(" This can improve")]
    assert check_trace(dropped, block, p, s.program, s)


def test_the_measured_sentence_is_rederived_from_the_timing_record(engine):
    from dataset.text import cot
    from dataset.text.benefit import measured_sentence
    from dataset.check.claims import check_trace
    from lowering.measure import verdict_of
    p = tiny_program()
    s = _step_of(engine, p, "loop_parallelization")
    block = engine.strategy(s.strategy)
    from lowering.measure.stats import Protocol, record_of
    rec = record_of([2.0, 2.1, 1.9, 2.0, 2.05, 2.02], [1.0, 1.05, 0.95, 1.0, 1.02, 1.01], target="llvm",
                    machine={"cpu": "a cpu", "gpu": None, "cores": 2},
                    protocol=Protocol(rounds=6, noise_floor=0.03), runs=1)
    assert verdict_of(rec) == "faster"
    text = cot.render(block, p, s.program, s) + measured_sentence(rec)
    lo, hi = rec["ci"]
    assert (f"{rec['speedup']:.3f}x the speed of the given IR (95% interval {lo:.3f}x to {hi:.3f}x over 6 "
            "interleaved rounds") in text
    assert check_trace(text, block, p, s.program, s, rec) == []
    assert check_trace(text.replace(f"{rec['speedup']:.3f}x the", "3.000x the"), block, p, s.program, s, rec)
    assert check_trace(text, block, p, s.program, s, None)      # a claim without a record


# ------------------------------------------------------------------ one real --time --menu job


BIG = ("B^{64}_{tx=0}L^{512}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
       "B^{64}_{tx=0}L^{512}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];"
       "B^{64}_{tx=0}L^{512}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];")


@pytest.mark.long
def test_a_timed_menu_job_writes_menu_rows_in_split_folders_that_check(tmp_path):
    from engine import parse_program

    from dataset.check.checker import check
    from dataset.generate.driver import main
    prog = parse_program(BIG, name="softmax_rows", inputs=[{"name": "A", "dtype": "f32", "shape": [64, 512]}],
                         outputs=[{"name": "C", "dtype": "f32", "shape": [64, 512]}])
    src = tmp_path / "softmax_rows.leir"
    src.write_text(prog.to_leir_file())
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "--per-program", "3", "--time", "--menu", "--no-plots",
                 "--test-fraction", "0"]) == 0
    assert not (out / "menu.jsonl").exists() and not (out / "preferences.jsonl").exists()
    menus = [json.loads(x) for x in (out / "train" / "menu.jsonl").read_text().splitlines()] \
        if (out / "train" / "menu.jsonl").exists() else []
    stats = json.loads((out / "stats.json").read_text())
    assert stats["menu"]["rows"] == len(menus)
    for m in menus:
        chosen = m["menu"][m["answer"] - 1]
        assert chosen["verdict"] == "faster" and m["messages"][-1]["content"].endswith(f"</think>{m['answer']}")
        assert all(e["speedup"] <= chosen["speedup"] for e in m["menu"] if e["verdict"] == "faster")
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]
    assert rows and all(r["benefit"] and (" This can improve" in r["cot"]) == (r["benefit"] != ["none"])
                        for r in rows)
    report = check(out, sample=0, progress=False)
    assert not report.problems, report.problems[:5]
    # a tampered benefit sentence of a row is caught
    first = next(i for i, r in enumerate(rows) if " This can improve" in r["cot"])
    saved = (out / "rows.jsonl").read_text()
    bad_rows = [dict(r) for r in rows]
    head, _, tail = bad_rows[first]["cot"].partition(" This can improve ")
    bad_rows[first]["cot"] = head + " This can improve " + re.sub(r"`[^`]+`", "`Zz`", tail, count=1)
    assert bad_rows[first]["cot"] != rows[first]["cot"]
    (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bad_rows))
    assert any("chain-of-thought" in what for _, what in check(out, sample=0, progress=False).problems)
    (out / "rows.jsonl").write_text(saved)
    if menus:
        # a prompt that is not the search's, an answer that is not the fastest: caught
        bad = json.loads(json.dumps(menus[0]))
        bad["messages"][1]["content"] += " "
        (out / "train" / "menu.jsonl").write_text(json.dumps(bad) + "\n")
        assert any("not the search's request" in what for _, what in check(out, sample=0, progress=False).problems)
        bad = json.loads(json.dumps(menus[0]))
        bad["answer"] = next((e["number"] for e in bad["menu"] if e["number"] != bad["answer"]), bad["answer"])
        (out / "train" / "menu.jsonl").write_text(json.dumps(bad) + "\n")
        assert any("the answer is not" in what for _, what in check(out, sample=0, progress=False).problems)
