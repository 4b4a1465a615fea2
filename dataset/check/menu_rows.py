"""``dataset.check`` of the menu rows and the preference pairs: every claim re-derived.

A menu row's prompt is asked again (``dataset.text.menu.question``: the search's own function) and must
be the row's, byte for byte, with the entries under the same numbers; each entry's verdict is
re-derived from its timing samples (``lowering.measure.verdict_of``) and its reason re-checked like a
row's trace (``dataset.check.claims``: description, instance part, benefit sentences, measured sentence);
the answer must be the entry ``menu_answer`` picks. The pair files must be exactly the pairs the
rows give (``menu_row_pairs``, ``single_row_pairs``).
"""
from __future__ import annotations

import json


def check_menu(data: dict, rows: list[dict], options: dict, rules, report) -> None:
    """``options``: the job's (seed, target, strategies: the question is asked over the job's
    strategies); ``rules``: the rule sources the dataset was made with."""
    from ..assembly.assemble import chat_single
    from ..assembly.states import by_state
    from ..text.menu import answer_content, menu_answer, menu_row_pairs, question, single_row_pairs
    from ..assembly.file_schema import SPLITS
    menus = data.get("menu.jsonl", [])
    if menus:
        from engine import Engine
        engine = Engine(rules=rules, strategies=options.get("strategies") or "paper")
    for no, m in enumerate(menus, 1):
        where = f"menu.jsonl:{no} ({m.get('id')})"
        try:
            _check_row(where, m, options, engine, report, question, menu_answer, answer_content)
        except (KeyError, TypeError, IndexError) as e:      # a row the schema check already flagged
            report.add(where, f"malformed: {e}")
    want = [p for m in menus for p in menu_row_pairs(m)]
    _same("preferences_menu.jsonl", data.get("preferences_menu.jsonl", []), want, report)
    tasks: dict[str, list[dict]] = {}           # assembly pairs the rows of one task's states
    for r in rows:
        tasks.setdefault(json.dumps(r.get("origin"), sort_keys=True), []).append(r)
    want = [p for t in tasks.values() for g in by_state(t) for p in single_row_pairs(g, chat_single)]
    want.sort(key=lambda p: SPLITS.index(p["split"]))      # read train/ then test/, each in row order
    _same("preferences.jsonl", data.get("preferences.jsonl", []), want, report)


def _same(name: str, got: list, want: list, report) -> None:
    if got != want:
        report.add(name, f"{len(got)} pairs, not the {len(want)} the rows give (chosen measured faster, rejected "
                         "slower or tied) or other contents")
    else:
        report.ok("preference pairs", len(got))


def _check_row(where, m, options, engine, report, question, menu_answer, answer_content) -> None:
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import program_from_json

    from .claims import check_trace
    from lowering.measure import verdict_of
    program = program_from_json(m["program"])
    if m["depth"] == 0:
        q = question(engine, options, program)
        if m["messages"][:-1] != q.messages("number"):
            report.add(where, "the prompt is not the search's request for this state")
        if [e["key"] for e in m["menu"]] != [c.step.key for c in q.shown]:
            report.add(where, "the entries are not the steps the search shows, in its order")
        steps = {c.step.key: c.step for c in q.shown}
    else:       # a deeper state's question needs its history: its entries are replayed instead
        steps = {}
    if [e["number"] for e in m["menu"]] != list(range(1, len(m["menu"]) + 1)):
        report.add(where, "entries are not numbered 1, 2, ... in order")
    for e in m["menu"]:
        t = e["timing"]
        if t is not None and (t["verdict"] != verdict_of(t) or e["verdict"] != t["verdict"]
                              or e["speedup"] != t["speedup"]):
            report.add(where, f"entry {e['number']}: the verdict is not what its timing samples give")
        if e["reason"] is None:
            continue
        d = {"rule": e["step"]["rule"], "site": e["step"]["site"], "params": e["step"]["params"]}
        step = steps.get(e["key"])
        try:
            after = step.program if step is not None else engine.apply(program, d)
        except LeirError as err:
            report.add(where, f"entry {e['number']}: its step does not replay: {err.message}")
            continue
        problems = check_trace(e["reason"], engine.strategy(e["step"]["strategy"]), program, after, d, t)
        for p in problems:
            report.add(where, f"entry {e['number']}: reason: {p}")
        if not problems:
            report.ok("menu reasons")
    if m["answer"] != menu_answer(m["menu"]):
        report.add(where, "the answer is not the entry measured fastest among those measured faster")
    elif m["messages"][-1] != {"role": "assistant", "content": answer_content(m["menu"][m["answer"] - 1])} or \
            m["strategy"] != m["menu"][m["answer"] - 1]["strategy"]:
        report.add(where, "the assistant message is not the answer's reason and number")
    else:
        report.ok("menu rows")
