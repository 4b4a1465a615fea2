"""The paper's prompt and label formats (dataset.md 6), the difficulty score and the filters
(dataset.md 2-4), on hand-made records: no engine, no TVM."""
from __future__ import annotations

import json
from collections import Counter

from dataset.text import row_format
from dataset.assembly.assemble import chat_single, held_out_types
from dataset.text.menu import single_row_pairs
from dataset.assembly.difficulty import bucket_of, difficulty, mix, score
from dataset.assembly.filtering import (
    EXPANSION,
    SIMPLIFICATION,
    MultiFilter,
    keep_single,
    multi_subsets,
    unit_hash,
)

PROGRAM = {"name": "Gemm_Swish", "leir": "L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a};];",
           "inputs": [{"name": "A", "dtype": "f32", "shape": [728, 2022]},
                      {"name": "J", "dtype": "f32", "shape": [1243, 2022]},
                      {"name": "K", "dtype": "f32", "shape": [1243]}],
           "outputs": [{"name": "I", "dtype": "f32", "shape": [728, 1243]}]}


def test_known_info_is_the_papers_list():
    assert row_format.known_info(PROGRAM) == (
        "'A' with the dtype torch.float32 and shape [728, 2022], 'J' with the dtype torch.float32 and shape "
        "[1243, 2022], 'K' with the dtype torch.float32 and shape [1243], and 'I' with the dtype torch.float32 "
        "and shape [728, 1243]")
    one = {"inputs": [], "outputs": [{"name": "G", "dtype": "f16", "shape": []}]}
    assert row_format.known_info(one) == "'G' with the dtype torch.float16 and shape []"


def test_single_prompt_is_the_papers_text_word_for_word():
    """On a row verified exactly; its keys are the label's (the paper's labels said 'applied_strategy')."""
    text = row_format.single_prompt(PROGRAM)
    assert text == (
        "Give the following IR of Gemm_Swish: 'L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a};];', where the known "
        "variables are " + row_format.known_info(PROGRAM) + ". Do not change the names, shapes or dtypes of these "
        "known variables in the IR. \nPlease give me a **numerically equivalent transformed** IR that produces "
        "exactly the same outputs for any floating-point inputs (bitwise identical), and also provide applied "
        "strategy in this transformed IR. \n Return the answer **only** as a valid JSON object with the following "
        "keys:'transformed_IR', 'applied_strategies'.")


def test_multi_prompt_asks_for_at_least_k():
    text = row_format.multi_prompt(PROGRAM, 3)
    assert text.startswith(row_format.prefix(PROGRAM))
    assert text.endswith(
        "Please give me at least 3 different **numerically equivalent transformed** IRs that produces exactly the "
        "same outputs for any floating-point inputs (bitwise identical), and also provide applied strategy for "
        "each transformed IR. \n Return the answer list **only** as a valid JSON object, and each entry with the "
        "following keys: 'idx', 'transformed_IR', 'applied_strategies'.")


def test_only_rows_verified_exactly_are_promised_bitwise_identical_outputs():
    exact = {"step": {"exactness": "bitwise"}, "verification": {"tolerance": {"mode": "exact"}}}
    assert row_format.verified_exactly(exact)
    for step, mode in (("reassociates", "strict"), ("bitwise", "strict"), ("reassociates", "exact")):
        assert not row_format.verified_exactly({"step": {"exactness": step}, "verification": {"tolerance": {"mode": mode}}})
    for text in (row_format.single_prompt(PROGRAM, exact=False), row_format.multi_prompt(PROGRAM, 2, exact=False)):
        assert "bitwise identical" not in text and "exactly the same" not in text
        assert "numerically equivalent within the stated tolerance" in text and "rtol = 16*eps*sqrt(n)" in text
        assert text.endswith("'transformed_IR', 'applied_strategies'.")
    assert row_format.single_prompt(PROGRAM, exact=False).startswith(row_format.prefix(PROGRAM))


