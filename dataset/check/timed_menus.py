"""``dataset.check`` of the timed menus (``timed_menus.jsonl``) and the examples made from them.

A timed menu's question is asked again, as ``dataset.check.kernel_rows`` and ``menu_rows`` ask theirs:
a kernel question at the slot's kernel of its program, split again (the request, the timed moves in
the question's order, each move's line, label, steps and first-page number); a state's menu question
at a source program (depth 0: the request and the entries, byte for byte), and at a deeper state, whose
question needs the walk's measured history, each entry's step found among the state's one-step rewrites
by its key and its line rendered again, the request holding those lines under its header. Every timing
is re-derived from its samples (``lowering.measure.record_problems``) with the job's noise floor, and
each entry's speedup, interval and verdict must be its record's.

The pairwise, pointwise and preference files must then be exactly what ``dataset.text.pairwise`` makes
of the records with the job's seed: each example's entries are in its timed menu with the stated
timings, its pair decisive, its answer the one the timings give; an example that no timed menu gives,
or that differs from the one it gives (the differing fields are named), is a problem.
"""
from __future__ import annotations

from collections import Counter

from ..text.pairwise import FILES


def check_timed_menus(data: dict, options: dict, rules, report, engine=None) -> None:
    """``options``: the job's (seed, target, strategies, time, menu, kernel_menu); ``rules``: the rule
    sources the dataset was made with; ``engine``: one already made with them and the job's strategies."""
    records = data.get("timed_menus.jsonl", [])
    asked = bool(options.get("time") and (options.get("menu") or options.get("kernel_menu")))
    if records and not asked:
        report.add("timed_menus.jsonl", "timed menus in a job run without --time --menu or --kernel-menu")
    if records and engine is None:
        from engine import Engine
        engine = Engine(rules=rules, strategies=options.get("strategies") or "paper")
    seen: set = set()
    for no, rec in enumerate(records, 1):
        where = f"timed_menus.jsonl:{no} ({rec.get('id')})"
        if rec.get("id") in seen:
            report.add(where, "the same question as an earlier timed menu")
        seen.add(rec.get("id"))
        before = len(report.problems)
        try:
            _check_timings(where, rec, options, report)
            (_check_kernel if rec["form"] == "kernel" else _check_menu)(where, rec, options, engine, report)
        except (KeyError, TypeError, IndexError, ValueError) as e:     # a record the schema check already flagged
            report.add(where, f"malformed: {e}")
        if len(report.problems) == before:
            report.ok("timed menus")
    check_examples(data, records, options, report)


def _check_timings(where: str, rec: dict, options: dict, report) -> None:
    from .kernel_question import timing_claims
    floor = (options.get("time") or {}).get("noise_floor")
    for e in rec["entries"]:
        t, name = e["timing"], f"entry {e['key'][:12]}"
        if t is None:
            if (e["speedup"], e["ci"], e["verdict"]) != (None, None, None):
                report.add(where, f"{name}: a measured claim without a timing")
            continue
        timing_claims(where, name, e, report)
        if t["noise_floor"] != floor:
            report.add(where, f"{name}: timing noise_floor is {t['noise_floor']}, the job's --noise-floor is {floor}")


def _check_kernel(where: str, rec: dict, options: dict, engine, report) -> None:
    from search.kernel_question import MOVES_INTRO

    from ..text.kernel_menu import _step
    from ..text.timed_menus import header_of
    from .kernel_question import asked_again
    got = asked_again(where, rec, rec["entries"], "kernel_key", options, engine, report)
    if got is None:
        return
    _kernel, cands, q, timed = got
    if rec["messages"] != [dict(m) for m in q.first().messages]:
        report.add(where, "the request is not the kernel search's first page at this kernel")
    if rec["header"] != header_of(rec["messages"][1]["content"], MOVES_INTRO):
        report.add(where, "the header is not the request's text before its moves")
    for e, j in zip(rec["entries"], timed):
        path = q.path_to(j)
        c = cands[j]
        if (e["text"], e["label"], e["steps"]) != (q.moves[j].text, c.label, [_step(st) for st in c.steps]):
            report.add(where, f"move {e['key'][:12]}: its line, label or steps are not the question's")
        if e["number"] != (path[0][1] if len(path) == 1 else None):
            report.add(where, f"move {e['key'][:12]}: not under the number the first page gives it")


