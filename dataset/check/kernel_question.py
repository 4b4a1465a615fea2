"""What a kernel row and a timed kernel menu both re-ask: the slot's kernel of the record's program,
the kernel search's question there (``dataset.text.kernel_menu.slot_question``) and its timed moves;
and the claims a timed entry makes of its timing record."""
from __future__ import annotations


def asked_again(where: str, rec: dict, entries: list, key_field: str, options: dict, engine, report):
    """(kernel, candidates, question, timed move indices) of the record's slot, asked again; None (a
    problem reported) when the record's slot, or its timed moves, are not the question's."""
    from engine.leir.files import program_from_json
    from engine.leir.slots import split

    from ..text.kernel_menu import row_id, slot_question, timed_moves
    program = program_from_json(rec["program"])
    slots = split(program)
    i = rec["slot"]
    if not 0 <= i < len(slots) or rec["slots"] != len(slots):
        report.add(where, f"slot {i} of {rec['slots']}: the program splits into {len(slots)} kernels")
        return None
    kernel = slots[i].kernel
    if rec["kernel"] != kernel.to_json() or rec[key_field] != slots[i].key:
        report.add(where, "the kernel is not the program's slot kernel")
    if rec["id"] != row_id(program.name, i, len(slots), kernel.to_json()):
        report.add(where, "the id is not the question's (program name, slot, kernel)")
    cands, q = slot_question(engine, options, program, i, slots)
    km = options.get("kernel_menu") if isinstance(options.get("kernel_menu"), dict) else {}
    timed = timed_moves(q, km.get("moves"))
    if [e["key"] for e in entries] != [q.moves[j].key for j in timed]:
        report.add(where, "the timed moves are not the question's first moves in its order")
        return None
    return kernel, cands, q, timed


def timing_claims(where: str, name: str, e: dict, report) -> None:
    """A timed entry: verified, its record sound (``lowering.measure.record_problems``) and its
    speedup, interval and verdict the record's."""
    from lowering.measure import record_problems
    t = e["timing"]
    if not e["verified"]:
        report.add(where, f"{name}: timed but not verified")
    for p in record_problems(t):
        report.add(where, f"{name}: {p}")
    if (e["speedup"], e["ci"], e["verdict"]) != (t["speedup"], t["ci"], t["verdict"]):
        report.add(where, f"{name}: speedup, interval or verdict are not its timing's")
