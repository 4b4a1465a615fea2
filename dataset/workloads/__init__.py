"""The workload library: the paper's program types with seeded randomised shapes and dtypes.

Categories (dataset.md §1): single operators (KernelBench level 1), popular blocks,
attention variants, and composites of 2-5 components. Every type has default shapes, a
reduced "test shape" for fast checks, and a set of size parameters that ``sample`` draws
from a seeded generator (the dtype from f16/f32/f64). Nothing is downloaded.

    from dataset.workloads import registry, instantiate
    w = registry()["softmax"]
    inst = instantiate(w, w.test_shapes, "f32")      # .model, .inputs(seed), .name
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Optional

from .workload import Workload

DTYPES = ("f16", "f32", "f64")
CATEGORIES = ("operator", "block", "attention", "composite")


@dataclass
class Instance:
    """A workload at concrete shapes and dtype, ready to translate and verify."""

    workload: Workload
    shapes: dict
    dtype: str
    model: object
    _make: Callable = field(repr=False)

    @property
    def name(self) -> str:
        return self.workload.name

    def inputs(self, seed: int = 0) -> tuple:
        """Inputs drawn under ``torch.manual_seed(seed)``, cast to the instance dtype."""
        import torch

        from ..translate.kernelbench import cast_inputs
        torch.manual_seed(seed)
        return cast_inputs(tuple(self._make()), self.dtype)


_REGISTRY: dict[str, Workload] = {}


def registry() -> dict[str, Workload]:
    """Every program type by name (imports torch on first use)."""
    if not _REGISTRY:
        from . import attention, blocks, composites, operators  # noqa: F401 - they register
        for mod in (operators, blocks, attention, composites):
            for w in mod.WORKLOADS:
                if w.name in _REGISTRY:
                    raise ValueError(f"duplicate workload name {w.name}")
                _REGISTRY[w.name] = w
    return dict(_REGISTRY)


def instantiate(w: Workload, shapes: Optional[dict] = None, dtype: str = "f32", seed: int = 0) -> Instance:
    """Build ``w`` at ``shapes`` (default shapes if None); parameters are seeded by ``seed``."""
    import torch

    from ..translate.kernelbench import torch_dtype
    shapes = dict(w.shapes if shapes is None else shapes)
    torch.manual_seed(seed)
    model, make = w.build(shapes)
    model = model.to(torch_dtype(dtype))
    return Instance(w, shapes, dtype, model, make)


def sample(w: Workload, seed: int, max_scale: float = 2.0) -> tuple[dict, str]:
    """Seeded random shapes (each varied size in [default/2, default*max_scale]) and a dtype."""
    rng = random.Random(f"{w.name}:{seed}")
    shapes = dict(w.shapes)
    for k in w.vary:
        v = w.shapes[k]
        shapes[k] = rng.randint(max(1, v // 2), max(1, int(v * max_scale)))
    return shapes, rng.choice(DTYPES)
