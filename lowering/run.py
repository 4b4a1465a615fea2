"""Build a lowered program with TVM and run or time it on llvm (CPU) or cuda (GPU).

Outputs and the scratch buffers of intermediates (``lowering.tir.Lowered.scratch``) are
allocated zero-filled before every run, so elements a program never writes read back as 0
rather than as whatever memory held, identically on both targets. CUDA builds run without
TVM's common-subexpression pass (it hoists constants into host variables that become kernel
arguments, and a half-precision scalar argument does not launch) and compile with IEEE math
(``lowering.cudacc``).
"""
from __future__ import annotations

import statistics
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import Optional

import numpy as np

from engine.leir.canonical import renaming_key
from engine.leir.diagnostics import LeirError

from .build_stages import stage
from .builds import EXACT, build_named, llvm_mattr
from .cudacc import cuda_target
from .errors import LoweringError
from .inputs import numpy_dtype
from .tir import TARGETS, first_line, lower_module, pass_config, prim_func


@dataclass(frozen=True)
class Built:
    """A compiled program: the TVMScript it came from, the executable and its target."""

    text: str
    executable: object
    target: str
    vectorized: bool  # False when the vectorised form was rejected by TVM and rebuilt serially
    scratch: tuple = ()   # (name, shape, dtype) of the buffers main takes after the outputs
    notes: tuple = ()     # cuda: (statement, loop, why) for bound loops run serially
    symbol: str = "main"  # the program's function in ``module`` (a batch holds several: lowering.batch_build)
    build: str = EXACT    # which named build (lowering.builds)

    @cached_property
    def module(self):
        """The executable loaded and linked once (``Executable["main"]`` would load it again on
        every call: a few tens of milliseconds, more than a small program's run)."""
        return self.executable.jit()

    @cached_property
    def function(self):
        """The program's function, looked up once (the first lookup runs LLVM's JIT on a module
        compiled in this process; a library from the build cache is already machine code)."""
        with stage("jit"):
            return self.module[self.symbol]

    def timer(self, dev, number: int, repeat: int):
        """``time_evaluator`` of the program's function."""
        return self.module.time_evaluator(self.symbol, dev, number=number, repeat=repeat)


CACHE_SIZE = 128      # compiled programs kept per process (least recently used dropped first)
_CACHE: OrderedDict = OrderedDict()


def clear_build_cache() -> None:
    """Forget every compiled program (this process's; the on-disk cache is ``lowering.build_cache``)."""
    _CACHE.clear()


def build_key(program, target: str, arch: str, build: str = EXACT) -> tuple:
    """What the in-process cache knows a build by: the program modulo renaming, target, arch and
    the named build (``lowering.builds``)."""
    return (renaming_key(program), target, arch, build)


def cached(key: tuple):
    """The ``Built`` (or the ``LoweringError`` its build raised) kept under ``key``, or None."""
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
    return hit


def remember(key: tuple, result) -> None:
    """Keep a ``Built`` or a build's ``LoweringError`` (a failing build fails again: not retried)."""
    if CACHE_SIZE:
        _CACHE[key] = result
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)


def set_build_cache_size(n: int) -> None:
    """Keep at most ``n`` compiled programs (0 disables the cache)."""
    global CACHE_SIZE
    CACHE_SIZE = max(0, int(n))
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)


MCPU_ENV = "LEIR_LLVM_MCPU"
_HOST: dict = {}


def llvm_cpu() -> str:
    """The CPU llvm builds are compiled for: ``$LEIR_LLVM_MCPU`` when set, else LLVM's name of
    this machine's CPU (``rocketlake``, ``znver3``, ...), else ``generic``. A plain ``llvm``
    target is generic x86-64 (SSE2: 4 float lanes, no FMA), whose code runs several times slower
    than what the CPU can run; programs are timed on the machine that builds them."""
    if "cpu" not in _HOST:
        import os

        import tvm
        want = os.environ.get(MCPU_ENV, "").strip()
        if want:
            if not tvm.target.codegen.llvm_is_valid_cpu(want, tvm.target.codegen.llvm_get_system_triple()):
                raise LoweringError(f"{MCPU_ENV}={want!r} is not a CPU LLVM knows for this machine")
            _HOST["cpu"] = want
        else:
            got = str(tvm.target.codegen.llvm_get_system_cpu() or "generic")
            _HOST["cpu"] = got if got else "generic"
    return _HOST["cpu"]


