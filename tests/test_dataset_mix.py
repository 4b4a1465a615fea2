"""The chat rows' facts and the mix on request (dataset.assembly.mix), on hand-made records: no engine, no TVM."""
from __future__ import annotations

import json
import random

from dataset.assembly import mix
from dataset.text import row_format
from dataset.assembly.assemble import chat_multi, chat_single

PROGRAM = {"name": "p", "leir": "L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a};];",
           "inputs": [{"name": "A", "dtype": "f32", "shape": [4]}],
           "outputs": [{"name": "C", "dtype": "f32", "shape": [4]}]}


def _row(i, strategy="loop_split", exactness="bitwise", bucket="medium", timing=None, program=PROGRAM):
    return {"id": f"r{i}", "program": program, "transformed": f"T{i};", "cot": f"trace {i}.", "split": "train",
            "step": {"strategy": strategy, "exactness": exactness}, "numerical_risk": exactness != "bitwise",
            "difficulty": {"bucket": bucket},
            "verification": {"tolerance": {"mode": "exact" if exactness == "bitwise" else "strict"}},
            "timing": timing}


def test_chat_rows_carry_strategy_bucket_exactness_risk_and_timing_of_either_shape():
    old = {"transformed_ms": 1.0, "speedup": 1.25}                       # a timing record without a verdict
    new = {"candidate_ms": 1.0, "speedup": 0.8, "verdict": "slower"}
    chat, trl = chat_single(_row(0, timing=old))
    facts = {"strategy": "loop_split", "bucket": "medium", "exactness": "bitwise", "numerical_risk": False,
             "speedup": 1.25, "verdict": None}
    assert {k: chat[k] for k in facts} == facts == {k: trl[k] for k in facts}
    assert "bitwise identical" in chat["messages"][0]["content"]
    chat = chat_single(_row(1, "loop_reorder", "reassociates", "difficult", new))[0]
    assert (chat["exactness"], chat["numerical_risk"], chat["speedup"], chat["verdict"]) == \
        ("reassociates", True, 0.8, "slower")
    assert "bitwise identical" not in chat["messages"][0]["content"]
    assert chat_single(_row(2))[0]["speedup"] is None                      # not timed
    multi = chat_multi([_row(3, timing=old), _row(4, "loop_reorder", "reassociates", "difficult", new)])[0]
    assert multi["strategy"] == ["loop_split", "loop_reorder"] and multi["bucket"] == ["medium", "difficult"]
    assert multi["numerical_risk"] is True and multi["verdict"] == [None, "slower"]
    assert "bitwise identical" not in multi["messages"][0]["content"]       # one answer is not exact
    assert "bitwise identical" in chat_multi([_row(5), _row(6)])[0]["messages"][0]["content"]


def test_one_per_strategy_keeps_one_seeded_variant_per_program_and_strategy():
    other = dict(PROGRAM, leir="L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}*2;];")
    rows = [_row(i, "loop_split") for i in range(5)] + [_row(9, "loop_reorder")] + \
        [_row(i, "loop_split", program=other) for i in range(10, 13)]
    kept = mix.one_per_strategy(rows, 0)
    assert sorted((r["program"]["leir"], r["step"]["strategy"]) for r in kept) == sorted(
        [(PROGRAM["leir"], "loop_split"), (PROGRAM["leir"], "loop_reorder"), (other["leir"], "loop_split")])
    assert {r["id"] for r in kept} == {r["id"] for r in mix.one_per_strategy(list(reversed(rows)), 0)}
    assert [r["id"] for r in kept] == [r["id"] for r in rows if r in kept]           # order kept
    picks = {tuple(r["id"] for r in mix.one_per_strategy(rows, seed)) for seed in range(8)}
    assert len(picks) > 1                                                            # the seed decides


def _pool(rng, n_single, n_multi, single_weights, multi_weights):
    buckets = ("easy", "medium", "difficult")
    items = [mix.Item(f"s{i}", "single", (rng.choices(buckets, single_weights)[0],)) for i in range(n_single)]
    items += [mix.Item(f"m{i}", "multi", tuple(rng.choices(buckets[1:], multi_weights, k=rng.randint(2, 6))))
              for i in range(n_multi)]
    return items


def test_paper_mix_is_reached_within_3_points_when_the_pool_allows_it():
    """A pool like the sampler's (about half medium, mostly single rows) is down-sampled to the
    paper's 0.51/12.17/87.32 and 30:70; deterministic for a seed, another seed keeps other rows."""
    items = _pool(random.Random(1), 900, 400, (4, 50, 46), (20, 80))
    before = mix.shares(items)
    assert abs(before["buckets"]["difficult"] - 87.32) > 15 and before["kinds"]["single"] > 60
    ids, rep = mix.select(items, "paper", seed=0)
    assert rep["within"] and rep["short"] == []
    for group, target in mix.MIXES["paper"].items():
        for k, want in target.items():
            assert abs(rep["achieved"][group][k] - want) <= 3.0, (group, k, rep["achieved"])
    assert rep["achieved"] == {k: v for k, v in mix.shares([it for it in items if it.id in ids]).items()
                               if k in ("buckets", "kinds")}
    assert rep["after"]["rows"] == len(ids) >= 300                # down-sampled, not emptied
    assert mix.select(items, "paper", seed=0) == (ids, rep)
    assert mix.select(items, "paper", seed=1)[0] != ids
    json.dumps(rep)                                               # goes into stats.json as it is


def test_a_pool_without_difficult_answers_says_what_is_short():
    items = _pool(random.Random(2), 100, 50, (10, 90, 0), (1, 0))    # no difficult anywhere
    ids, rep = mix.select(items, "paper", seed=0)
    assert not rep["within"] and ids
    assert any(s.startswith("difficult uses: 0.0% against 87.32%") for s in rep["short"])
    assert "short: difficult uses" in mix.summary({"train": rep})


def test_an_empty_split_is_reported_not_mixed():
    ids, rep = mix.select([], "paper", seed=0)
    assert ids == set() and not rep["within"] and rep["short"] == ["no chat rows to mix"]


def test_the_prompt_and_label_name_the_same_key():
    label = json.loads(row_format.single_label("X;", "loop_split"))
    assert set(label) == {"transformed_IR", "applied_strategies"}
    assert "'transformed_IR', 'applied_strategies'" in row_format.single_prompt(PROGRAM)