def _check_menu(where: str, rec: dict, options: dict, engine, report) -> None:
    from engine.leir.files import program_from_json
    from search.prompt import MENU_INTRO

    from ..text.menu import _step, question, search_options
    from ..text.timed_menus import header_of, menu_line
    program = program_from_json(rec["program"])
    detail = search_options(options).menu_detail
    entries = rec["entries"]
    if [e["number"] for e in entries] != list(range(1, len(entries) + 1)):
        report.add(where, "entries are not numbered 1, 2, ... in order")
    if rec["depth"] == 0:
        q = question(engine, options, program)
        if rec["messages"] != q.messages("number"):
            report.add(where, "the request is not the search's request for this state")
        steps = {c.step.key: c.step for c in q.shown}
        if [e["key"] for e in entries] != [c.step.key for c in q.shown]:
            return report.add(where, "the entries are not the steps the search shows, in its order")
    else:       # a deeper state's question needs its history: its entries are found among its steps
        steps = {s.key: s for s in engine.enumerate(program)}
    lines = []
    for e in entries:
        step = steps.get(e["key"])
        if step is None:
            report.add(where, f"entry {e['number']}: no one-step rewrite of the state has its key")
            continue
        line = menu_line(step, program, detail, e["number"])
        lines.append(f"{e['number']}. {line}")
        if (e["text"], e["label"], e["steps"]) != (line, step.strategy, [_step(step)]):
            report.add(where, f"entry {e['number']}: its line, label or step are not the search's")
    head = rec["header"] + "\n\n" + MENU_INTRO[detail] + "\n\n" + "\n".join(lines) + "\n\n"
    if rec["header"] != header_of(rec["messages"][1]["content"], MENU_INTRO[detail]) or \
            not rec["messages"][1]["content"].startswith(head):
        report.add(where, "the request is not the header and the entries' lines")


def check_examples(data: dict, records: list[dict], options: dict, report) -> None:
    from ..assembly.file_schema import SPLITS
    from ..text.pairwise import examples_of, stats_of
    seed = int(options.get("seed") or 0)
    want = {name: [] for name in FILES}
    counts = Counter()
    for rec in records:
        try:
            got, n = examples_of(rec, seed)
        except (KeyError, TypeError, IndexError, ValueError):        # reported with the record
            continue
        counts.update(n)
        for name, examples in got.items():
            want[name] += examples
    for name in FILES:
        exp = sorted(want[name], key=lambda x: SPLITS.index(x["split"]) if x["split"] in SPLITS else 0)
        by_id = {x["id"]: x for x in exp}
        got = data.get(name, [])
        before = len(report.problems)
        for no, x in enumerate(got, 1):
            w = by_id.get(x.get("id")) if isinstance(x, dict) else None
            where = f"{name}:{no} ({x.get('id') if isinstance(x, dict) else x})"
            if w is None:
                report.add(where, "no timed menu gives this example (its entries, or a decisive order between them)")
            elif x != w:
                fields = sorted(k for k in set(w) | set(x) if x.get(k) != w.get(k))
                report.add(where, f"not the example its timed menu gives: {', '.join(fields)} differ"
                                  + (" (the answer does not follow from the timings)" if "answer" in fields else ""))
        if len(report.problems) == before and [x.get("id") for x in got] != [x["id"] for x in exp]:
            report.add(name, f"{len(got)} examples, not the {len(exp)} the timed menus give, in their order")
        if len(report.problems) == before and got:
            report.ok(f"{name.removesuffix('.jsonl')} examples", len(got))
    stats = (data.get("stats.json") or {}).get("timed_menus")
    if stats is not None and stats != stats_of(counts):
        report.add("stats.json", "the timed_menus section differs from what the timed menus give")
