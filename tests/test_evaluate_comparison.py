"""The menu comparison of ``dataset.evaluate`` on hand-made menus with known answers: which menus
can tell choosers apart (decisive pairs by intervals, or by verdicts without them), top-1,
pairwise accuracy of a choice and of a ranking, geometric-mean regret, random's exact
expectations, the signed-rank test, the fixed-position and strategy-prior baselines."""
import json
import math

import pytest

from dataset.evaluate.baselines import position_choosers, ranking_chooser
from dataset.evaluate.comparison import RANDOM, compare
from dataset.evaluate.menu_facts import ONE_ENTRY, TIED, UNTIMED, Pick, menu_facts
from dataset.evaluate.metrics import wilson
from dataset.evaluate.signed_rank import ranks, signed_rank_test
from dataset.evaluate.strategy_prior import fit, load_prior

FLOOR = 0.03


def entry(number, speedup, ci=None, verdict=None, strategy="s", verified=True):
    timing = None if ci is None else {"speedup": speedup, "ci": list(ci), "noise_floor": FLOOR, "verdict": verdict}
    return {"number": number, "key": f"k{number}", "strategy": strategy, "verified": verified,
            "speedup": speedup if verified else None, "verdict": verdict if verified else None, "timing": timing}


# A: 2 is decisively faster than 1 and 3, 1 than 3; 4 failed verification
A = {"id": "A", "menu": [entry(1, 1.0, (0.95, 1.05), "tie", "s_a"), entry(2, 2.0, (1.8, 2.2), "faster", "s_b"),
                         entry(3, 0.5, (0.45, 0.55), "slower", "s_c"), entry(4, None, None, None, "s_d", False)]}
B = {"id": "B", "menu": [entry(1, 1.5, (1.2, 1.8), "faster"), entry(2, 1.4, (1.1, 1.7), "faster")]}   # overlap
C = {"id": "C", "menu": [entry(1, 3.0, (2.5, 3.5), "faster")]}                                       # one entry
# D: 2 and 3 beat 1 decisively, not each other; 2 is the measured best
D = {"id": "D", "menu": [entry(1, 0.9, (0.85, 0.95), "slower", "s_c"), entry(2, 1.3, (1.25, 1.35), "faster", "s_b"),
                         entry(3, 1.28, (1.2, 1.36), "faster", "s_a")]}
E = {"id": "E", "menu": [entry(1, 1.2, (1.1, 1.3), "faster"), entry(2, None, None, None, "s", False)]}
MENUS = [A, B, C, D, E]


def test_which_menus_count_and_their_decisive_pairs():
    facts = [menu_facts(m) for m in MENUS]
    assert [f.left_out for f in facts] == [None, TIED, ONE_ENTRY, None, UNTIMED]
    assert facts[0].decisive == ((2, 1), (1, 3), (2, 3)) and facts[3].decisive == ((2, 1), (3, 1))
    a = facts[0]
    assert (a.best, a.worst_regret) == (2.0, 4.0)
    assert [a.regret(n) for n in (1, 2, 3, 4, None, 9)] == [2.0, 1.0, 4.0, 4.0, 4.0, 4.0]   # 4, None, 9: charged 4
    assert [a.hit(n) for n in (1, 2, 3, 4)] == [False, True, False, False]


def test_without_intervals_the_verdicts_decide():
    m = {"id": "v", "menu": [{"number": 1, "speedup": 1.0, "verdict": "tie"},
                             {"number": 2, "speedup": 2.0, "verdict": "faster"},
                             {"number": 3, "speedup": 4.0, "verdict": "faster"},
                             {"number": 4, "speedup": 0.9, "verdict": "faster"}]}      # verdict against its speed
    assert menu_facts(m).decisive == ((2, 1), (3, 1))