def llvm_target(build: str = EXACT):
    """The TVM target of an llvm build: this machine's CPU (``llvm_cpu``) with the named build's
    attributes (``lowering.builds.llvm_mattr``: exact leaves fused multiply-add out, so every float
    operation rounds as the program says; fast keeps FMA and AVX-512). Where AVX-512 is left,
    LLVM's preference for 256-bit vectors is turned off (``-prefer-256-bit``), so a 16-lane loop of
    floats runs in one 512-bit register."""
    key = "target" if build == EXACT else f"target:{build}"
    if key not in _HOST:
        import tvm
        b = build_named(build)
        cpu = llvm_cpu()
        if cpu == "generic":
            _HOST[key] = tvm.target.Target("llvm")
        else:
            t = {"kind": "llvm", "mcpu": cpu, **({"mattr": list(b.mattr)} if b.mattr else {})}
            mattr = llvm_mattr(build, tvm.target.codegen.llvm_get_cpu_features(tvm.target.Target(t)))
            _HOST[key] = tvm.target.Target({"kind": "llvm", "mcpu": cpu, **({"mattr": mattr} if mattr else {})})
    return _HOST[key]


def tvm_target(target: str, build: str = EXACT, arch: str = "sm_90"):
    """The TVM target of ``target`` ("llvm" or "cuda") in the named ``build`` (``lowering.builds``);
    on cuda both builds are the one CUDA build."""
    if target == "cuda":
        build_named(build)
        return cuda_target(arch)
    return llvm_target(build)


def compile_tir(f, target: str, arch: str = "sm_90", build: str = EXACT):
    """``tvm.compile`` of a lowered PrimFunc with the project's pass options."""
    import tvm
    with tvm.transform.PassContext(config=pass_config(target)):
        return tvm.compile(f, target=tvm_target(target, build, arch))


def build(program, target: str = "llvm", arch: str = "sm_90", build: str = EXACT) -> Built:
    """Compile ``program``. Raises ``LoweringError``.

    Builds are cached (bounded, least recently used first out) by the program modulo a
    consistent renaming of intermediates and loop variables (``engine.leir.canonical``): a
    renamed program computes the same outputs with the same code, so it reuses the build
    (``Built.text`` is then the TVMScript of the program first built); so are failures. llvm
    builds are also kept on disk by their lowered text (``lowering.build_cache``), for every
    process. TVM rejecting the vectorised form is retried serially (``Built.vectorized``).
    ``build``: the named build (``lowering.builds``: exact, the default, or fast)."""
    if target not in TARGETS:
        raise LoweringError(f"unknown target '{target}' (expected {' or '.join(TARGETS)})")
    build_named(build)
    if target == "cuda":          # one CUDA build for both names: compiled once
        build = EXACT
    key = build_key(program, target, arch, build)
    hit = cached(key)
    if isinstance(hit, LoweringError):
        raise LoweringError(hit.message, stage=hit.stage)
    if hit is not None:
        return hit
    try:
        built = _build_fresh(program, target, arch, build)
    except LoweringError as e:
        remember(key, e)
        raise
    remember(key, built)
    return built


def _build_fresh(program, target: str, arch: str, build: str = EXACT) -> Built:
    if target == "cuda":
        from .cudacc import configure_runtime_compile
        configure_runtime_compile()
    with stage("lowering"):
        low = lower_module(program, target)
    return build_from(program, low, target, arch, build=build)


def build_from(program, low, target: str, arch: str, prepared=None, build: str = EXACT) -> Built:
    """Build ``program`` lowered as ``low``; when TVM rejects its vectorised form, its serial form.
    ``prepared``: (PrimFunc, disk) when the caller already parsed ``low`` and looked it up on disk."""
    serial = low.vectorized
    try:
        return build_lowered(low, target, arch, True, retried=serial, prepared=prepared, build=build)
    except LoweringError:
        if not serial:
            raise
    with stage("lowering"):
        low = lower_module(program, target, vectorize=False)
    return build_lowered(low, target, arch, False, build=build)


def cache_material(text: str, target: str, arch: str, build: str = EXACT) -> Optional[tuple]:
    """(on-disk cache, the material of ``text``'s build) when this build is cached on disk, else None."""
    if target != "llvm":
        return None
    from . import build_cache
    cache = build_cache.active()
    if cache is None:
        return None
    return cache, build_cache.material(text, llvm_target(build), pass_config(target))


def from_disk(low, target: str, disk, vectorized: bool, build: str = EXACT) -> Optional[Built]:
    """The build of ``low`` from the on-disk cache (None: not there); raises the ``LoweringError``
    the cache remembers for it."""
    if disk is None:
        return None
    entry = disk[0].get(disk[1])
    if entry is None:
        return None
    if entry.error is not None:
        raise LoweringError(entry.error, stage="build")
    return Built(low.text, _executable(entry.module), target, vectorized, low.scratch, low.notes, entry.symbol, build)


