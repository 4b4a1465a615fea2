"""Runs a strategy block's examples as tests: the BEFORE program is enumerated with the block's
strategy, the AFTER program must be among the neighbours (modulo renaming), the step replays
from its JSON record with ``Engine.apply``, and the result verifies against BEFORE at the
block's exactness. A step whose own parameters declare it bitwise (tensor_split's /spatial
variants in a reassociating block) is held to that: exactly.

The verification is the caller's (the engine knows no lowering): ``python -m
lowering.rule_examples`` and tests/test_rule_examples.py hand the checker a ``Verify`` built on
an llvm ``lowering.Verifier``.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Callable

from engine.leir.canonical import renaming_key
from engine.leir.diagnostics import LeirError
from engine.leir.program import Program
from engine.rewrite.examples import Example, param_text


@dataclass(frozen=True)
class ExampleOutcome:
    """What checking one example gave: ``error`` is None when it passed."""

    example: Example
    error: str | None
    line: int                 # where the error points in the rule file
    col: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.error is None


Verify = Callable[[Program, Program, str], "str | None"]
"""``verify(before, after, exactness)``: None when AFTER computes what BEFORE does at that
exactness ("bitwise", "reassociating", ...), else why not (one line)."""


class ExampleChecker:
    """One engine (every strategy of the rules) shared by all examples; ``rules``: a rules
    directory (``Engine(rules)``); ``verify``: see ``Verify``."""

    def __init__(self, verify: Verify, rules=None):
        from engine.rewrite.engine import Engine
        self.engine = Engine(rules)
        self.verify = verify

    def examples(self) -> list[Example]:
        return [ex for s in self.engine.rulebook.strategies for ex in s.examples]

    def check(self, ex: Example) -> ExampleOutcome:
        t0 = time.perf_counter()
        try:
            err, line = self._check(ex)
        except LeirError as e:                   # the example's text does not parse
            return ExampleOutcome(ex, e.message, e.line or ex.line, e.col or 1, time.perf_counter() - t0)
        return ExampleOutcome(ex, err, line, 1, time.perf_counter() - t0)

    def _check(self, ex: Example) -> tuple[str | None, int]:
        before = ex.before_program()
        after = ex.after_program(before)
        strategy = self.engine.strategy(ex.strategy)
        steps = self.engine.enumerate(before, [ex.strategy])
        want = renaming_key(after)
        same = [s for s in steps if renaming_key(s.program) == want]
        pinned = [(s, p) for s in same for p in _provenances(s) if _pins(ex, p)]
        if not pinned:
            return _not_listed(ex, steps, same), ex.after_line
        step, prov = pinned[0]
        record = json.loads(json.dumps({"rule": prov["rule"], "site": prov["site"], "params": prov["params"]}))
        replayed = self.engine.apply(before, record)
        if replayed.to_leir() != step.leir:
            return (f"Engine.apply of {prov['rule']} at site {prov['site']} gives {replayed.to_leir()!r}, "
                    f"not the listed {step.leir!r}"), ex.after_line
        exact = "bitwise" if "bitwise" in (strategy.exactness, prov["exactness"]) else strategy.exactness
        return self.verify(before, replayed, exact), ex.after_line


def _provenances(step) -> list[dict]:
    """The step's own provenance and its alternatives' (each one gives the same program)."""
    out = [{"rule": step.rule, "site": list(step.site), "params": dict(step.params), "exactness": step.exactness}]
    for a in step.alternatives:
        out.append({"rule": a.rule, "site": list(a.site), "params": dict(a.params), "exactness": a.exactness})
    return out


def _pins(ex: Example, prov: dict) -> bool:
    """Does the provenance have the rule and parameters the example's @after names?"""
    if ex.rule is not None and prov["rule"] != ex.rule:
        return False
    return all(k in prov["params"] and param_text(prov["params"][k]) == v for k, v in ex.params)


def _not_listed(ex: Example, steps, same) -> str:
    if same:
        got = "; ".join(f"{p['rule']} " + " ".join(f"{k}={param_text(v)}" for k, v in p["params"].items()
                                                    if k != "new_names")
                        for s in same for p in _provenances(s))
        return f"the @after program is listed, but not by the rule and parameters it names (listed by: {got})"
    shown = "; ".join(f"{s.rule}: {s.leir}" for s in steps[:3])
    return (f"the @after program is not among the {len(steps)} neighbour(s) '{ex.strategy}' gives"
            + (f" (first: {shown})" if steps else ""))


def format_outcome(o: ExampleOutcome) -> str:
    """``file:line:col: error: example ...`` for a failure, a one-line note for a pass."""
    ex = o.example
    if o.ok:
        return f"{ex.file}:{ex.after_line}: ok: example of '{ex.strategy}' ({o.seconds:.2f} s)"
    return f"{ex.file}:{o.line}:{o.col}: error: example of '{ex.strategy}': {o.error}"
