"""Shared (s) and local (l) neighbours lower for CUDA (strategies.md S18, decision (b)).

The scope guards (ScopeOK / CacheOK / CacheWriteOK, engine/facts.py) must admit exactly what
lowering/tir.py can place inside a kernel: shared memory holds one block's slice, so an `s`
buffer needs a leading blockIdx loop indexing it; no s/l buffer sits in a statement that
reduces across a bound loop (TVM's cross-thread reduction allows no allocation block around
it); a buffer confined to one sub-nest stays global. Every such neighbour is lowered for CUDA
and built to CUDA C source (TVM only: no GPU, no nvcc).

Corpus programs carry threadIdx loops only, so their `s` neighbours are reached in two steps:
loop_binding/block first, then the memory strategies.
"""
from __future__ import annotations

import functools

import pytest

from conftest import corpus_records
from rulekit import prog_f32

SCOPED = ["cache_read_write", "set_storage_scope"]
PROGRAMS = 12          # default run: corpus programs, spread over corpus order
PER_PROGRAM = 4        # default run: s/l neighbours per (program, step) kept
BOUND_PER_PROGRAM = 2  # blockIdx-bound programs (loop_binding/block neighbours) per program


@functools.lru_cache(maxsize=None)
def _engine(*strategies):
    from engine.enumerate import Engine
    return Engine(strategies=list(strategies))


def scopes(program) -> set[str]:
    return {b.scope for b in program.info.buffers.values() if b.role == "intermediate"} - {"g"}


def scoped_neighbours(p) -> list:
    """(rule, neighbour) of every s/l neighbour of p under the scope-setting strategies."""
    res = _engine(*SCOPED).enumerate(p)
    return [(nb.raw_provenances[0].rule, nb) for nb in res.neighbours if scopes(nb.program)]


def block_bound(p) -> list:
    """The programs one loop_binding/block step from p (a loop bound to blockIdx)."""
    return [nb.program for nb in _engine("loop_binding").enumerate(p).neighbours
            if any(pv.rule == "loop_binding/block" for pv in nb.raw_provenances)]


def spread(items: list, n: int) -> list:
    """n items taken evenly over ``items`` (both ends included), all of them if fewer."""
    if len(items) <= n:
        return list(items)
    return [items[round(k * (len(items) - 1) / (n - 1))] for k in range(n)] if n > 1 else items[:1]


def cuda_failure(nb) -> str | None:
    """None if the neighbour builds to CUDA source with its shared buffers __shared__."""
    from lowering.errors import LoweringError
    from lowering.tir import cuda_source
    try:
        src = cuda_source(nb.program)
    except LoweringError as e:
        return str(e)
    if "__global__" not in src:
        return "no kernel in the CUDA source"
    if "s" in scopes(nb.program) and "__shared__" not in src:
        return "shared buffer is not __shared__ in the CUDA source"
    return None


def failures(items) -> list:
    bad = []
    for label, rule, nb in items:
        err = cuda_failure(nb)
        if err is not None:
            bad.append((label, rule, err, nb.leir[:400]))
    return bad


def _rules(p, strategy) -> dict:
    """{(rule, scope of the new/changed buffer)} -> neighbour texts, for one strategy."""
    out: dict = {}
    for nb in _engine(strategy).enumerate(p).neighbours:
        pv = nb.raw_provenances[0]
        out.setdefault((pv.rule, dict(pv.params).get("scope")), []).append(nb.leir)
    return out


# ------------------------------------------------------------------ the guard

MM = "B^{4}_{tx=0}L^{8}_{a=0}L^{6}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];"
MMB = "B^{4}_{bx=0}B^{8}_{tx=0}L^{6}_{c=0}[D^{f32,g}_{bx,tx}=D^{f32,g}_{bx,tx}+A^{f32,g}_{bx,c}*C^{f32,g}_{c,tx};];"


def one(tag: str):
    """E produced and consumed inside one statement whose bound loop ``tag`` indexes it."""
    return prog_f32(f"B^{{4}}_{{{tag}=0}}L^{{8}}_{{a=0}}[E^{{f32,g}}_{{{tag},a}}=A^{{f32,g}}_{{{tag},a}}*2;"
                    f"C^{{f32,g}}_{{{tag},a}}=E^{{f32,g}}_{{{tag},a}}+1;];", [("A", [4, 8])], [("C", [4, 8])])


def test_no_shared_neighbour_without_a_block_loop():
    """MM and ONE bind threadIdx only: local copies/scopes are offered, shared never."""
    mm = prog_f32(MM, [("A", [4, 6]), ("C", [6, 8])], [("D", [4, 8])])
    got = _rules(mm, "cache_read_write")
    assert {sc for _, sc in got} == {"l"}, got
    assert [sc for _, sc in _rules(one("tx"), "set_storage_scope")] == ["l"]