def test_chooser_metrics_on_known_menus():
    facts = [menu_facts(m) for m in MENUS]
    model = [Pick(2), Pick(1), Pick(1), Pick(3), Pick(None)]          # on A the best, on D the second best
    ranker = ranking_chooser([(2, 1, 3, 4), (1, 2), (1,), (2, 3, 1), (1, 2)])
    worst = ranking_chooser([(4, 3, 1, 2), (1, 2), (1,), (1, 3, 2), (1, 2)])
    res = compare(facts, {"model": model, "random": RANDOM, "ranker": ranker, "worst": worst,
                          "cost model": {"unavailable": "no prior"}}, seed=0)
    assert res["menus"] == 2 and res["left_out"] == {ONE_ENTRY: 1, UNTIMED: 1, TIED: 1}
    m = res["choosers"]["model"]
    assert (m["valid"], m["valid_rate"], m["top1"], m["top1_interval"]) == (2, 1.0, 0.5, wilson(1, 2))
    assert (m["pairwise"], m["pairwise_pairs"]) == (1.0, 3)           # A: 2 beats 1 and 3; D: 3 beats 1
    assert m["pairwise_interval"] == [1.0, 1.0]
    assert m["geo_regret"] == round(math.sqrt(1.3 / 1.28), 6)
    lo, hi = m["geo_regret_interval"]
    assert lo == 1.0 and hi == round(1.3 / 1.28, 6)                  # resampled menus: both A, both D, or one each
    # against random: top-1 differences 1 - 1/4 and 0 - 1/3: ranks 2 and 1, W+ = 2 of n = 2: p = 1
    assert m["vs_random"]["top1"] == {"n": 2, "positive": 1, "w_plus": 2.0, "p": 1.0, "method": "exact"}
    assert "ranking_pairwise" not in m
    r = res["choosers"]["random"]
    assert r["top1"] == round((1 / 4 + 1 / 3) / 2, 6) and r["pairwise"] == 0.5 and r["vs_random"] is None
    a_log = (math.log(2) + 0 + math.log(4) + math.log(4)) / 4           # the unverified entry is charged 4
    d_log = (math.log(1.3 / 0.9) + 0 + math.log(1.3 / 1.28)) / 3
    assert r["geo_regret"] == round(math.exp((a_log + d_log) / 2), 6)
    k = res["choosers"]["ranker"]
    assert (k["ranking_pairwise"], k["ranking_pairs"], k["ranked_menus"]) == (1.0, 5, 2)
    assert k["top1"] == 1.0 and k["geo_regret"] == 1.0
    w = res["choosers"]["worst"]
    assert (w["ranking_pairwise"], w["top1"], w["pairwise"], w["pairwise_pairs"]) == (0.0, 0.0, 0.0, 2)   # D: 1 loses
    assert w["geo_regret"] == round(math.sqrt(4.0 * 1.3 / 0.9), 6)    # A: 4 (failed verification), D: 1
    assert res["choosers"]["cost model"] == {"unavailable": "no prior"}
    again = compare(facts, {"model": model, "random": RANDOM}, seed=0)
    assert again["choosers"]["model"] == m                              # pure: the same figures every time


def test_fixed_positions_on_known_menus():
    facts = [menu_facts(m) for m in MENUS]
    pos = position_choosers(facts)
    assert list(pos) == ["position 1", "position 2", "position 3", "last"]    # the longest counted menu has 4
    assert [p.choice for p in pos["position 3"]] == [3, 2, 1, 3, 2]           # the last of a shorter menu
    res = compare(facts, {"random": RANDOM, **pos})["choosers"]
    p1 = res["position 1"]
    assert (p1["top1"], p1["pairwise"], p1["pairwise_pairs"]) == (0.0, 0.25, 4)   # A: beats 3, loses to 2; D: loses 2
    assert p1["geo_regret"] == round(math.sqrt(2.0 * 1.3 / 0.9), 6)
    assert (res["position 2"]["top1"], res["position 2"]["pairwise"]) == (1.0, 1.0)
    last = res["last"]                                    # A: the entry that failed verification; D: entry 3
    assert (last["top1"], last["pairwise"], last["pairwise_pairs"]) == (0.0, 1.0, 1)
    assert last["geo_regret"] == round(math.sqrt(4.0 * 1.3 / 1.28), 6)


