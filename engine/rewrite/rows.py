"""Reading a query's Step rows out of the e-graph, while it still holds the query.

A strategy rule records what it did as a row of ``Step`` (an item replaced), ``StepItems`` (a
statement list continued differently) or ``StepExpr``: the left-hand side, the right-hand
side built with helper terms, the rule's name and its parameters. Decoding turns the e-class
ids into interned keys (helpers evaluated on the way, engine.rewrite.compute) so that the
splicer works on structure only.
"""
from __future__ import annotations

from typing import NamedTuple

from engine.rewrite.decode import Decoder

STEP_RELATIONS = ("Step", "StepItems", "StepExpr")


class StepRow(NamedTuple):
    relation: str          # one of STEP_RELATIONS
    lhs: int               # interned key of what the rule matched
    rhs: int               # interned key of what it built (helpers evaluated)
    rule: str
    params: tuple          # ((key, value), ...) in rule order; a term value is an ExprParam


def decode_rows(eg, interner, enc, compute=None) -> tuple[Decoder, list[StepRow]]:
    """(decoder, Step rows) of the query ``eg`` holds now. ``compute`` (a ``ComputeRules``):
    the compute ruleset was not run, helper terms are evaluated in Python; None: egglog
    saturated it and every e-class has a schema constructor."""
    frozen = eg.freeze()
    dec = Decoder(eg, frozen, interner, enc.orig, compute)
    raw = []
    functions = frozen.functions     # a property that converts every table: read it once
    for rel in STEP_RELATIONS:
        fn = functions.get(rel)
        if fn is None:
            continue
        for row in fn.rows:
            lhs, rhs, rule, params = row.inputs
            raw.append((rel, dec.key_of(lhs), rhs, dec.prim("S", rule), dec.params(params)))
    rows = [StepRow(rel, lk, dec.key_of(rv), rule, ps) for rel, lk, rv, rule, ps in raw]
    dec.release()
    return dec, rows
