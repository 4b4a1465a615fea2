"""Judging one model answer of an evaluation.

A single-step answer is untrusted text: it is parsed with the search's free-form parser (JSON or
Python literals, never executed), its ``transformed_IR`` is read as the body of a program with
the original's known tensors (names, dtypes, shapes: a body that changes them fails analysis),
then built, run and compared with the original over the Verifier's seeded trials. The ladder
(spec lowering.md 8.1): *diff*, the IR text differs from the input; *build*, it compiles;
*exec*, it runs; *equal*, its outputs match. Each rung needs the one before. The engine then
says which single rule step, if any, gives the same program (modulo renaming).

A menu answer names a shown number; it is judged against the row's measured menu.
"""
from __future__ import annotations

from engine.leir.diagnostics import LeirError

# Verdict reason -> the rungs after "diff" it reached
_RUNGS = {"equal": (True, True, True), "not equal": (True, True, False), "execution failed": (True, False, False),
          "build failed": (False, False, False), "invalid input": (False, False, False)}


_ENGINES: dict = {}


def _shared_engine(rules=None):
    """One engine with every strategy per thread and rule set (loading the rules takes seconds)."""
    import threading

    from engine import Engine
    key = (threading.get_ident(), repr(rules))
    if key not in _ENGINES:
        _ENGINES[key] = Engine(rules=rules, strategies="all")
    return _ENGINES[key]


def strategy_name(text: str) -> str:
    """A claimed strategy in the engine's spelling: ``Loop Split`` / ``loop-split`` -> ``loop_split``."""
    return "_".join(str(text).strip().lower().replace("-", " ").split())


def _claimed(names: list, categories: dict) -> list:
    out = []
    for s in names:
        n = strategy_name(s)
        if n:
            out.append([n, categories.get(n, "")])
    return out


def _attempt(status: str, diff=False, build=False, exec_=False, equal=False, **extra) -> dict:
    return {"status": status, "diff": diff, "build": build, "exec": exec_, "equal": equal,
            "claimed": extra.pop("claimed", []), "reached": extra.pop("reached", None),
            "message": extra.pop("message", None)}


class SingleJudge:
    """Judges answers to single-step prompts; keeps one rule engine (on the calling thread:
    egglog's e-graph stays on the thread that made it) and the enumeration of each original."""

    def __init__(self, verifier, tolerance: str = "strict", engine=None, rules=None):
        self.verifier = verifier
        self.rules = rules
        self.tolerance = tolerance
        self._engine = engine
        self._reach: dict[str, dict] = {}          # original LEIR -> {renaming key: step summary}

    @property
    def engine(self):
        if self._engine is None:
            self._engine = _shared_engine(self.rules)
        return self._engine

    def _categories(self) -> dict:
        return {n: self.engine.strategy(n).category for n in self.engine.strategies}

    def reached(self, original, program) -> dict | None:
        """The rule step of ``original`` that gives ``program`` modulo renaming, if one does."""
        from engine.leir.canonical import renaming_key
        text = original.to_leir()
        table = self._reach.get(text)
        if table is None:
            table = {}
            try:
                steps = self.engine.enumerate(original)
            except LeirError:                       # a program the rules cannot read: no step reaches it
                steps = []
            for step in steps:
                table.setdefault(renaming_key(step.program), {"strategy": step.strategy, "category": step.category,
                                                              "rule": step.rule, "key": step.key})
            self._reach = {text: table}             # one original at a time: prompts come grouped
        return table.get(renaming_key(program))

    def judge(self, text: str, original) -> dict:
        from engine.leir.parser import parse_body
        from search.answers import AnswerError, parse_free_answer
        try:
            entry = parse_free_answer(text)[0]
        except AnswerError as e:
            return _attempt(e.reason, message=e.message)
        claimed = _claimed(entry["applied_strategies"], self._categories())
        ir = entry["transformed_IR"].strip()
        if ir == original.to_leir():
            return _attempt("same as original", claimed=claimed)
        try:
            program = original.with_body(parse_body(ir))
        except LeirError as e:
            return _attempt("invalid program", diff=True, claimed=claimed, message=e.message[:300])
        if program.to_leir() == original.to_leir():
            return _attempt("same as original", claimed=claimed)
        reached = self.reached(original, program)
        v = self.verifier.verify(original, program, self.tolerance)
        build, exec_, equal = _RUNGS.get(v.reason, (bool(v.build), bool(v.exec), False))
        return _attempt(v.reason, True, build, exec_, equal and v.equal, claimed=claimed, reached=reached,
                        message=(v.message or None) and v.message[:300])


def judge_menu(text: str, item: dict) -> dict:
    """The chosen entry of a menu answer, whether it is the measured-fastest and its regret."""
    from search.answers import AnswerError, parse_menu_answer
    menu = item["menu"]
    speeds = [e.get("speedup") if e.get("verified", True) else None for e in menu]     # measured entries
    measured = [s for s in speeds if s is not None and s > 0]
    best = max(measured) if measured else None
    out = {"status": "ok", "valid": False, "chosen": None, "agrees": False, "matches_label": False, "regret": None,
           "best_speedup": best, "chosen_speedup": None, "message": None}
    try:
        number = parse_menu_answer(text, len(menu))[0]
    except AnswerError as e:
        return out | {"status": e.reason, "message": e.message}
    sp = speeds[number - 1]
    out.update(valid=True, chosen=number, chosen_speedup=sp, matches_label=number == item.get("answer"))
    if sp is not None and sp > 0 and best is not None:
        out.update(agrees=sp == best, regret=round(best / sp, 6))
    return out
