"""What a program type of the library is (the modules of each category declare theirs; the
package's ``registry`` gathers them): a module of its own, so that neither imports the other."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Workload:
    """One program type. ``build(shapes)`` returns ``(model, make_inputs)`` with
    ``make_inputs()`` giving fresh inputs from torch's global generator."""

    name: str
    category: str
    build: Callable
    shapes: dict
    test_shapes: dict
    vary: tuple = ()                 # size parameters that ``sample`` randomises
    components: tuple = ()           # composites: the component names, in order
    notes: str = ""
