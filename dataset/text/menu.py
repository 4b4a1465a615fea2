"""Menu rows: the search's own question for a state, answered with the measured-fastest step.

For a state (a program reached from a source by verified steps), ``menu_state`` asks the question
``python -m search --policy llm`` asks there (``search.question.menu_question`` over
``search.space.Space.menu``: the same entries, numbers and words), verifies every entry shown,
times each one that passes against the state program (``lowering.measure.Measurer``: interleaved
rounds, an interval and a verdict per entry; an entry the state's rows timed is not timed again) and renders each entry's reason: the rule block's
description, what the step changes in this program (``dataset.text.cot``), what it can improve here
(``dataset.text.benefit``) and its measured effect.

The answer is the shown entry with the highest measured speedup among those whose verdict is
``faster`` (``menu_answer``); a state where no entry is faster gives no menu row: a tie or a slowdown
is never taught as the answer. Preference pairs (TRL's ``prompt``/``chosen``/``rejected``) pair the
answer with entries whose verdict is ``slower`` or ``tie`` (``menu_pairs``), and single-answer rows
of one state by their own timing verdicts (``single_pairs``).

The question uses the search's defaults (``QUESTION``: greedy, one choice, a number as the answer,
compact entries, the search's system prompt) with the job's ``--seed``, ``--target``, ``--menu-size``
and ``--prompt-tokens`` (default 40 and 2000, the search's): a menu row's messages are byte for byte
the request of ``python -m search PROGRAM --policy llm --per-node 1 --seed SEED --target TARGET
--menu-size N --prompt-tokens T`` at that state.
"""
from __future__ import annotations

import hashlib
import json

PAIRS_PER_STATE = 3        # rejected entries paired with a state's answer at most (slowest first)
# the search options the question is asked with (besides the job's seed and target)
QUESTION = {"algorithm": "greedy", "policy": "llm", "per_node": 1}


def search_options(options: dict):
    """The ``SearchOptions`` the question is asked with: the job's seed, target and menu size
    options (``options["menu"]``: {"menu_size", "prompt_tokens"}; ``True`` in datasets written
    before they were options: the search's defaults)."""
    from search.options import SearchOptions
    size = options.get("menu") if isinstance(options.get("menu"), dict) else {}
    return SearchOptions(seed=int(options.get("seed") or 0), target=options.get("target") or "llvm",
                         **{k: size[k] for k in ("menu_size", "prompt_tokens") if k in size},
                         **{k: v for k, v in QUESTION.items()})


def state_nodes(program, parent_program, depth: int, history: list[dict]):
    """(node, parent node) of a state as the search holds them. ``history``: one {"strategy",
    "speedup"} per step from the source to the state (speedups over the source, None when not
    measured), the last one the step that made the state."""
    from engine.leir.canonical import renaming_key
    from search.space import Node
    if depth != len(history) or (depth == 0) != (parent_program is None):
        raise ValueError("a state at depth d has d history entries and a parent unless d is 0")
    parent = None
    if parent_program is not None:
        up = history[-2] if depth >= 2 else {"strategy": None, "speedup": 1.0}
        parent = Node(1, parent_program, renaming_key(parent_program), 0 if depth >= 2 else None, depth - 1,
                      strategy=up["strategy"], speedup=up["speedup"])
    last = history[-1] if depth else {"strategy": None, "speedup": 1.0}
    node = Node(2, program, renaming_key(program), None if parent is None else 1, depth,
                strategy=last["strategy"], speedup=last["speedup"])
    return node, parent


def question(engine, options: dict, program, parent_program=None, depth: int = 0, history=(), closed=()):
    """The search's question at a state (``search.question.MenuQuestion``). ``closed``: renaming
    keys of other states the search would not offer again (the path's states)."""
    from search.question import menu_question
    from search.space import Space
    node, parent = state_nodes(program, parent_program, depth, list(history))
    shut = {node.key, *closed} | ({parent.key} if parent is not None else set())
    menu = Space(engine).menu(node, parent, shut)
    return menu_question(node, menu, search_options(options), parent=parent, k=1)


