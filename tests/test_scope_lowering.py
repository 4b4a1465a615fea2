"""Shared (s) and local (l) neighbours lower for CUDA (strategies.md S18, decision (b)).

The scope guards (ScopeOK / CacheOK / CacheWriteOK, engine/facts.py) must admit exactly what
lowering/tir/placement.py can place inside a kernel: shared memory holds one block's slice, so an `s`
buffer needs a leading blockIdx loop indexing it; no s/l buffer sits in a statement that
reduces across a bound loop (TVM's cross-thread reduction allows no allocation block around
it); a buffer confined to one sub-nest stays global; a statement's shared buffers fit one
block's static shared memory and its local ones one thread's local memory (engine/semantics.py).
Every such neighbour is lowered for CUDA and built to CUDA C source (TVM only: no GPU, no
nvcc), whose arrays are measured against those limits.

Corpus programs carry threadIdx loops only, so their `s` neighbours are reached in two steps:
loop_binding/block first, then the memory strategies.
"""
from __future__ import annotations

import functools
import re

import pytest

from conftest import corpus_records
from rulekit import prog_f32

SCOPED = ["cache_read_write", "set_storage_scope"]
PROGRAMS = 12          # default run: corpus programs, spread over corpus order
PER_PROGRAM = 4        # default run: s/l neighbours per (program, step) kept
BOUND_PER_PROGRAM = 2  # blockIdx-bound programs (loop_binding/block neighbours) per program


@functools.lru_cache(maxsize=None)
def _engine(*strategies):
    from engine.rewrite.enumerator import Enumerator
    return Enumerator(strategies=list(strategies))


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


# element bytes of the C types TVM 0.27 declares arrays with (f16 half, bf16 nv_bfloat16, ...)
C_BYTES = {"bool": 1, "signed char": 1, "uchar": 1, "short": 2, "ushort": 2, "half": 2, "nv_bfloat16": 2,
           "int": 4, "uint": 4, "float": 4, "int64_t": 8, "uint64_t": 8, "double": 8}
ARRAY = re.compile(r"^\s*(__shared__ )?alignas\((\d+)\) ([A-Za-z_0-9 ]+?) \w+\[(\d+)\];", re.M)


