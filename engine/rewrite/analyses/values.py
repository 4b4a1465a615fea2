"""Which floating-point values may change by rounding (rules/math.egg, the reassociating
operator and attention rules): the InexactOK fact.
"""
from __future__ import annotations

from engine.leir.ast import Compare, Nest, Ref, equations, refs, walk
from engine.rewrite.analyses.common import nest_equations


FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")


def exact_uses(program) -> set[str]:
    """Tensors whose values flow, through def-use, into an exact use: a comparison operand,
    an index, or the right-hand side of an equation with a non-floating-point result.

    Rounding such a value can flip a comparison (argmax: A >= max(A) holds only for the
    element the max was taken from, bit for bit) or an integer result, so the change is
    not bounded by any tolerance."""
    info = program.info
    eqs = [eq for _, eq in equations(program.body)]
    exact: set[str] = set()
    for eq in eqs:
        for node in [eq.rhs, *eq.lhs.index]:
            for n in walk(node):
                if isinstance(n, Compare):
                    exact |= {r.name for r in refs(n)}
                elif isinstance(n, Ref):
                    exact |= {r.name for i in n.index for r in refs(i)}
        exact |= {r.name for i in eq.lhs.index for r in refs(i)}
        if info.buffers[eq.lhs.name].dtype not in FLOAT_DTYPES:
            exact |= {r.name for r in refs(eq.rhs)}
    grown = True
    while grown:  # backward closure: whatever a statement writing an exact tensor reads
        grown = False
        for eq in eqs:
            if eq.lhs.name in exact:
                new = {r.name for r in refs(eq.rhs)} - exact
                if new:
                    exact |= new
                    grown = True
    return exact


def inexact_ok(program) -> list[str]:
    """(InexactOK X): floating-point tensors none of whose values reach an exact use
    (``exact_uses``), so a reassociating rewrite of an equation writing X changes outputs by
    rounding only. Sorted."""
    exact = exact_uses(program)
    return sorted(name for name, buf in program.info.buffers.items()
                  if buf.dtype in FLOAT_DTYPES and name not in exact)


def value_facts(program, enc, glob: list, per_key: dict) -> None:
    """(InexactOK X) for each such tensor; (InexactWrites s) for each nest every tensor of which
    is InexactOK (the reassociating operator and attention rules)."""
    inexact = inexact_ok(program)
    glob.extend(("InexactOK", name) for name in inexact)
    inexact = set(inexact)
    for key, node in enc.orig.items():
        if isinstance(node, Nest) and key in enc.item_paths and \
                all(eq.lhs.name in inexact for _, eq in nest_equations(node, ())):
            per_key.setdefault(key, set()).add(("InexactWrites",))