# ------------------------------------------------------------------ the answer, the pairs (pure)


def menu_answer(entries: list[dict]):
    """The number of the entry with the highest measured speedup among those measured faster (the
    lowest number on equal speedups), or None when no entry is faster."""
    faster = [e for e in entries if e.get("verdict") == "faster" and e.get("reason")]
    if not faster:
        return None
    return min(faster, key=lambda e: (-e["speedup"], e["number"]))["number"]


def menu_pairs(entries: list[dict], answer) -> list[tuple[dict, dict]]:
    """(chosen, rejected): the answer with entries measured slower or tied, slowest first (at most
    ``PAIRS_PER_STATE``); none without an answer."""
    if answer is None:
        return []
    chosen = entries[answer - 1]
    worse = [e for e in entries if e.get("verdict") in ("slower", "tie") and e.get("reason")]
    worse.sort(key=lambda e: (e["speedup"], e["number"]))
    return [(chosen, e) for e in worse[:PAIRS_PER_STATE]]


def single_pairs(rows: list[dict]) -> list[tuple[dict, dict]]:
    """(faster row, slower-or-tied row) of one state's rows, by their timing verdicts: the fastest
    with the slowest, the second fastest with the second slowest, ..."""
    def verdict(r):
        return (r.get("timing") or {}).get("verdict")
    fast = sorted((r for r in rows if verdict(r) == "faster"), key=lambda r: (-r["timing"]["speedup"], r["id"]))
    slow = sorted((r for r in rows if verdict(r) in ("slower", "tie")), key=lambda r: (r["timing"]["speedup"], r["id"]))
    return list(zip(fast, slow))


def answer_content(entry: dict) -> str:
    """The assistant message of a menu answer: its reason, then its number (the search reads the
    number after ``</think>``)."""
    return f"<think>{entry['reason']}</think>{entry['number']}"


def pair_id(*parts: str) -> str:
    return hashlib.sha256(">".join(parts).encode()).hexdigest()[:16]


def menu_row_pairs(row: dict) -> list[dict]:
    """The menu-form preference pairs of a menu row."""
    prompt = row["messages"][:-1]
    out = []
    for chosen, rejected in menu_pairs(row["menu"], row["answer"]):
        out.append({"id": pair_id(row["id"], chosen["key"], rejected["key"]), "form": "menu",
                    "program": row["program"]["name"], "prompt": prompt,
                    "chosen": [{"role": "assistant", "content": answer_content(chosen)}],
                    "rejected": [{"role": "assistant", "content": answer_content(rejected)}],
                    "chosen_key": chosen["key"], "rejected_key": rejected["key"],
                    "chosen_speedup": chosen["speedup"], "rejected_speedup": rejected["speedup"],
                    "chosen_verdict": chosen["verdict"], "rejected_verdict": rejected["verdict"],
                    "split": row["split"]})
    return out


def single_row_pairs(rows: list[dict], chat_single) -> list[dict]:
    """The single-answer-form preference pairs of one state's rows (``chat_single``: the row's
    chat rendering, ``dataset.assembly.assemble.chat_single``)."""
    out = []
    for fast, slow in single_pairs(rows):
        a, b = chat_single(fast)[0], chat_single(slow)[0]
        out.append({"id": pair_id(fast["id"], slow["id"]), "form": "single", "program": fast["program"]["name"],
                    "prompt": a["messages"][:1], "chosen": a["messages"][1:], "rejected": b["messages"][1:],
                    "chosen_key": fast["step"]["key"], "rejected_key": slow["step"]["key"],
                    "chosen_speedup": fast["timing"]["speedup"], "rejected_speedup": slow["timing"]["speedup"],
                    "chosen_verdict": "faster", "rejected_verdict": slow["timing"]["verdict"], "split": fast["split"]})
    return out


