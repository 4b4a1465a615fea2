"""Kernel rows: the kernel search's question at a slot's kernel, answered with the measured-fastest move.

The kernel search (``python -m search``'s default, ``--algorithm kernels``) splits a program into
per-statement kernels (``search.kernel_slots.split``) and, at a kernel, asks the run's policy which
move to measure next (``search.kernel_question``). For each slot of a state's program,
``kernel_slot_row`` asks that question exactly as the search asks it at the slot's kernel with nothing
measured yet::

    kernel_question(KernelState(program.name, i, len(slots), slot.kernel, slot.key),
                    [candidate_move(c, slot.kernel) for c in kernel_candidates(engine, slot.kernel, composites)],
                    options)

(``composites``: the search's composite menu, ``search.space.Space(...).composites`` with the table
``search.composite.resolve`` gives a kernel search; ``options``: ``search_options``). The moves timed
are the first ``--kernel-moves`` of the question's display order (default: the moves its first page
shows); each is verified against the kernel (``Verifier.verify`` at the tolerance its steps'
exactness demands, ``search.candidate_eval.path_tolerance``) and timed paired against it
(``Measurer.compare``: speedup, interval, verdict), each (kernel, move) pair once per worker (a
kernel met again at another state or program reuses them).

The answer is the timed move with the highest measured speedup among those measured ``faster``
whose reason renders (the first in display order on equal speedups); a slot where none is faster
has no row. The row's
messages are the conversation that chooses it (``KernelQuestion.path_to``): each page a user
message (the first after the system message), each answer an assistant message; an answer to a
"more" line is ``<think>{MORE_REASON}</think>{number}``, the last ``<think>{reason}</think>{number}``
with the move's reason (``move_reason``). Preference pairs pair the answer with moves measured
``slower`` or ``tie`` on the same page (``kernel_row_pairs``).
"""
from __future__ import annotations

import json

from .menu import PAIRS_PER_STATE, _step, answer_content, pair_id

# the answer to a "more" line on the way to the chosen move (the search reads the number after </think>)
MORE_REASON = "The fastest move is among the moves this line stands for."
# the search options the question is asked with (besides the job's seed, target and prompt budget)
QUESTION = {"algorithm": "kernels", "policy": "llm"}


def search_options(options: dict):
    """The ``SearchOptions`` the kernel question is asked with: the job's seed and target, and its
    ``--prompt-tokens`` (``options["kernel_menu"]["prompt_tokens"]``; the search's default without)."""
    from search.options import SearchOptions
    km = options.get("kernel_menu") if isinstance(options.get("kernel_menu"), dict) else {}
    extra = {"prompt_tokens": km["prompt_tokens"]} if km.get("prompt_tokens") is not None else {}
    return SearchOptions(seed=int(options.get("seed") or 0), target=options.get("target") or "llvm", **extra,
                         **QUESTION)


_COMPOSITES: dict = {}       # (id(engine), table) -> (engine, CompositeMenu or None), one per engine


def composites(engine, sopts):
    """The composite menu the kernel search offers with ``sopts`` (``search.space.Space``, as
    ``search.run.Run`` builds it), kept per engine."""
    from search.composite import load_table, resolve
    from search.space import Space
    table = resolve(sopts.composites, sopts.policy, sopts.algorithm)
    key = (id(engine), table)
    got = _COMPOSITES.get(key)
    if got is None or got[0] is not engine:
        menu = Space(engine, load_table(table or None, [s.name for s in engine.rulebook.strategies])
                     if table is not None else None).composites
        got = _COMPOSITES[key] = (engine, menu)
    return got[1]


def slot_question(engine, options: dict, program, index: int, slots=None):
    """(candidates, question) of slot ``index`` of ``program``: the slot kernel's moves
    (``search.kernel_slots.KernelCandidate``, in the question's move order) and the kernel search's
    question there (``search.kernel_question.KernelQuestion``). ``slots``: ``split(program)``."""
    from search.kernel_question import KernelState, candidate_move, kernel_question
    from search.kernel_slots import kernel_candidates, split
    slots = split(program) if slots is None else slots
    s = slots[index]
    sopts = search_options(options)
    cands = kernel_candidates(engine, s.kernel, composites(engine, sopts))
    q = kernel_question(KernelState(program.name, index, len(slots), s.kernel, s.key),
                        [candidate_move(c, s.kernel) for c in cands], sopts)
    return cands, q


def timed_moves(q, moves) -> list[int]:
    """The moves timed (indices into ``q.moves``): the first ``moves`` of the display order, by
    default (None) those the first page shows."""
    n = len(q.first().shown_moves) if moves is None else int(moves)
    return list(q.order[:n])


def row_id(program_name: str, slot: int, slots: int, kernel_record: dict) -> str:
    """A kernel row's id: the question's identity (program name, slot, kernel text and tensors;
    the kernel's own name is not shown)."""
    kernel = {k: kernel_record[k] for k in ("inputs", "outputs", "leir")}
    return pair_id(json.dumps({"program": program_name, "slot": slot, "slots": slots, "kernel": kernel},
                              sort_keys=True), "kernel")


