"""``dataset.check``'s part for states and target no-ops: every row replays from its path.

A row's ``state.path`` is applied step by step with ``Engine.apply`` to the source program
(the program of the depth-0 row its ``parent`` chain ends at), each step to the program the
record of the step before holds (``dataset.generate.walk.as_recorded``), each giving the program its
record holds (``leir``) and the last one ``row["program"]``; the parent row's transformed
program is the row's program and its path plus its step is the row's path. ``noop_on_target``
is re-derived from the row's CUDA texts (``dataset.generate.noop``), null on other targets, and true
only in a job made with ``--keep-noop``.
"""
from __future__ import annotations

from engine.leir.diagnostics import LeirError


def _where(no: int, r: dict) -> str:
    return f"rows.jsonl:{no} ({r['id']}, {r['step']['strategy']})"


def check_states(rows: list[dict], engine, options: dict, report) -> None:
    by_id = {r.get("id"): r for r in rows}
    replayed: dict[tuple, object] = {}          # (source row id, path keys) -> program
    for no, r in enumerate(rows, 1):
        try:
            _check_noop(no, r, options, report)
            _check_state(no, r, by_id, engine, replayed, report)
        except (KeyError, TypeError) as e:      # a row the schema check already flagged
            report.add(_where(no, r) if isinstance(r, dict) and "id" in r else f"rows.jsonl:{no}",
                       f"malformed state: {e}")


def _root(r: dict, by_id: dict):
    """The depth-0 row of a row's parent chain (its program is the source), or a problem."""
    seen = r
    for _ in range(r["state"]["depth"]):
        parent = by_id.get(seen["state"]["parent"])
        if parent is None:
            return None, f"state.parent {seen['state']['parent']} is no row of rows.jsonl"
        if parent["state"]["depth"] != seen["state"]["depth"] - 1:
            return None, f"state.parent {parent['id']} is not one step closer to the source"
        seen = parent
    return seen, None


def _check_state(no: int, r: dict, by_id: dict, engine, replayed: dict, report) -> None:
    from engine.leir.files import program_from_json
    from engine.rewrite.steps import Step
    where = _where(no, r)
    st = r["state"]
    path, depth = st["path"], st["depth"]
    if depth != len(path):
        return report.add(where, f"state.depth is {depth}, its path has {len(path)} steps")
    if depth == 0:
        if st["parent"] is not None:
            report.add(where, "a row of the source program (depth 0) has a parent")
        else:
            report.ok("states replayed")
        return
    parent = by_id.get(st["parent"])
    if parent is None:
        return report.add(where, f"state.parent {st['parent']} is no row of rows.jsonl")
    if parent["transformed"] != r["program"]["leir"] or \
            {k: v for k, v in parent["program"].items() if k != "leir"} != \
            {k: v for k, v in r["program"].items() if k != "leir"}:
        report.add(where, f"the parent row {parent['id']}'s transformed program is not this row's program")
    if [s["key"] for s in parent["state"]["path"]] + [parent["step"]["key"]] != [s["key"] for s in path]:
        report.add(where, f"state.path is not the parent row {parent['id']}'s path and step")
    root, problem = _root(r, by_id)
    if root is None:
        return report.add(where, problem)
    program = program_from_json(root["program"])
    keys: tuple = (root["id"],)
    for i, rec in enumerate(path):
        keys = keys + (rec["key"],)
        got = replayed.get(keys)
        if got is None:
            try:
                got = engine.apply(program, Step.from_json(rec))
            except LeirError as e:
                return report.add(where, f"state.path[{i}] ({rec['strategy']}, rule {rec['rule']} at "
                                         f"{rec['site']}): replay: {e.message}")
            if got.to_leir() != rec["leir"]:
                return report.add(where, f"state.path[{i}] ({rec['strategy']}, rule {rec['rule']}): Engine.apply "
                                         "gives another program than the step's recorded leir")
            got = program_from_json(got.to_json())       # each step applies to the record of the one before
            if len(replayed) > 4096:
                replayed.clear()
            replayed[keys] = got
        program = got
    if program.to_json() != r["program"]:
        return report.add(where, "state.path replayed from the source program gives another program than the "
                                 "row's")
    report.ok("states replayed")


def _check_noop(no: int, r: dict, options: dict, report) -> None:
    from ..generate.noop import noop_on_target
    cuda = r.get("cuda") or {}
    want = noop_on_target(r["tir"]["target"], cuda.get("original"), cuda.get("transformed"))
    if r["noop_on_target"] != want:
        report.add(_where(no, r), f"noop_on_target is {r['noop_on_target']}, the row's CUDA texts say {want}")
    elif want and not options.get("keep_noop"):
        report.add(_where(no, r), "a row that changes nothing on the target, in a job made without --keep-noop")
