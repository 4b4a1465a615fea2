"""A program lowered to TVMScript (a ``lowering.tir.script``), as a TVM PrimFunc (built directly, or
parsed from the text), and the options of its build."""
from __future__ import annotations

import re

from ..errors import LoweringError
from .statements import Lowered, Lowerer


def lower_module(program, target: str = "llvm", vectorize: bool = True, vector_exp: bool = True) -> Lowered:
    """The TVMScript of ``program`` for ``target`` with the scratch buffers ``main`` takes.
    ``vector_exp=False``: float32 ``exp`` as TVM's ``T.exp`` (one ``expf`` call per lane on llvm), not
    ``lowering.vecmath``'s arithmetic, whose ``T.Let`` MetaSchedule cannot analyse."""
    return Lowerer(program, target, vectorize, vector_exp).run()


def lower_to_tvmscript(program, target: str = "llvm", vectorize: bool = True) -> str:
    """Deterministic TVMScript text of ``program`` for ``target`` ("llvm" or "cuda")."""
    return lower_module(program, target, vectorize).text


def prim_func(lowered: Lowered):
    """The PrimFunc of ``lowered``, built from its script through TVM's IR builder without the
    text (``LoweringError`` if TVM rejects it); structurally equal to ``from_tvmscript(lowered.text)``."""
    from .builder import build
    try:
        return build(lowered.script)
    except LoweringError:
        raise
    except Exception as e:  # TVM raises TVMError, ValueError, ... with long traces
        raise LoweringError(f"TVM rejected the generated TIR: {first_line(e)}", stage="build") from None


def lower_prim_func(program, target: str = "llvm", vectorize: bool = True, vector_exp: bool = True):
    """(PrimFunc, Lowered) of ``program`` for ``target`` without writing or parsing TVMScript text;
    ``Lowered.text`` renders the text when asked, ``Lowered.vectorized`` says whether
    ``vectorize=False`` would lower it differently."""
    lowered = lower_module(program, target, vectorize, vector_exp)
    return prim_func(lowered), lowered


def from_tvmscript(text: str):
    """Parse generated TVMScript into a PrimFunc (``LoweringError`` if TVM rejects it)."""
    import tvm
    try:
        return tvm.script.from_source(text)
    except Exception as e:  # TVM raises DiagnosticError, TVMError, ... with long traces
        raise LoweringError(f"TVM rejected the generated TIR: {first_line(e)}", stage="build") from None


def lower(program, target: str = "llvm", vectorize: bool = True):
    """``program`` as a TVM PrimFunc (via ``tvm.script.from_source``)."""
    return from_tvmscript(lower_to_tvmscript(program, target, vectorize))


def first_line(e: BaseException) -> str:
    """The informative part of a TVM exception message (no C++ backtrace)."""
    text = str(e).strip()
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    lines = [l[len("Traceback: "):] if l.startswith("Traceback: ") else l for l in lines]
    for l in lines:
        if re.search(r"\w+Error: ", l) and not l.startswith(("File", "Traceback", "-->", "|")):
            return l[:400]
    for l in lines:
        if l.lower().startswith("error:"):
            return l[:400]
    return (lines[-1] if lines else type(e).__name__)[:400]


def pass_config(target: str) -> dict:
    """TVM pass options of a build for ``target``: no common-subexpression pass on cuda (it
    hoists constants into host variables that become kernel arguments; nvcc does its own)."""
    return {"tirx.disable_cse_tir": True} if target == "cuda" else {}