# ------------------------------------------------------------------ the reason, the answer, the pairs


def move_reason(engine, kernel, candidate, timing) -> str | None:
    """Why a move would be chosen: its trace, then its measured effect (None: no trace fits).

    A one-step move's trace is its step's (``dataset.text.cot.render``), as a menu entry's. A
    composite move's reason names it and its description, then joins its steps' traces in order,
    each rendered against the program that step applies to: the last step alone would be rendered
    against an intermediate kernel the question never shows, and would leave out the earlier steps
    that made the structure it uses (the split before a vectorisation), so it would not say what
    the move does to the kernel shown; the joined traces are each true of their own step and
    together of the move."""
    from . import cot
    from .benefit import measured_sentence
    parts, before = [], kernel
    try:
        for st in candidate.steps:
            parts.append(cot.render(engine.strategy(st.strategy), before, st.program, st))
            before = st.program
    except cot.CotError:
        return None
    if len(parts) == 1 and not candidate.composite:
        text = parts[0]
    else:
        head = f"The composite move {candidate.composite}"
        head += f" ({candidate.description.rstrip('.')})" if candidate.description else ""
        text = f"{head} takes {len(parts)} steps. " + " ".join(f"Step {k}: {t}" for k, t in enumerate(parts, 1))
    return text + measured_sentence(timing)


def kernel_answer(entries: list[dict]) -> int | None:
    """The index (into ``entries``, display order) of the entry with the highest measured
    speedup among those measured faster (the first on equal speedups), or None."""
    faster = [i for i, e in enumerate(entries) if e.get("verdict") == "faster" and e.get("reason")]
    if not faster:
        return None
    return min(faster, key=lambda i: (-entries[i]["speedup"], i))


def content(reason: str, number: int) -> str:
    """An assistant message: a reason, then a number (the search reads the number after ``</think>``)."""
    return answer_content({"reason": reason, "number": number})


def conversation(q, index: int, reason: str) -> list[dict]:
    """The messages that choose move ``index`` of ``q``: the pages on the way (``q.path_to``), each a
    user message (the first after the system message), each answered; the last answer carries
    ``reason``, the answers to "more" lines ``MORE_REASON``."""
    path = q.path_to(index)
    out: list[dict] = []
    for k, (page, number) in enumerate(path):
        out += [dict(m) for m in (page.messages if k == 0 else page.messages[1:])]
        out.append({"role": "assistant", "content": content(reason if k == len(path) - 1 else MORE_REASON, number)})
    return out


def kernel_pairs(entries: list[dict], answer: int | None) -> list[tuple[dict, dict]]:
    """(chosen, rejected): the answer (an index into ``entries``) with entries measured slower or
    tied that its final page shows under their own number (the same path of "more" answers),
    slowest first, at most ``PAIRS_PER_STATE``; none without an answer."""
    if answer is None:
        return []
    chosen = entries[answer]
    worse = [(i, e) for i, e in enumerate(entries) if e.get("verdict") in ("slower", "tie") and e.get("reason")
             and e["path"][:-1] == chosen["path"][:-1]]
    worse.sort(key=lambda ie: (ie[1]["speedup"], ie[0]))
    return [(chosen, e) for _, e in worse[:PAIRS_PER_STATE]]


def answer_index(row: dict) -> int | None:
    """The index in ``row["moves"]`` of the row's answer (by its key), or None."""
    return next((i for i, e in enumerate(row["moves"]) if e["key"] == row["answer_key"]), None)


def kernel_row_pairs(row: dict) -> list[dict]:
    """The preference pairs of a kernel row: the conversation up to the last page, the answer
    (chosen) and a move of that page measured slower or tied (rejected), each as reason and number."""
    prompt = row["messages"][:-1]
    out = []
    for chosen, rejected in kernel_pairs(row["moves"], answer_index(row)):
        out.append({"id": pair_id(row["id"], chosen["key"], rejected["key"]), "form": "kernel",
                    "program": row["program"]["name"], "slot": row["slot"], "prompt": prompt,
                    "chosen": [{"role": "assistant", "content": content(chosen["reason"], chosen["number"])}],
                    "rejected": [{"role": "assistant", "content": content(rejected["reason"], rejected["number"])}],
                    "chosen_key": chosen["key"], "rejected_key": rejected["key"],
                    "chosen_speedup": chosen["speedup"], "rejected_speedup": rejected["speedup"],
                    "chosen_verdict": chosen["verdict"], "rejected_verdict": rejected["verdict"],
                    "split": row["split"]})
    return out


# ------------------------------------------------------------------ one slot, measured