def build_lowered(low, target: str, arch: str, vectorized: bool, retried: bool = False, prepared=None,
                  build: str = EXACT) -> Built:
    """Compile a lowered program (``lowering.tir.Lowered``), through the on-disk cache on llvm.
    ``retried``: a failure is followed by another form of the program, so it is remembered on disk."""
    if prepared is None:
        disk = cache_material(low.text, target, arch, build)
        hit = from_disk(low, target, disk, vectorized, build)
        if hit is not None:
            return hit
        f = None
    else:
        f, disk = prepared
    try:
        if f is None:
            with stage("primfunc"):
                f = prim_func(low)
        with stage("compile"):
            ex = compile_tir(f, target, arch, build)
    except Exception as e:  # TVM build errors
        err = e if isinstance(e, LoweringError) else LoweringError(
            f"TVM could not build the program for {target}: {first_line(e)}", stage="build")
        if disk is not None and retried:
            disk[0].put_error(disk[1], err.message)
        raise err from None
    if disk is not None:
        module = disk[0].put(ex.mod, [(disk[1], "main")])
        if module is not None:
            ex = _executable(module)
    return Built(low.text, ex, target, vectorized, low.scratch, low.notes, build=build)


def _executable(module):
    """A loaded library as ``tvm.compile``'s result type (``jit()`` returns it as it is)."""
    import tvm
    return tvm.runtime.Executable(module)


def device_for(target: str, device=None):
    import tvm
    if device is not None:
        return device
    if target == "cuda":
        dev = tvm.cuda(0)
        if not dev.exist:
            raise LoweringError("no CUDA device is available on this machine", stage="exec")
        return dev
    return tvm.cpu(0)


def arguments(program, inputs: dict, dev, scratch=()):
    """TVM tensors for ``main``: the inputs, then zero-filled outputs and scratch buffers (in that order)."""
    import tvm
    args = []
    for d in program.inputs:
        if d.name not in inputs:
            raise LeirError(f"no input array given for '{d.name}'")
        a = np.asarray(inputs[d.name])
        if tuple(a.shape) != tuple(d.shape):
            raise LeirError(f"input '{d.name}' has shape {list(a.shape)}, the program declares {list(d.shape)}")
        a = np.array(a, dtype=numpy_dtype(d.dtype), order="C", copy=True)  # (ascontiguousarray makes 0-d arrays 1-d)
        args.append(tvm.runtime.tensor(a, dev))
    outs = []
    for d in program.outputs:
        z = np.zeros(tuple(d.shape), dtype=numpy_dtype(d.dtype))
        outs.append(tvm.runtime.tensor(z, dev))
    for _, shape, dtype in scratch:
        z = np.zeros(tuple(shape), dtype=_scratch_dtype(dtype))
        outs.append(tvm.runtime.tensor(z, dev))
    return args, outs


def _scratch_dtype(name: str):
    if name == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return np.dtype(name)


def run_built(built: Built, program, inputs: dict, device=None) -> dict[str, np.ndarray]:
    dev = device_for(built.target, device)
    args, outs = arguments(program, inputs, dev, built.scratch)
    try:
        built.function(*args, *outs)
        if built.target == "cuda":
            dev.sync()
    except Exception as e:
        raise LoweringError(f"execution failed: {first_line(e)}", stage="exec") from None
    return {d.name: o.numpy() for d, o in zip(program.outputs, outs)}


def run_program(program, inputs: dict[str, np.ndarray], target: str = "llvm", device=None,
                arch: str = "sm_90", build_name: str = EXACT) -> dict[str, np.ndarray]:
    """Build (cached; ``build_name``: ``lowering.builds``) and run ``program`` on ``inputs``; the
    outputs by name, as numpy arrays."""
    return run_built(build(program, target, arch, build_name), program, inputs, device)


def time_built(built: Built, program, inputs: dict, device=None, warmup: int = 3, number: int = 3,
               repeat: int = 5) -> list[float]:
    """Milliseconds per run for each of ``repeat`` measurements (each the mean of ``number`` runs),
    after ``warmup`` unmeasured runs, via ``time_evaluator``."""
    dev = device_for(built.target, device)
    args, outs = arguments(program, inputs, dev, built.scratch)
    try:
        fn = built.function
        for _ in range(warmup):
            fn(*args, *outs)
        ev = built.timer(dev, number=number, repeat=repeat)
        res = ev(*args, *outs)
    except Exception as e:
        raise LoweringError(f"timing failed: {first_line(e)}", stage="exec") from None
    return [float(r) * 1000.0 for r in res.results]


def summarize_times(times_ms: list[float]) -> dict:
    return {"time_ms_min": min(times_ms), "time_ms_median": statistics.median(times_ms),
            "time_ms_mean": statistics.fmean(times_ms), "times_ms": list(times_ms)}
