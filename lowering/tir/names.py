"""How LEIR names and dtypes are written in the generated TVMScript (every stage uses them)."""
from __future__ import annotations

import keyword

from engine.leir.ast import DTYPES

TARGETS = ("llvm", "cuda")
INDENT = "    "
_RESERVED_PY = {"range", "T", "main"}
LAUNCH_VAR = "b_launch"


def py_name(name: str) -> str:
    """A LEIR name as a Python identifier (keywords such as ``in`` or ``None`` get a ``_``)."""
    if keyword.iskeyword(name) or name in _RESERVED_PY:
        return name + "_"
    return name


def block_var(name: str) -> str:
    return "v_" + name


def tvm_dtype(code: str) -> str:
    return DTYPES[code]