def kernel_cache(runner) -> dict:
    """The runner's verdicts and timings of kernel moves, by renaming keys (kept for the worker's
    life: a kernel met again, at another state or in another program, is not verified or timed
    again)."""
    cache = getattr(runner, "kernel_cache", None)
    if cache is None:
        cache = {"verified": {}, "timed": {}}
        try:
            runner.kernel_cache = cache
        except AttributeError:
            pass
    return cache


def measured_slot(runner, program, index: int, slots):
    """(question, timed move indices, entries) of slot ``index`` of a state's ``program``: the kernel
    search's question at the slot's kernel, its first moves verified, timed and given their reason
    (``entries``, in display order); None when the kernel has no move. ``runner``: a
    ``dataset.generate.task.Runner`` (engine, verifier, measurer, options: ``kernel_menu`` =
    {"prompt_tokens", "moves"})."""
    from search.candidate_eval import path_tolerance
    eng, opts = runner.engine, runner.options
    km = opts.get("kernel_menu") if isinstance(opts.get("kernel_menu"), dict) else {}
    cands, q = slot_question(eng, opts, program, index, slots)
    if not q.moves:
        return None
    slot = slots[index]
    kernel = slot.kernel
    chosen = timed_moves(q, km.get("moves"))
    cache = kernel_cache(runner)
    tolerance, ok = {}, {}
    for i in chosen:
        c = cands[i]
        tol = tolerance[i] = path_tolerance([st.exactness for st in c.steps])
        vk = (slot.key, c.key, tol)
        if vk not in cache["verified"]:
            cache["verified"][vk] = bool(runner.verifier.verify(kernel, c.program, tol).equal)
        ok[i] = cache["verified"][vk]
    todo = [i for i in chosen if ok[i] and (slot.key, cands[i].key) not in cache["timed"]]
    records = runner.measurer.compare(kernel, [cands[i].program for i in todo]) if todo else []
    for i, rec in zip(todo, records):
        cache["timed"][(slot.key, cands[i].key)] = rec
    entries = []
    for i in chosen:
        c, t = cands[i], (cache["timed"].get((slot.key, cands[i].key)) if ok[i] else None)
        numbers = [n for _page, n in q.path_to(i)]
        entries.append({"key": c.key, "label": c.label, "composite": c.composite, "text": q.moves[i].text,
                        "steps": [_step(st) for st in c.steps], "number": numbers[-1], "path": numbers,
                        "tolerance": tolerance[i], "verified": ok[i],
                        "speedup": t["speedup"] if t else None, "ci": list(t["ci"]) if t else None,
                        "verdict": t["verdict"] if t else None, "timing": t,
                        "reason": move_reason(eng, kernel, c, t) if t else None})
    return q, chosen, entries


def slot_row(q, chosen: list[int], entries: list[dict], program, depth: int, index: int, slots) -> dict | None:
    """The kernel row of a measured slot (``measured_slot``), or None when no timed move is
    measured faster."""
    a = kernel_answer(entries)
    if a is None:
        return None
    record, krecord = program.to_json(), slots[index].kernel.to_json()
    answer = entries[a]
    return {"id": row_id(program.name, index, len(slots), krecord), "program": record, "depth": depth,
            "slot": index, "slots": len(slots), "kernel": krecord, "key": slots[index].key,
            "messages": conversation(q, chosen[a], answer["reason"]), "moves": entries,
            "answer": answer["number"], "answer_key": answer["key"], "label": answer["label"],
            "pages": len(answer["path"]), "split": None}


def kernel_slot_row(runner, program, depth: int, index: int, slots) -> dict | None:
    """The kernel row of slot ``index`` of a state's ``program``, or None when no timed move is
    measured faster (``measured_slot``, then ``slot_row``)."""
    got = measured_slot(runner, program, index, slots)
    return None if got is None else slot_row(*got, program, depth, index, slots)


def kernel_state_menus(runner, program, depth: int, asked: set) -> list[tuple[dict | None, dict]]:
    """(kernel row or None, timed menu record) of each slot of a state whose kernel has moves
    (``dataset.text.timed_menus.kernel_record``: every timed move, faster or not); ``asked``: the
    row ids already asked in this task (a state reached by a step keeps its parent's other kernels:
    their question is not asked again)."""
    from engine.leir.diagnostics import LeirError
    from search.kernel_slots import split

    from .timed_menus import kernel_record
    try:
        slots = split(program)
    except LeirError:
        return []
    out = []
    for i, s in enumerate(slots):
        rid = row_id(program.name, i, len(slots), s.kernel.to_json())
        if rid in asked:
            continue
        asked.add(rid)
        got = measured_slot(runner, program, i, slots)
        if got is not None:
            out.append((slot_row(*got, program, depth, i, slots), kernel_record(rid, *got, program, depth, i, slots)))
    return out


def kernel_state_rows(runner, program, depth: int, asked: set) -> list[dict]:
    """The kernel rows of a state's slots (``kernel_state_menus``, the slots with a faster move)."""
    return [row for row, _timed in kernel_state_menus(runner, program, depth, asked) if row is not None]
