"""``dataset.check`` of the kernel rows (``--kernel-menu``) and their preference pairs.

A kernel row's question is asked again (``dataset.text.kernel_menu.slot_question``: the kernel
search's own function, at the slot's kernel of the row's program, split again): the row's kernel
must be that slot's, its messages must be the conversation that chooses its answer, byte for byte
(every page's user message the question's, every answer's number the line of the path); the timed
moves must be the question's first ones in its order, each under the number and path the question
gives it, its label, text and steps the candidate's; each timing re-derived from its samples
(``lowering.measure.record_problems``) and the entry's speedup, interval and verdict the record's;
each reason re-rendered; the answer must be the move ``kernel_answer`` picks and its steps must
replay on the kernel (``Engine.apply``, step after step) to the move's renaming key. The pair file
must be exactly the pairs the rows give (``kernel_row_pairs``); no question is written twice.
"""
from __future__ import annotations


def check_kernel_rows(data: dict, options: dict, rules, report, engine=None) -> None:
    """``options``: the job's (seed, target, strategies, kernel_menu); ``rules``: the rule sources
    the dataset was made with; ``engine``: one already made with them and the job's strategies."""
    from ..text.kernel_menu import kernel_row_pairs
    rows = data.get("kernel_menu.jsonl", [])
    if rows and engine is None:
        from engine import Engine
        engine = Engine(rules=rules, strategies=options.get("strategies") or "paper")
    if rows:
        if not options.get("kernel_menu"):
            report.add("kernel_menu.jsonl", "kernel rows in a job run without --kernel-menu")
    seen: set = set()
    for no, row in enumerate(rows, 1):
        where = f"kernel_menu.jsonl:{no} ({row.get('id')})"
        if row.get("id") in seen:
            report.add(where, "the same question as an earlier kernel row")
        seen.add(row.get("id"))
        try:
            _check_row(where, row, options, engine, report)
        except (KeyError, TypeError, IndexError, ValueError) as e:     # a row the schema check already flagged
            report.add(where, f"malformed: {e}")
    want = []
    for row in rows:
        try:
            want += kernel_row_pairs(row)
        except (KeyError, TypeError, IndexError):
            pass
    got = data.get("preferences_kernel_menu.jsonl", [])
    if got != want:
        report.add("preferences_kernel_menu.jsonl", f"{len(got)} pairs, not the {len(want)} the kernel rows give "
                                                    "(chosen measured faster, rejected slower or tied on its page) "
                                                    "or other contents")
    elif rows:
        report.ok("kernel preference pairs", len(got))
    stats = (data.get("stats.json") or {}).get("kernel_menu")
    if stats is not None and stats.get("rows") != len(rows):
        report.add("stats.json", f"kernel_menu rows is {stats.get('rows')}, the files hold {len(rows)}")


def _check_row(where: str, row: dict, options: dict, engine, report) -> None:
    from engine.leir.canonical import renaming_key
    from engine.leir.diagnostics import LeirError
    from search.candidate_eval import path_tolerance

    from ..text.kernel_menu import _step, answer_index, conversation, kernel_answer, move_reason
    from .kernel_question import asked_again, timing_claims
    before = len(report.problems)
    entries = row["moves"]
    got = asked_again(where, row, entries, "key", options, engine, report)
    if got is None:
        return
    kernel, cands, q, timed = got
    for e, j in zip(entries, timed):
        c, numbers = cands[j], [n for _page, n in q.path_to(j)]
        if (e["number"], e["path"]) != (numbers[-1], numbers):
            report.add(where, f"move {e['key'][:12]}: not under the number the question gives it")
        if (e["label"], e["composite"], e["text"]) != (c.label, c.composite, q.moves[j].text) or \
                e["steps"] != [_step(st) for st in c.steps]:
            report.add(where, f"move {e['key'][:12]}: its label, text or steps are not the question's")
        if e["tolerance"] != path_tolerance([st.exactness for st in c.steps]):
            report.add(where, f"move {e['key'][:12]}: verified at another tolerance than its steps demand")
        t = e["timing"]
        if t is not None:
            timing_claims(where, f"move {e['key'][:12]}", e, report)
        elif (e["speedup"], e["ci"], e["verdict"], e["reason"]) != (None, None, None, None):
            report.add(where, f"move {e['key'][:12]}: a measured claim without a timing")
        if e["reason"] != (move_reason(engine, kernel, c, t) if t is not None else None):
            report.add(where, f"move {e['key'][:12]}: the reason is not its trace and measured effect")
    a = answer_index(row)
    if a is None or a != kernel_answer(entries):
        return report.add(where, "the answer is not the move measured fastest among those measured faster")
    answer = entries[a]
    if (row["answer"], row["label"], row["pages"]) != (answer["number"], answer["label"], len(answer["path"])):
        report.add(where, "the answer's number, label or pages are not its move's")
    if row["messages"] != conversation(q, timed[a], answer["reason"]):
        report.add(where, "the messages are not the kernel search's question, page by page, answered with the "
                          "answer's path")
    got = kernel
    try:
        for st in answer["steps"]:
            got = engine.apply(got, {"rule": st["rule"], "site": st["site"], "params": st["params"]})
        if renaming_key(got) != answer["key"]:
            report.add(where, "the answer's steps replay to another kernel than its key")
    except LeirError as err:
        report.add(where, f"the answer's steps do not replay: {err.message}")
    if len(report.problems) == before:
        report.ok("kernel rows")
