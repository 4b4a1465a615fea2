"""A program as CUDA: the built module, its C source and its PTX (no GPU needed but for PTX: nvcc)."""
from __future__ import annotations

from ..cudacc import compile_offline, cuda_target
from ..errors import LoweringError
from .api import first_line, lower, pass_config


def cuda_module(program, arch: str = "sm_90"):
    """The built CUDA runtime module of ``program`` (no GPU or nvcc needed)."""
    import tvm
    f = lower(program, "cuda")
    try:
        with tvm.transform.PassContext(config=pass_config("cuda")):
            return tvm.tirx.build(f, target=cuda_target(arch))
    except Exception as e:
        raise LoweringError(f"TVM could not build the CUDA kernel: {first_line(e)}", stage="build") from None


def cuda_source(program, arch: str = "sm_90") -> str:
    """CUDA C source of ``program`` (no GPU or nvcc needed)."""
    return cuda_module(program, arch).imports[0].inspect_source()


def cuda_ptx(source: str, arch: str = "sm_90") -> str:
    """Compile CUDA source to PTX with nvcc (needs ``nvcc`` on PATH)."""
    return compile_offline(source, arch, "ptx").decode()
