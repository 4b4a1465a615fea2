"""Load KernelBench-format files: a Python module with ``Model``, ``get_inputs()`` and
``get_init_inputs()``. Module-level shape constants can be overridden before the two
functions are called (``--set batch_size=4``)."""
from __future__ import annotations

import ast as pyast
import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from engine.leir.diagnostics import LeirError

DTYPE_NAMES = {"f16": "float16", "float16": "float16", "half": "float16",
               "f32": "float32", "float32": "float32", "float": "float32",
               "f64": "float64", "float64": "float64", "double": "float64",
               "bf16": "bfloat16", "bfloat16": "bfloat16"}


@dataclass
class Loaded:
    """A KernelBench workload instantiated at concrete shapes."""

    name: str
    module: Any          # the Python module object (get_inputs is called again per trial)
    model: Any           # nn.Module
    inputs: tuple
    dtype: Optional[str]

    def fresh_inputs(self, seed: int) -> tuple:
        """New inputs from the file's own ``get_inputs()`` under ``torch.manual_seed(seed)``."""
        import torch
        torch.manual_seed(seed)
        return cast_inputs(tuple(self.module.get_inputs()), self.dtype)


def _user_error(path: Path, ex: BaseException, what: str) -> LeirError:
    tb = traceback.extract_tb(ex.__traceback__)
    frames = [f for f in tb if Path(f.filename).resolve() == path.resolve()]
    msg = f"{what}: {type(ex).__name__}: {ex}"
    if isinstance(ex, SyntaxError) and ex.lineno:
        return LeirError(msg, ex.lineno, ex.offset or 1, file=str(path), source=_read(path))
    if frames:
        f = frames[-1]
        return LeirError(msg, f.lineno, 1, file=str(path), source=_read(path))
    return LeirError(msg, file=str(path))


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text()
    except OSError:
        return None


def parse_override(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` with VALUE a Python literal (``4``, ``0.5``, ``(3, 3)``, ``'same'``)."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise LeirError(f"--set expects NAME=VALUE, got '{text}'")
    try:
        return name, pyast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        raise LeirError(f"--set {name}: '{value.strip()}' is not a Python literal") from None


def torch_dtype(name: Optional[str]):
    if name is None:
        return None
    import torch
    key = DTYPE_NAMES.get(name)
    if key is None:
        raise LeirError(f"unknown dtype '{name}' (use f16, f32, f64 or bf16)")
    return getattr(torch, key)


def cast_inputs(inputs: tuple, dtype: Optional[str]) -> tuple:
    """Floating-point tensors cast to ``dtype``; everything else unchanged."""
    if dtype is None:
        return tuple(inputs)
    import torch
    td = torch_dtype(dtype)
    return tuple(x.to(td) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)


def load(path: str | Path, overrides: Optional[dict[str, Any]] = None, dtype: Optional[str] = None,
         seed: int = 0) -> Loaded:
    """Import the file, apply ``overrides`` to its module-level constants, build model and inputs."""
    import torch
    path = Path(path)
    if not path.is_file():
        raise LeirError("cannot read file: no such file", file=str(path))
    name = path.stem
    spec = importlib.util.spec_from_file_location(f"_kernelbench_{abs(hash(str(path.resolve())))}", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as ex:  # noqa: BLE001 - anything the user's file raises is a user error
        raise _user_error(path, ex, "importing the file failed") from None
    for fn in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(mod, fn):
            raise LeirError(f"'{path}' is not a KernelBench file: it defines no '{fn}'", file=str(path))
    for k, v in (overrides or {}).items():
        if not hasattr(mod, k):
            raise LeirError(f"--set {k}: the file has no module-level name '{k}'", file=str(path))
        setattr(mod, k, v)
    td = torch_dtype(dtype)
    try:
        torch.manual_seed(seed)
        init = mod.get_init_inputs()
        model = mod.Model(*init)
        if td is not None:
            model = model.to(td)
        torch.manual_seed(seed)
        inputs = cast_inputs(tuple(mod.get_inputs()), dtype)
    except Exception as ex:  # noqa: BLE001
        raise _user_error(path, ex, "building the model or its inputs failed") from None
    sys.modules.pop(spec.name, None)
    return Loaded(name, mod, model, inputs, dtype)
