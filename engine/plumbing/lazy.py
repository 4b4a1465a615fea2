"""Package faces whose names import their module on first use (``import engine`` stays cheap:
no egglog, tvm or torch until a name that needs one is read)."""
from __future__ import annotations

import importlib
import sys


def lazy_exports(package: str, exports: dict[str, str]):
    """``(__getattr__, __dir__)`` for the face of ``package``: ``exports`` maps each public name
    to the module defining it; a name is imported when first read, then kept on the package."""
    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted(exports)

    return __getattr__, __dir__
