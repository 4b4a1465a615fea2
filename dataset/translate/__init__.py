"""PyTorch → LEIR translation through ``torch.export`` (see ``graph.py``).

``translate(module, example_inputs, name)`` returns a ``Translation`` (the ``Program`` plus the
values of its parameters/constants); ``python -m dataset.translate FILE.py`` translates a
KernelBench-format file. torch is imported only when a translation runs.
"""
from .graph import Translation, translate

__all__ = ["Translation", "translate"]
