"""Batched builds: the candidates of one state compiled as one module, one symbol each.

Every ``tvm.compile`` pays fixed costs (the pass pipeline's set-up, an LLVM module and target
machine, a JIT or an object file and a link) that a small candidate's own code hardly adds to.
``build_many`` lowers and parses each program, then compiles them ``batch_size`` at a time into
one IRModule whose functions are ``main_0``, ``main_1``, ...; each ``Built`` names its symbol. A
batch TVM rejects is split in halves until the programs that fail are alone; each of those is
built on its own (``lowering.run.build``: its serial form when the vectorised one is rejected),
the others keep their batch. Results go to the same caches as single builds: this process's (by
renaming key, failures too) and, on llvm, the on-disk cache (one library per batch, one entry per
program). The outputs are bit for bit those of single builds (tests/test_batch_build.py).
"""
from __future__ import annotations

from .build_stages import stage
from .errors import LoweringError

BATCH_SIZE = 8


def build_many(programs: list, target: str = "llvm", arch: str = "sm_90",
               batch_size: int = BATCH_SIZE) -> list:
    """A ``Built`` or the ``LoweringError`` of its build per program, in order. Programs equal
    modulo renaming are built once; cuda programs (and ``batch_size`` 1) one at a time."""
    from .run import build_key, cached

    out: list = [None] * len(programs)
    todo: dict[tuple, list[int]] = {}
    for i, p in enumerate(programs):
        key = build_key(p, target, arch)
        hit = cached(key)
        if hit is not None:
            out[i] = hit
        else:
            todo.setdefault(key, []).append(i)
    if target != "llvm" or batch_size <= 1:
        for idx in todo.values():
            _settle(out, idx, _single(programs[idx[0]], target, arch))
        return out
    compile_now = []            # (key, indices, lowered, PrimFunc, disk material)
    for key, idx in todo.items():
        first = _prepared(programs[idx[0]], key, target, arch)
        if isinstance(first, tuple):
            compile_now.append((key, idx, *first))
        else:
            _settle(out, idx, first)
    for start in range(0, len(compile_now), batch_size):
        for _key, idx, result in _compiled(compile_now[start:start + batch_size], programs, target, arch):
            _settle(out, idx, result)
    return out


def _settle(out: list, idx: list[int], result) -> None:
    for i in idx:
        out[i] = result


def _single(program, target: str, arch: str):
    from .run import build
    try:
        return build(program, target, arch)
    except LoweringError as e:
        return e


def _kept(key: tuple, make):
    """``make()``'s Built or LoweringError, kept in this process's cache under ``key``."""
    from .run import remember
    try:
        result = make()
    except LoweringError as e:
        result = e
    remember(key, result)
    return result


def _prepared(program, key: tuple, target: str, arch: str):
    """(lowered, PrimFunc, disk) of a program to compile in a batch; or its result when it needs no
    compile (an on-disk hit, a failed lowering) or is built on its own (its vectorised form is
    known to fail, or TVM rejects its TIR)."""
    from .run import build_from, cache_material, from_disk, remember
    from .tir import lower_module, prim_func
    try:
        with stage("lowering"):
            low = lower_module(program, target)
    except LoweringError as e:
        remember(key, e)
        return e
    disk = cache_material(low.text, target, arch)
    try:
        hit = from_disk(low, target, disk, True)
        if hit is None:
            with stage("primfunc"):
                f = prim_func(low)
    except LoweringError:       # its vectorised form is known to fail, or TVM rejects its TIR
        return _kept(key, lambda: build_from(program, low, target, arch))
    if hit is not None:
        remember(key, hit)
        return hit
    return low, f, disk


def _compiled(batch: list, programs: list, target: str, arch: str):
    """(key, indices, Built or LoweringError) for each entry of ``batch``, compiled together; a
    rejected batch is halved until its failing programs are alone and built on their own."""
    import tvm

    from .run import Built, _executable, build_from, compile_tir, remember
    if len(batch) == 1:
        key, idx, low, f, disk = batch[0]
        return [(key, idx, _kept(key, lambda: build_from(programs[idx[0]], low, target, arch, prepared=(f, disk))))]
    names = [f"main_{j}" for j in range(len(batch))]
    mod = tvm.IRModule({n: f.with_attr("global_symbol", n) for n, (_, _, _, f, _) in zip(names, batch)})
    try:
        with stage("compile"):
            ex = compile_tir(mod, target, arch)
    except Exception:           # some program of the batch: find it
        half = len(batch) // 2
        return _compiled(batch[:half], programs, target, arch) + _compiled(batch[half:], programs, target, arch)
    disk = [b[4] for b in batch]
    if all(d is not None for d in disk):
        module = disk[0][0].put(ex.mod, [(d[1], n) for d, n in zip(disk, names)])
        if module is not None:
            ex = _executable(module)
    results = []
    for n, (key, idx, low, _, _) in zip(names, batch):
        built = Built(low.text, ex, target, True, low.scratch, low.notes, n)
        remember(key, built)
        results.append((key, idx, built))
    return results