def test_shared_neighbours_under_a_block_loop(tvm):
    """With bx leading, A_{bx,c} (indexed by bx) gets a shared copy and D a shared cache write;
    C_{c,tx} (not indexed by bx) gets none; every one of them builds with __shared__ memory."""
    mmb = prog_f32(MMB, [("A", [4, 6]), ("C", [6, 8])], [("D", [4, 8])])
    got = _rules(mmb, "cache_read_write")
    assert got[("cache_read_write/read", "s")] == [
        "B^{4}_{bx=0}B^{8}_{tx=0}L^{6}_{c=0}[E^{f32,s}_{bx,c}=A^{f32,g}_{bx,c};"
        "D^{f32,g}_{bx,tx}=D^{f32,g}_{bx,tx}+E^{f32,s}_{bx,c}*C^{f32,g}_{c,tx};];"]
    assert got[("cache_read_write/write", "s")] == [
        "B^{4}_{bx=0}B^{8}_{tx=0}L^{6}_{c=0}[E^{f32,s}_{bx,tx}=E^{f32,s}_{bx,tx}+A^{f32,g}_{bx,c}*C^{f32,g}_{c,tx};"
        "D^{f32,g}_{bx,tx}=E^{f32,s}_{bx,tx};];"]
    assert sorted(sc for _, sc in _rules(one("bx"), "set_storage_scope")) == ["l", "s"]
    # a block loop behind the thread loop still owns the slice; the threads share it
    tb = prog_f32("B^{4}_{tx=0}B^{3}_{bx=0}L^{8}_{a=0}[E^{f32,g}_{bx,tx,a}=A^{f32,g}_{bx,tx,a}*2;"
                  "C^{f32,g}_{bx,tx,a}=E^{f32,g}_{bx,tx,a}+1;];", [("A", [3, 4, 8])], [("C", [3, 4, 8])])
    assert sorted(sc for _, sc in _rules(tb, "set_storage_scope")) == ["l", "s"]
    items = [(p.name, r, nb) for p in (mmb, one("bx"), tb) for r, nb in scoped_neighbours(p)]
    assert sum("s" in scopes(nb.program) for _, _, nb in items) == 4
    assert failures(items) == []


def test_no_shared_when_the_block_loop_does_not_index_the_buffer():
    """E_{a} under B^{4}_{bx}: every block would need all of E, not one slice."""
    p = prog_f32("B^{4}_{bx=0}L^{8}_{a=0}[E^{f32,g}_{a}=A^{f32,g}_{bx,a}*2;C^{f32,g}_{bx,a}=E^{f32,g}_{a}+1;];",
                 [("A", [4, 8])], [("C", [4, 8])])
    assert _rules(p, "set_storage_scope") == {}


def test_no_scoped_buffer_around_a_cross_thread_reduction(tvm):
    """J = J + H_{tx} reduces across threads: a local copy of H_{tx} would put the allocation
    block around TVM's cross-thread reduction (which it rejects); the elementwise statement
    reading H keeps its copy."""
    p = prog_f32("B^{128}_{tx=0}[H^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];B^{128}_{tx=0}[J^{f32,g}=J^{f32,g}+H^{f32,g}_{tx};];"
                 "B^{128}_{tx=0}[C^{f32,g}_{tx}=H^{f32,g}_{tx}+J^{f32,g};];", [("A", [128])], [("C", [128]), ("J", [])])
    items = scoped_neighbours(p)
    texts = [nb.leir for _, nb in items]
    assert texts and all("J^{f32,g}=J^{f32,g}+H^{f32,g}_{tx};" in t for t in texts), texts
    assert failures([(p.name, r, nb) for r, nb in items]) == []


def test_buffer_confined_to_a_sub_nest_stays_global():
    """The lowering allocates in the deepest nest holding every access, under the plain loop a
    that does not index E: no scope is offered."""
    for tag in ("bx", "tx"):
        p = prog_f32(f"B^{{4}}_{{{tag}=0}}L^{{8}}_{{a=0}}[L^{{2}}_{{c=0}}[E^{{f32,g}}_{{{tag},c}}=A^{{f32,g}}_{{{tag},a,c}}*2;"
                     f"C^{{f32,g}}_{{{tag},a,c}}=E^{{f32,g}}_{{{tag},c}}+1;];];", [("A", [4, 8, 2])], [("C", [4, 8, 2])])
        assert _rules(p, "set_storage_scope") == {}


# ------------------------------------------------------------------ the corpus


@functools.lru_cache(maxsize=None)
def corpus_programs() -> tuple:
    from engine.files import program_from_json
    return tuple(program_from_json(r) for r in corpus_records())


def _take(items: list, n) -> list:
    return list(items) if n is None else spread(items, n)


def corpus_items(programs, per_program, bound_per_program) -> list:
    """(label, rule, neighbour) of s/l neighbours: one step from each program, and one step from
    ``bound_per_program`` of its block-bound neighbours; ``per_program`` neighbours of each
    (None: all of them)."""
    items = []
    for p in programs:
        items += [(p.name, r, nb) for r, nb in _take(scoped_neighbours(p), per_program)]
        bound = block_bound(p)
        for q in _take(bound, bound_per_program):
            items += [(p.name + " (bx)", r, nb) for r, nb in _take(scoped_neighbours(q), per_program)]
    return items


@pytest.fixture(scope="module")
def corpus():
    if not corpus_records():
        pytest.skip("corpus not available")
    return corpus_programs()


def test_spread_of_corpus_scoped_neighbours_builds_for_cuda(corpus, tvm):
    items = corpus_items(spread(list(corpus), PROGRAMS), PER_PROGRAM, BOUND_PER_PROGRAM)
    kinds = [scopes(nb.program) for _, _, nb in items]
    assert sum("s" in k for k in kinds) >= 10 and sum("l" in k for k in kinds) >= 40, len(items)
    assert failures(items) == []


@pytest.mark.slow
def test_every_corpus_scoped_neighbour_builds_for_cuda(corpus, tvm):
    """Every s/l neighbour of every corpus program, and of two block-bound neighbours of each."""
    items = corpus_items(corpus, None, BOUND_PER_PROGRAM)
    assert sum("s" in scopes(nb.program) for _, _, nb in items) >= 100
    assert failures(items) == []
