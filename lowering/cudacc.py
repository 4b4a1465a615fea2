"""How generated CUDA C is compiled: IEEE arithmetic, never ``--use_fast_math``.

TVM 0.27 keeps a CUDA module as source and compiles it when it is first loaded, through the
``tvm_callback_cuda_compile`` hook, with ``--use_fast_math`` by default. Fast math turns
``powf`` into ``__powf`` (``exp2(y*log2(x))``: NaN for every negative base, so ``x**2`` of a
negative number is NaN), ``expf``/``logf``/``sqrtf`` and ``/`` into approximations, and flushes
subnormals to zero; none of that is what the llvm build computes, so a result verified on
llvm would say nothing about cuda. The runner therefore compiles with nvcc without fast math
(``--ftz=false --prec-div=true --prec-sqrt=true``; fused multiply-add stays on, as in most
CUDA builds: it changes a result by at most one rounding). Where nvcc is absent, TVM's
NVRTC path is used with the same flags and ``__USE_FAST_MATH__`` undefined.
"""
from __future__ import annotations

import os
import shutil

IEEE_OPTIONS = ["--ftz=false", "--prec-div=true", "--prec-sqrt=true"]
_NVRTC_EXTRA = " ".join(IEEE_OPTIONS + ["-U__USE_FAST_MATH__"])


def cuda_target(arch: str = "sm_90"):
    """The TVM target of a CUDA build for ``arch`` (host code for llvm)."""
    import tvm
    return tvm.target.Target({"kind": "cuda", "arch": arch}, host="llvm")


def nvcc_path() -> str | None:
    return shutil.which("nvcc")


def configure_runtime_compile() -> str:
    """Make the compile TVM runs when a CUDA module is loaded IEEE-accurate; the compiler used."""
    os.environ["TVM_CUDA_NVCC_NO_FAST_MATH"] = "1"
    if nvcc_path() is not None:
        os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"
        return "nvcc"
    extra = os.environ.get("TVM_CUDA_NVRTC_EXTRA_OPTS", "")
    if _NVRTC_EXTRA not in extra:
        os.environ["TVM_CUDA_NVRTC_EXTRA_OPTS"] = (extra + " " + _NVRTC_EXTRA).strip()
    os.environ["TVM_CUDA_COMPILE_MODE"] = "nvrtc"
    return "nvrtc"


def compile_offline(source: str, arch: str = "sm_90", target_format: str = "cubin") -> bytes:
    """Compile CUDA source with nvcc exactly as the runner would (``cubin`` runs ptxas, so it
    catches what only the assembler rejects, such as too much shared memory). No GPU needed.
    Raises ``LoweringError`` when nvcc is missing or fails."""
    import tvm.support.nvcc as nvcc

    from .errors import LoweringError
    if nvcc_path() is None:
        raise LoweringError("nvcc is not on PATH: cannot compile the CUDA source", stage="build")
    configure_runtime_compile()
    with cuda_target(arch):
        try:
            out = nvcc.compile_cuda(source, target_format=target_format, arch=arch, compiler="nvcc",
                                    options=list(IEEE_OPTIONS))
        except Exception as e:
            msg = str(e)
            tail = msg.split("Compilation error:", 1)[-1].strip().splitlines()
            detail = next((l for l in tail if "error" in l.lower()), tail[0] if tail else type(e).__name__)
            raise LoweringError(f"nvcc failed: {detail[:400]}", stage="build") from None
    return bytes(out)
