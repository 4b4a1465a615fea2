"""Program features for the cost model: what makes a loop program fast or slow on a machine,
read from the analysed program and from its lowered TIR text (what actually runs parallel,
vectorised or unrolled is the lowering's decision, so it is read there, not re-derived).

All features are work-weighted shares or log2 counts, so programs of different sizes are
comparable; ``relative`` adds the difference to the original program and the strategies of
the path, which is what lets a model trained on some programs rank steps of another.
"""
from __future__ import annotations

import math
import re

from engine.leir.ast import BinOp, Call, Ref, Var, loop_vars, walk

FEATURES_VERSION = 1

DEFAULT_STRATEGIES = "paper,extra"     # the search's strategy set (SearchOptions.strategies): the prior's path columns

PROGRAM_FEATURES = (
    "log_work",            # log2 of all equation iterations
    "log_bytes_touched",   # log2 of bytes read and written by all equations
    "log_intermediate",    # log2 of the elements of all intermediates
    "intermediates",
    "statements",          # top-level nests (separate passes over memory)
    "equations",
    "reduction_share",     # share of work in reductions
    "parallel_share",      # share of work under a B/P loop
    "vector_share",        # share of work whose innermost loop is V
    "unroll_share",
    "inner_contiguous",    # share of accesses whose last index is the innermost loop variable
    "inner_strided",       # ... that use it in another dimension (strided access)
    "inner_invariant",     # ... that do not use it (reused across the innermost loop)
    "inner_reduction",     # share of work whose innermost loop is a reduction axis
    "log_inner_extent",    # work-weighted log2 extent of innermost loops
    "log_outer_extent",    # work-weighted log2 extent of outermost loops
    "depth",               # work-weighted loop depth
    "expensive_ops",       # work-weighted exp/log/sqrt/erf/div/pow per iteration
    "arith_ops",
    "shared_local",        # intermediates in s or l scope
    "tir_parallel",        # log2 counts of the lowered loops by kind
    "tir_vectorized",
    "tir_unrolled",
    "tir_blocks",
    "tir_lines",
)

_EXPENSIVE_CALLS = {"exp", "log", "sqrt", "erf"}
_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "bool": 1, "i8": 1, "u8": 1, "i16": 2, "u16": 2,
          "i32": 4, "u32": 4, "i64": 8, "u64": 8}


def _lg(x: float) -> float:
    return math.log2(1.0 + max(0.0, x))


def program_features(program, target: str = "llvm") -> list[float]:
    info = program.info
    total = 0.0
    acc = dict.fromkeys(PROGRAM_FEATURES, 0.0)
    refs_total = 0.0
    bytes_touched = 0.0
    for e in info.equations:
        loops = e.loops
        work = float(math.prod(l.extent for l in loops)) if loops else 1.0
        total += work
        kinds = {l.kind for l in loops}
        if e.reduction_axes:
            acc["reduction_share"] += work
        if kinds & {"B", "P"}:
            acc["parallel_share"] += work
        if loops and loops[-1].kind == "V":
            acc["vector_share"] += work
        if "U" in kinds:
            acc["unroll_share"] += work
        inner = loops[-1].var if loops else None
        if loops:
            acc["log_inner_extent"] += work * math.log2(loops[-1].extent)
            acc["log_outer_extent"] += work * math.log2(loops[0].extent)
            if inner in e.reduction_axes:
                acc["inner_reduction"] += work
        acc["depth"] += work * len(loops)
        rs = [e.eq.lhs] + [n for n in walk(e.eq.rhs) if isinstance(n, Ref)]
        for r in rs:
            refs_total += work
            bytes_touched += work * _BYTES.get(r.dtype, 4)
            if inner is None or not r.index:
                acc["inner_invariant"] += work
                continue
            last = r.index[-1]
            if isinstance(last, Var) and last.name == inner:
                acc["inner_contiguous"] += work
            elif any(inner in loop_vars(ix) for ix in r.index):
                acc["inner_strided"] += work
            else:
                acc["inner_invariant"] += work
        ops = list(walk(e.eq.rhs))
        acc["expensive_ops"] += work * sum(1 for n in ops if (isinstance(n, Call) and n.func in _EXPENSIVE_CALLS)
                                           or (isinstance(n, BinOp) and n.op in ("/", "**")))
        acc["arith_ops"] += work * sum(1 for n in ops if isinstance(n, (BinOp, Call)))
    total = max(total, 1.0)
    out = dict(acc)
    for k in ("reduction_share", "parallel_share", "vector_share", "unroll_share", "inner_reduction",
              "log_inner_extent", "log_outer_extent", "depth", "expensive_ops", "arith_ops"):
        out[k] = acc[k] / total
    for k in ("inner_contiguous", "inner_strided", "inner_invariant"):
        out[k] = acc[k] / max(refs_total, 1.0)
    inter = info.intermediates
    out["log_work"] = math.log2(total)
    out["log_bytes_touched"] = _lg(bytes_touched)
    out["log_intermediate"] = _lg(sum(math.prod(b.shape) for b in inter))
    out["intermediates"] = float(len(inter))
    out["shared_local"] = float(sum(1 for b in inter if b.scope in ("s", "l")))
    out["statements"] = float(len(program.body))
    out["equations"] = float(len(info.equations))
    out.update(_tir_counts(program, target))
    return [float(out[k]) for k in PROGRAM_FEATURES]


_TIR_PATTERNS = {"tir_parallel": re.compile(r"T\.parallel\("), "tir_vectorized": re.compile(r"T\.vectorized\("),
                 "tir_unrolled": re.compile(r"T\.unroll\("), "tir_blocks": re.compile(r"T\.sblock\(")}


def _tir_counts(program, target: str) -> dict:
    from lowering.errors import LoweringError
    from lowering.tir import lower_to_tvmscript
    try:
        text = lower_to_tvmscript(program, target)
    except LoweringError:
        return {k: -1.0 for k in (*_TIR_PATTERNS, "tir_lines")}
    out = {k: _lg(len(p.findall(text))) for k, p in _TIR_PATTERNS.items()}
    out["tir_lines"] = _lg(text.count("\n"))
    return out


def feature_names(strategies: tuple[str, ...]) -> list[str]:
    return ([f"{k}" for k in PROGRAM_FEATURES] + [f"d_{k}" for k in PROGRAM_FEATURES] +
            [f"path_{s}" for s in strategies])


def relative(candidate: list[float], original: list[float], path_strategies: list[str],
             strategies: tuple[str, ...]) -> list[float]:
    """The model's input: the candidate's features, their difference to the original's, and
    how often each strategy occurs on the path from the original."""
    counts = [float(path_strategies.count(s)) for s in strategies]
    return list(candidate) + [c - o for c, o in zip(candidate, original)] + counts