def test_labels_are_valid_json_with_the_prompts_keys_and_answers_split_back():
    single = row_format.single_label("X;", "loop_split")
    assert json.loads(single) == {"transformed_IR": "X;", "applied_strategies": ["loop_split"]}
    assert all(f"'{k}'" in row_format.single_prompt(PROGRAM) for k in json.loads(single))
    multi = row_format.multi_label([("X;", "loop_split"), ("Y'\"", "loop_tiling")])
    assert json.loads(multi) == [{"idx": 0, "transformed_IR": "X;", "applied_strategies": ["loop_split"]},
                                 {"idx": 1, "transformed_IR": "Y'\"", "applied_strategies": ["loop_tiling"]}]
    assert all(f"'{k}'" in row_format.multi_prompt(PROGRAM, 2) for k in json.loads(multi)[0])
    answer = row_format.multi_answer(["first.", "second."], multi)
    assert answer == ("<think>These 2 transformed IRs can be individually analyzed as follows: 0. first.\n"
                      f"1. second.</think><answer>{multi}</answer>")
    assert row_format.split_answer(answer) == (row_format.multi_think(["first.", "second."]), multi)
    assert row_format.split_answer("<think>t<\\think><answer>a<\\answer>") == ("t", "a")
    assert row_format.split_answer("no tags") is None


def test_difficulty_score_and_buckets_follow_the_formula():
    assert score(1, 3, 2) == 3.1 and bucket_of(3.1) == "difficult"
    assert bucket_of(0.1) == "easy" and bucket_of(1.0) == "medium" and bucket_of(2.49) == "medium"
    assert bucket_of(2.5) == "difficult"
    d = difficulty({"strategy": "loop_reorder", "K": "1", "P": "1", "S": "0", "difficulty": "medium"})
    assert d == {"K": 1, "P": 1, "S": 0, "score": 0.1, "bucket": "medium", "computed_bucket": "easy"}
    assert mix({"easy": 1, "medium": 1, "difficult": 2}) == {"easy": 25.0, "medium": 25.0, "difficult": 50.0}


def test_single_filter_keeps_the_papers_rates_deterministically():
    kept = Counter()
    n = 20000
    for i in range(n):
        for s in ("collect", "expand_collect"):
            if keep_single("easy", s, f"orig{i}", f"new{i}", 7):
                kept[s] += 1
    assert abs(kept["collect"] / n - 0.20) < 0.015
    assert abs(kept["expand_collect"] / n - 0.04) < 0.006
    assert all(keep_single(b, "loop_split", "o", "t", 7) for b in ("medium", "difficult"))
    assert keep_single("easy", "collect", "o", "t", 7) == keep_single("easy", "collect", "o", "t", 7)
    assert unit_hash("a", 1) != unit_hash("a", 2)
    assert set(SIMPLIFICATION).isdisjoint(EXPANSION) and len(SIMPLIFICATION) + len(EXPANSION) == 13


def _item(bucket, strategy, t):
    return {"bucket": bucket, "strategy": strategy, "transformed": t}


def test_multi_filter_drops_easy_caps_medium_and_applies_the_row_rules():
    f = MultiFilter(cap=3)
    rows = [
        [_item("easy", "collect", "a"), _item("difficult", "loop_split", "b"), _item("medium", "loop_reorder", "c")],
        [_item("easy", "collect", "a"), _item("difficult", "loop_split", "b")],          # one item left: dropped
        [_item("medium", "loop_reorder", "c"), _item("difficult", "loop_split", "b")],    # same answers: dropped
        [_item("medium", "loop_reorder", "d"), _item("medium", "loop_reorder", "e"), _item("difficult", "x", "f")],
        [_item("medium", "loop_reorder", "g"), _item("difficult", "x", "h"), _item("difficult", "y", "i")],
    ]
    kept = f.filter_program(rows)
    assert [[it["transformed"] for it in r] for r in kept] == [["b", "c"], ["d", "e", "f"], ["h", "i"]]
    assert f.medium == {"loop_reorder": 3}
    assert f.dropped == {"fewer than 2 items": 1, "duplicate of another row": 1}
    assert f.rows_in == 5 and f.rows_kept == 3
    assert f.items_kept == {"difficult": 4, "medium": 3}


def test_multi_subsets_are_seeded_distinct_and_sized():
    a = multi_subsets(10, 0, "key", max_rows=6, max_items=4)
    assert a == multi_subsets(10, 0, "key", max_rows=6, max_items=4)
    assert a != multi_subsets(10, 1, "key", max_rows=6, max_items=4)
    assert 1 <= len(a) <= 6 and len({tuple(s) for s in a}) == len(a)
    assert all(2 <= len(s) <= 4 and s == sorted(set(s)) for s in a)
    assert multi_subsets(1, 0, "key", 6, 6) == [] and multi_subsets(2, 0, "k", 6, 6)[0] == [0, 1]