def kernel_memory(src: str) -> list[tuple[int, int]]:
    """(shared bytes, local bytes) of each kernel of CUDA source: the sum of its `__shared__` /
    other arrays, each rounded up to its alignment (measured from the source, not the guard)."""
    out = []
    for body in src.split("__global__")[1:]:
        if not re.match(r"[^;{]*\{", body):
            continue  # a declaration, not the kernel's definition
        shared = local = 0
        for sh, align, ctype, n in ARRAY.findall(body):
            size = -(-C_BYTES[ctype] * int(n) // int(align)) * int(align)
            if sh:
                shared += size
            else:
                local += size
        out.append((shared, local))
    return out


ALLOC = re.compile(r'T\.alloc_buffer\(\(([\d, ]*)\), "(\w+)", scope="(shared|local)"\)')
DTYPE_BYTES = {"bool": 1, "bfloat16": 2}


def scoped_bytes(program) -> list[tuple[str, int]]:
    """(scope, bytes) of every shared/local allocation of the program's CUDA TVMScript (the
    lowering's allocated slice; no TVM needed)."""
    from lowering.tir import lower_to_tvmscript
    out = []
    for dims, dtype, scope in ALLOC.findall(lower_to_tvmscript(program, "cuda")):
        n = DTYPE_BYTES.get(dtype) or int(re.sub(r"\D", "", dtype)) // 8
        for d in filter(None, (x.strip() for x in dims.split(","))):
            n *= int(d)
        out.append((scope, n))
    return out


def cuda_failure(nb) -> str | None:
    """None if the neighbour builds to CUDA source with its shared buffers __shared__ and every
    kernel's shared / local arrays within the block / thread limit."""
    from engine.leir.semantics import LOCAL_BYTES_PER_THREAD, SHARED_BYTES_PER_BLOCK
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
    for shared, local in kernel_memory(src):
        if shared > SHARED_BYTES_PER_BLOCK or local > LOCAL_BYTES_PER_THREAD:
            return f"a kernel holds {shared} bytes of shared and {local} of local arrays"
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


# ------------------------------------------------------------------ the size limits


def fused(n: int, dt: str = "f32", tag: str = "bx", f_scope: str = "g"):
    """E^{dt} (and F, scope ``f_scope``) produced and consumed inside one statement over
    B^{4}_{tag}L^{n}_{a}, indexed [tag, a]: one block's / thread's slice is n elements."""
    e, f = f"E^{{{dt},g}}_{{{tag},a}}", f"F^{{f32,{f_scope}}}_{{{tag},a}}"
    return prog_f32(f"B^{{4}}_{{{tag}=0}}L^{{{n}}}_{{a=0}}[{e}=A^{{f32,g}}_{{{tag},a}}*2;{f}={e}*3;"
                    f"C^{{f32,g}}_{{{tag},a}}={f}+1;];", [("A", [4, n])], [("C", [4, n])])


def scope_rules(p, tensor: str) -> list[str]:
    """The scopes set_storage_scope offers ``tensor``, sorted."""
    return sorted(sc for nb in _engine("set_storage_scope").enumerate(p).neighbours
                  for t, sc in [_tensor_scope(nb)] if t == tensor)


def _tensor_scope(nb) -> tuple:
    params = dict(nb.raw_provenances[0].params)
    return params.get("tensor"), params.get("scope")


def built(nb) -> tuple[int, int]:
    """(shared, local) bytes of the one kernel of the neighbour's CUDA source."""
    from lowering.tir import cuda_source
    assert cuda_failure(nb) is None, cuda_failure(nb)
    (mem,) = kernel_memory(cuda_source(nb.program))
    return mem


def _scoped(p, strategy: str, rule: str, scope: str, tensor: str | None = None) -> list:
    """Neighbours of p by ``rule`` giving ``tensor`` (any, if None) scope ``scope``."""
    return [nb for nb in _engine(strategy).enumerate(p).neighbours if nb.raw_provenances[0].rule == rule
            and _tensor_scope(nb)[1] == scope and tensor in (None, _tensor_scope(nb)[0])]


@pytest.mark.parametrize("dt,n", [("f32", 12288), ("f16", 24576), ("f64", 6144)])
def test_shared_slice_up_to_a_block_of_shared_memory(tvm, dt, n):
    """48 KiB per block (engine/semantics.py SHARED_BYTES_PER_BLOCK, ptxas's static limit): E's
    slice of exactly n elements of dt gets its shared neighbour, which builds with 49152 bytes
    of __shared__ arrays; one element more (ptxas: "uses too much shared data") leaves only l."""
    from engine.leir.semantics import SHARED_BYTES_PER_BLOCK
    assert SHARED_BYTES_PER_BLOCK == 48 * 1024
    assert scope_rules(fused(n, dt), "E") == ["l", "s"]
    assert scope_rules(fused(n + 1, dt), "E") == ["l"]
    (nb,) = _scoped(fused(n, dt), "set_storage_scope", "set_storage_scope", "s", "E")
    assert built(nb) == (SHARED_BYTES_PER_BLOCK, 0)


def test_shared_slices_of_one_statement_add_up(tvm):
    """Every shared buffer of a statement is allocated in its block at once: with E already
    shared, F's 6144 floats fit beside E's (2 x 24 KiB), 6145 do not (each alone would)."""
    def with_e_shared(n):
        (nb,) = _scoped(fused(n), "set_storage_scope", "set_storage_scope", "s", "E")
        return nb.program
    assert scope_rules(with_e_shared(6144), "F") == ["l", "s"]
    assert scope_rules(with_e_shared(6145), "F") == ["l"]
    assert scope_rules(fused(6145), "F") == ["l", "s"]
    (nb,) = _scoped(with_e_shared(6144), "set_storage_scope", "set_storage_scope", "s", "F")
    assert built(nb) == (2 * 6144 * 4, 0)


def mmb(n: int, width: int | None = None):
    """MMB with a reduction of length n over A^{4 x width}: the shared copy of A_{bx,c} holds the
    n elements one block reads."""
    return prog_f32(f"B^{{4}}_{{bx=0}}B^{{8}}_{{tx=0}}L^{{{n}}}_{{c=0}}[D^{{f32,g}}_{{bx,tx}}=D^{{f32,g}}_{{bx,tx}}"
                    f"+A^{{f32,g}}_{{bx,c}}*C^{{f32,g}}_{{c,tx}};];", [("A", [4, width or n]), ("C", [n, 8])],
                    [("D", [4, 8])])


def test_shared_cache_read_sized_by_what_the_block_reads(tvm):
    """cache_read_write/read allocates the copy with its inferred shape: 12288 floats of A per
    block fit (also when A is wider than what the statement reads), 12289 do not."""
    assert _scoped(mmb(12289), "cache_read_write", "cache_read_write/read", "s") == []
    assert len(_scoped(mmb(12289), "cache_read_write", "cache_read_write/write", "s")) == 1
    for p in (mmb(12288), mmb(12288, 20000)):
        (nb,) = _scoped(p, "cache_read_write", "cache_read_write/read", "s")
        assert built(nb) == (12288 * 4, 0)


def test_local_slice_up_to_a_thread_of_local_memory(tvm):
    """512 KiB per thread (LOCAL_BYTES_PER_THREAD, the documented per-thread maximum; ptxas accepts
    more, so only the guard stops it): 131072 floats per thread get the local neighbour, which
    builds with a 524288-byte array; 131073 get none."""
    from engine.leir.semantics import LOCAL_BYTES_PER_THREAD
    assert LOCAL_BYTES_PER_THREAD == 512 * 1024
    assert scope_rules(fused(131072, tag="tx"), "E") == ["l"]
    assert scope_rules(fused(131073, tag="tx"), "E") == []
    (nb,) = _scoped(fused(131072, tag="tx"), "set_storage_scope", "set_storage_scope", "l", "E")
    assert built(nb) == (0, LOCAL_BYTES_PER_THREAD)


# ------------------------------------------------------------------ the corpus


@functools.lru_cache(maxsize=None)
def corpus_programs() -> tuple:
    from engine.leir.files import program_from_json
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


@pytest.mark.long
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
