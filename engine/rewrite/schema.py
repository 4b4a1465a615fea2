"""The term schema, read from the one place it is written: the ``datatype`` declarations of
rules/leir/terms.egg. ``engine.rewrite.terms`` encodes the AST with these constructors and
tests/test_schema.py checks that every AST node class maps onto them and back.
"""
from __future__ import annotations

from engine.rewrite.rulebook import RULES_DIR, read_sexps
from engine.rewrite.rule_sources import SCHEMA_DIR, SCHEMA_FILES

_PRIMITIVE = {"String": "S", "i64": "I"}


def read_signatures(text: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """constructor -> (sort, argument kinds) of every ``datatype`` / ``datatype*`` form of an
    egglog text; a kind is "S" (String), "I" (i64) or a sort name."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}

    def variants(sort: str, forms) -> None:
        for v in forms:
            name, *args = [a.value for a in v.value]
            out[name] = (sort, tuple(_PRIMITIVE.get(a, a) for a in args))

    for form in read_sexps(text):
        if not form.is_list or not form.value:
            continue
        head = form.value[0].value
        if head == "datatype":
            variants(form.value[1].value, form.value[2:])
        elif head == "datatype*":
            for group in form.value[1:]:
                variants(group.value[0].value, group.value[1:])
    return out


TERMS_FILE = RULES_DIR / SCHEMA_DIR / SCHEMA_FILES[0]
SIGNATURES = read_signatures(TERMS_FILE.read_text())

# constructor -> positions (1-based, after the name) of its term arguments
TERM_ARGS = {name: tuple(i + 1 for i, k in enumerate(kinds) if k not in ("S", "I"))
             for name, (_, kinds) in SIGNATURES.items()}


class Unsupported(Exception):
    """A helper application the Python evaluation cannot decide on this query's terms
    (engine.rewrite.compute gives up); the query falls back to egglog's compute ruleset."""
