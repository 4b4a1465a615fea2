"""Pairwise and pointwise examples, and DPO pairs, from every timing of a timed menu.

Every entry of a timed menu (``dataset.text.timed_menus``) was timed paired against the same parent:
its speedup over the parent comes with an interval (the sign test's, at the job's confidence) and a
verdict. Three kinds of example come from them, each a pure function of the record and the job's seed:

* **pairwise** ("which of these two is faster?", answer ``1`` or ``2``): a pair of timed entries
  whose order is **decisive** (``faster_of``): one's interval lies above the other's by more than
  the noise floor, ``lo_a > hi_b * (1 + f)``. It is the verdict rule applied between two entries (an
  entry is ``faster`` than the parent when ``lo > 1 * (1 + f)``), so a ``faster`` entry and a
  ``slower`` one are always decisive, and a ``faster`` and a ``tie``, two ``faster`` ones or a
  ``tie`` and a ``slower`` one are when their intervals are that far apart. At most
  ``PAIRS_PER_MENU`` pairs of a menu, the first decisive ones in a seeded order; each pair shown in
  a seeded order (so the position carries no label).
* **pointwise** ("is this move faster than the current kernel / program?", answer ``yes`` or
  ``no``): every entry measured ``faster`` (yes) or ``slower`` (no); ties are left out (counted).
* **preference pairs** (TRL's ``prompt`` / ``chosen`` / ``rejected``): the same decisive pairs on
  the question the search itself asks (the record's first request), the chosen answer the faster
  entry's number, the rejected the other's; only pairs of entries that request shows.

The prompts are the question's own words: its system message and its header (the kernel, or the
state, as ``search.kernel_question`` / ``search.prompt`` describe it), then the one or two entries'
lines as the question shows them, then the task. Answers are bare (``1``, ``yes``): a timing says
which is faster, not why.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter

from .menu import pair_id

PAIRS_PER_MENU = 6        # pairwise examples (and preference pairs) of one timed menu at most
FILES = ("pairwise.jsonl", "pointwise.jsonl", "preferences_pairwise.jsonl")

_CHANGE = {"kernel": "with what {it} change{s} (a tensor in global memory is written without ^{{dtype,g}})",
           "menu": "each verified to be applicable, with what {it} change{s} in it (old -> new; + added, - removed; "
                   "a tensor in global memory is written without its ^{{dtype,g}} annotation)"}
PAIR_INTRO = {"kernel": "Two legal moves of the current kernel, " + _CHANGE["kernel"].format(it="they", s="") + ":",
              "menu": "Two legal single-step transformations of the current IR, "
                      + _CHANGE["menu"].format(it="they", s="") + ":"}
POINT_INTRO = {"kernel": "A legal move of the current kernel, " + _CHANGE["kernel"].format(it="it", s="s") + ":",
               "menu": "A legal single-step transformation of the current IR, "
                       + _CHANGE["menu"].format(it="it", s="s").replace("each verified", "verified") + ":"}
PAIR_TASK = {"kernel": "**Task**:\n\nWhich of these two moves makes the kernel run faster? Answer with its number only "
                       "(1 or 2).",
             "menu": "**Task**:\n\nWhich of these two transformations makes the current IR run faster? Answer with its "
                     "number only (1 or 2)."}
POINT_TASK = {"kernel": "**Task**:\n\nWill this move make the kernel run faster than the current kernel? Answer yes or "
                        "no only.",
              "menu": "**Task**:\n\nWill this transformation make the current IR run faster than it runs now? Answer "
                      "yes or no only."}
POINT_ANSWER = {"faster": "yes", "slower": "no"}


# ------------------------------------------------------------------ the decisive rule


def timed(record: dict) -> list[dict]:
    """The entries of a timed menu that were timed (verified, and the measurement did not fail)."""
    return [e for e in record["entries"] if e.get("timing") is not None]


def faster_of(a: dict, b: dict):
    """The entry decisively faster than the other (a's interval above b's by more than the noise
    floor, or b's above a's), or None when their order is not decisive."""
    f = max(a["timing"]["noise_floor"], b["timing"]["noise_floor"])
    if a["ci"][0] > b["ci"][1] * (1 + f):
        return a
    if b["ci"][0] > a["ci"][1] * (1 + f):
        return b
    return None


def question_key(record: dict) -> str:
    """What seeds a timed menu's choices: its question (program, slot, form), nothing measured."""
    return pair_id(json.dumps(record["program"], sort_keys=True), str(record.get("slot")), record["form"])


def _draw(seed: int, *parts: str) -> str:
    return hashlib.sha256(":".join([str(seed), *parts]).encode()).hexdigest()


def decisive_pairs(record: dict) -> list[tuple[dict, dict]]:
    """(faster, slower) of every pair of timed entries whose order is decisive, in entry order."""
    es = timed(record)
    out = []
    for i, a in enumerate(es):
        for b in es[i + 1:]:
            fast = faster_of(a, b)
            if fast is not None:
                out.append((fast, b if fast is a else a))
    return out