def test_test_split_holds_out_whole_types():
    types = [f"t{i}" for i in range(30)] * 2
    held = held_out_types(types, 0, 0.1)
    assert len(held) == 3 and held == held_out_types(types, 0, 0.1) and held != held_out_types(types, 1, 0.1)
    assert held_out_types(["only"], 0, 0.5) == set() and len(held_out_types(["a", "b"], 0, 0.1)) == 1


def _timed(i, speedup, verdict):
    return {"id": f"r{i}", "program": PROGRAM, "transformed": f"T{i};", "cot": f"trace {i}.", "split": "train",
            "step": {"strategy": "loop_split", "exactness": "bitwise", "key": f"k{i}"}, "numerical_risk": False,
            "difficulty": {"bucket": "medium"}, "verification": {"tolerance": {"mode": "exact"}},
            "timing": {"speedup": speedup, "verdict": verdict}}


def test_preference_pairs_pair_only_significantly_different_verdicts():
    rows = [_timed(0, 1.9, "faster"), _timed(1, 0.5, "slower"), _timed(2, 1.3, "faster"), _timed(3, 1.02, "tie"),
            _timed(4, 1.6, "faster"), _timed(5, 1.1, "tie")]
    pairs = single_row_pairs(rows, chat_single)
    # fastest with slowest, second with second: each row once; the third faster row has no partner left
    assert [(p["chosen_key"], p["rejected_key"]) for p in pairs] == [("k0", "k1"), ("k4", "k3"), ("k2", "k5")]
    p = pairs[0]
    assert (p["form"], p["chosen_verdict"], p["rejected_verdict"]) == ("single", "faster", "slower")
    assert p["prompt"][0]["content"] == row_format.single_prompt(PROGRAM)
    assert json.loads(row_format.split_answer(p["chosen"][0]["content"])[1])["transformed_IR"] == "T0;"
    assert json.loads(row_format.split_answer(p["rejected"][0]["content"])[1])["transformed_IR"] == "T1;"
    assert (p["chosen_speedup"], p["rejected_speedup"]) == (1.9, 0.5)
    # ties and slowdowns among themselves, or a faster row without a partner: no pair; a higher point
    # estimate is no significant difference (ties are never chosen)
    assert single_row_pairs([_timed(0, 1.04, "tie"), _timed(1, 0.6, "slower")], chat_single) == []
    assert single_row_pairs([_timed(0, 1.5, "faster"), _timed(1, 1.4, "faster")], chat_single) == []
    assert single_row_pairs([_timed(0, 1.5, "faster"), {**_timed(1, 0, ""), "timing": None}], chat_single) == []
    assert single_row_pairs([_timed(0, 1.5, "tie"), _timed(1, 0.9, "tie")], chat_single) == []


def test_per_program_sample_is_seeded_and_spread_over_strategies():
    import random
    from types import SimpleNamespace

    from dataset.generate.task import stratified_sample
    steps = [SimpleNamespace(strategy=s, i=i) for i, s in enumerate(["a"] * 20 + ["b"] * 3 + ["c"] * 7)]
    pick = stratified_sample(steps, 9, random.Random("0:key"))
    assert Counter(s.strategy for s in pick) == {"a": 3, "b": 3, "c": 3}
    assert [s.i for s in pick] == sorted(s.i for s in pick)                  # enumeration order kept
    assert pick == stratified_sample(steps, 9, random.Random("0:key"))
    assert pick != stratified_sample(steps, 9, random.Random("1:key"))
    assert len(stratified_sample(steps, 29, random.Random(0))) == 29
    assert stratified_sample(steps, None, random.Random(0)) == steps


def test_journal_commits_whole_files_and_refuses_another_jobs_options(tmp_path):
    import pytest

    from dataset.journal import Journal
    from engine import LeirError
    j = Journal(tmp_path)
    j.open({"seed": 0})
    j.commit("t1", {"rows": [1]})
    assert j.done("t1") and not j.done("t2") and j.load("t1") == {"rows": [1]}
    (j.tasks / ".t2.json.tmp123").write_text('{"rows": [')      # what a kill mid-write leaves
    j.clean_partial()
    assert sorted(p.name for p in j.tasks.iterdir()) == ["t1.json"]
    with pytest.raises(LeirError, match="differ in: seed"):
        Journal(tmp_path).open({"seed": 1})
    Journal(tmp_path).open({"seed": 1}, restart=True)
    assert not Journal(tmp_path).done("t1")