# ------------------------------------------------------------------ one state, measured


def entry_reason(engine, program, step, timing) -> str | None:
    """Why an entry would be chosen: its trace with its measured effect (None: no trace fits)."""
    from . import cot
    from .benefit import measured_sentence
    try:
        return cot.render(engine.strategy(step.strategy), program, step.program, step) + measured_sentence(timing)
    except cot.CotError:
        return None


def measured_menu(runner, program, parent_program=None, depth: int = 0, history=(), closed=(), verified=None,
                  timed=None):
    """(question, entries) of a state: the search's question there with every entry shown verified,
    timed against the state's program and given its reason. ``runner``: a
    ``dataset.generate.task.Runner`` (engine, verifier, options); ``verified``: step key -> whether the
    task already found it equal (the entries it did not verify are verified here); ``timed``: step key
    -> the timing record the task already measured against this state (the others are timed here)."""
    eng, verifier = runner.engine, runner.verifier
    q = question(eng, runner.options, program, parent_program, depth, history, closed)
    verified = dict(verified or {})
    todo = [c for c in q.shown if c.step.key not in verified]
    if todo:                # the entries the task did not verify, their builds batched (lowering.batch_build)
        from lowering import tolerance_for
        verdicts = verifier.verify_many(program, [c.step.program for c in todo],
                                        [tolerance_for(c.step.exactness, verifier.tolerance) for c in todo])
        verified.update({c.step.key: v.equal for c, v in zip(todo, verdicts)})
    ok = [verified[c.step.key] for c in q.shown]
    timing_of = {k: r for k, r in (timed or {}).items() if r is not None}
    measured = [c for c, good in zip(q.shown, ok) if good and c.step.key not in timing_of]
    records = runner.measurer.compare(program, [c.program for c in measured]) if measured else []
    timing_of.update({c.step.key: r for c, r in zip(measured, records)})
    entries = []
    for i, (c, good) in enumerate(zip(q.shown, ok)):
        t = timing_of.get(c.step.key)
        entries.append({"number": i + 1, "key": c.step.key, "strategy": c.step.strategy, "step": _step(c.step),
                        "verified": bool(good), "speedup": t["speedup"] if t else None,
                        "verdict": t["verdict"] if t else None, "timing": t,
                        "reason": entry_reason(eng, program, c.step, t) if t else None})
    return q, entries


def menu_id(program, history=()) -> str:
    """A menu row's id: the state's program record and its history."""
    return pair_id(json.dumps(program.to_json(), sort_keys=True), "menu", json.dumps(list(history), sort_keys=True))


def menu_row(q, entries: list[dict], program, depth: int = 0, history=()) -> dict | None:
    """The menu row of a measured question (``measured_menu``), or None when no entry is faster."""
    answer = menu_answer(entries)
    if answer is None:
        return None
    messages = q.messages("number") + [{"role": "assistant", "content": answer_content(entries[answer - 1])}]
    return {"id": menu_id(program, history), "program": program.to_json(), "depth": depth,
            "messages": messages, "menu": entries, "answer": answer, "strategy": entries[answer - 1]["strategy"],
            "split": None}


def menu_state(runner, program, parent_program=None, depth: int = 0, history=(), closed=(), verified=None,
               timed=None):
    """The menu row of a state, or None when no shown entry is measured faster (``measured_menu``,
    then ``menu_row``)."""
    q, entries = measured_menu(runner, program, parent_program, depth, history, closed, verified, timed)
    return menu_row(q, entries, program, depth, history)


def _step(step) -> dict:
    """The entry's step: ``Step.to_json()`` less the program text and the alternatives (params an
    object; canonical JSON text in Parquet, one column type for every rule)."""
    d = step.to_json()
    return {k: d[k] for k in ("strategy", "category", "rule", "site", "params", "exactness", "key")}