def chosen_pairs(record: dict, seed: int) -> list[tuple[dict, dict]]:
    """At most ``PAIRS_PER_MENU`` decisive pairs, the first in an order seeded by the job's seed,
    the question and the two entries' keys."""
    qk = question_key(record)
    pairs = sorted(decisive_pairs(record), key=lambda p: _draw(seed, "pair", qk, *sorted((p[0]["key"], p[1]["key"]))))
    return pairs[:PAIRS_PER_MENU]


def shown_order(record: dict, seed: int, fast: dict, slow: dict) -> tuple[dict, dict]:
    """The pair as the pairwise prompt shows it: a seeded coin, not the order of speeds."""
    keys = sorted((fast["key"], slow["key"]))
    if int(_draw(seed, "order", question_key(record), *keys), 16) % 2 == 0:
        return fast, slow
    return slow, fast


# ------------------------------------------------------------------ the examples


def _messages(record: dict, user: str, answer: str) -> list[dict]:
    return [{"role": "system", "content": record["messages"][0]["content"]}, {"role": "user", "content": user},
            {"role": "assistant", "content": answer}]


def _where(record: dict) -> dict:
    return {"form": record["form"], "program": record["program"]["name"], "slot": record.get("slot"),
            "question": record["id"]}


def pairwise_example(record: dict, seed: int, fast: dict, slow: dict) -> dict:
    first, second = shown_order(record, seed, fast, slow)
    form = record["form"]
    user = "\n\n".join([record["header"], PAIR_INTRO[form] + f"\n\n1. {first['text']}\n2. {second['text']}",
                        PAIR_TASK[form]])
    answer = "1" if first is fast else "2"
    pair = (first, second)
    return {"id": pair_id(question_key(record), "pairwise", first["key"], second["key"]), **_where(record),
            "messages": _messages(record, user, answer), "keys": [e["key"] for e in pair],
            "labels": [e["label"] for e in pair], "speedups": [e["speedup"] for e in pair],
            "cis": [list(e["ci"]) for e in pair], "verdicts": [e["verdict"] for e in pair], "answer": answer,
            "split": record["split"]}


def pointwise_example(record: dict, e: dict) -> dict:
    form = record["form"]
    user = "\n\n".join([record["header"], POINT_INTRO[form] + f"\n\n{e['text']}", POINT_TASK[form]])
    answer = POINT_ANSWER[e["verdict"]]
    return {"id": pair_id(question_key(record), "pointwise", e["key"]), **_where(record),
            "messages": _messages(record, user, answer), "key": e["key"], "label": e["label"],
            "speedup": e["speedup"], "ci": list(e["ci"]), "verdict": e["verdict"], "answer": answer,
            "split": record["split"]}


def preference_pair(record: dict, fast: dict, slow: dict) -> dict:
    return {"id": pair_id(question_key(record), "preference", fast["key"], slow["key"]), **_where(record),
            "prompt": [dict(m) for m in record["messages"]],
            "chosen": [{"role": "assistant", "content": str(fast["number"])}],
            "rejected": [{"role": "assistant", "content": str(slow["number"])}],
            "chosen_key": fast["key"], "rejected_key": slow["key"], "chosen_speedup": fast["speedup"],
            "rejected_speedup": slow["speedup"], "chosen_verdict": fast["verdict"], "rejected_verdict": slow["verdict"],
            "split": record["split"]}


def examples_of(record: dict, seed: int) -> tuple[dict[str, list[dict]], Counter]:
    """The examples of one timed menu, by file (``FILES``), and what was counted: entries timed,
    decisive pairs (before the cap), pairwise examples, pointwise yes / no, ties left out, pairs."""
    pairs = chosen_pairs(record, seed)
    got = {"pairwise.jsonl": [pairwise_example(record, seed, f, s) for f, s in pairs],
           "pointwise.jsonl": [pointwise_example(record, e) for e in timed(record) if e["verdict"] in POINT_ANSWER],
           "preferences_pairwise.jsonl": [preference_pair(record, f, s) for f, s in pairs
                                          if f["number"] is not None and s["number"] is not None]}
    n = Counter({"menus": 1, f"{record['form']}_menus": 1, "entries_timed": len(timed(record)),
                 "decisive_pairs": len(decisive_pairs(record)), "pairwise": len(got["pairwise.jsonl"]),
                 "pointwise_ties_left_out": sum(1 for e in timed(record) if e["verdict"] not in POINT_ANSWER),
                 "preferences_pairwise": len(got["preferences_pairwise.jsonl"])})
    for ex in got["pointwise.jsonl"]:
        n[f"pointwise_{ex['answer']}"] += 1
    return got, n


STAT_KEYS = ("menus", "menu_menus", "kernel_menus", "entries_timed", "decisive_pairs", "pairwise", "pointwise_yes",
             "pointwise_no", "pointwise_ties_left_out", "preferences_pairwise")


def stats_of(counts: Counter) -> dict:
    """stats.json's ``timed_menus`` section from the summed counts of ``examples_of``."""
    return {"pairs_per_menu": PAIRS_PER_MENU, **{k: counts.get(k, 0) for k in STAT_KEYS}}