def test_the_strategy_prior_ranks_by_mean_log_speedup(tmp_path):
    prior = fit([("s_b", 2.0), ("s_b", 1.0), ("s_a", 0.5), ("s_c", 4.0)])
    assert prior.means == {"s_a": -math.log(2), "s_b": math.log(2) / 2, "s_c": math.log(4)}
    assert prior.overall == pytest.approx(math.log(2) / 2) and prior.counts == {"s_a": 1, "s_b": 2, "s_c": 1}
    facts = [menu_facts(m) for m in MENUS]
    # A: s_c, then s_b and the unseen s_d (the overall mean, equal to s_b's: the lower number first), then s_a
    assert prior.ranking(facts[0].strategies) == (3, 2, 4, 1) and prior.ranking(facts[3].strategies) == (1, 2, 3)
    res = compare(facts, {"strategy prior": ranking_chooser([prior.ranking(f.strategies) for f in facts])})
    sp = res["choosers"]["strategy prior"]
    assert (sp["top1"], sp["ranking_pairwise"], sp["ranking_pairs"]) == (0.0, 0.2, 5)   # A: 2 before 1 only
    # from a dataset folder: its training split only, from timed_menus.jsonl when it has one
    (tmp_path / "rows").mkdir()
    rows = tmp_path / "rows"
    for split in ("train", "test"):
        (rows / split).mkdir()
        menu = [entry(1, 2.0 if split == "train" else 100.0, strategy="s_b"), entry(2, 0.5, strategy="s_a"),
                entry(3, None, strategy="s_c", verified=False)]
        rec = {"id": split, "split": split, "messages": [{"role": "user", "content": "?"}], "menu": menu, "answer": 1}
        (rows / split / "menu.jsonl").write_text(json.dumps(rec) + "\n")
    got, note = load_prior([str(rows)])
    assert got.means == {"s_a": math.log(0.5), "s_b": math.log(2.0)} and "2 timed training entries" in note
    timed = tmp_path / "timed"
    timed.mkdir()
    recs = [{"form": "menu", "split": "train", "entries": [{"label": "s_c", "verified": True, "speedup": 3.0},
                                                           {"label": "s_a", "verified": False, "speedup": None}]},
            {"form": "kernel", "split": "train", "entries": [{"label": "tile", "verified": True, "speedup": 9.0}]},
            {"form": "menu", "split": "test", "entries": [{"label": "s_c", "verified": True, "speedup": 0.1}]}]
    (timed / "timed_menus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    got, _ = load_prior([str(timed)])
    assert got.means == {"s_c": math.log(3.0)}
    (tmp_path / "empty").mkdir()
    none, why = load_prior([str(tmp_path / "empty")])
    assert none is None and why == "no timed training entries in empty"


def test_signed_rank_known_values():
    assert ranks([3.0, 1.0, 3.0, 2.0]) == [3.5, 1.0, 3.5, 2.0]
    assert signed_rank_test([1, 2, 3, 4, 5])["p"] == 0.0625                   # 2 / 2^5
    assert signed_rank_test([-1, -2, -3, -4, -5])["p"] == 0.0625
    t = signed_rank_test([0.0, 1.0, -2.0, 3.0])       # zero dropped; W+ = 1 + 3 = 4 of n = 3: P(>=4) = 3/8
    assert (t["n"], t["w_plus"], t["p"]) == (3, 4.0, 0.75)
    assert signed_rank_test([0.0, 0.0])["p"] is None
    # ties share ranks: |d| = 1, 1, 2: ranks 1.5, 1.5, 3; all positive: only the full set sums to 6 -> 2 / 8
    assert signed_rank_test([1, 1, 2])["p"] == 0.25
    big = signed_rank_test([(i % 7) - 2.5 for i in range(400)])
    assert big["method"] == "normal" and 0 < big["p"] <= 1
