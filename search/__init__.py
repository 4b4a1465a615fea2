"""Multi-step search over the engine's enumerated steps.

A search starts from a program, asks a policy to choose among the legal next steps of a
node (or, for ``llm-free``, to write a program), verifies and measures what it chose, and
keeps only verified candidates as nodes. It ends with the fastest verified program and the
trajectory of steps that explains it. Imported on first use, like ``engine``::

    from engine import load_program
    from search import run_search, SearchOptions
    traj = run_search(load_program("examples/softmax.leir"),
                      SearchOptions(algorithm="greedy", policy="cost", budget=16))
    traj.best["speedup"], traj.best["steps"]
"""
from __future__ import annotations

from engine.plumbing.lazy import lazy_exports

_EXPORTS = {
    "SearchOptions": "search.options",
    "ALGORITHMS": "search.algorithms",
    "POLICIES": "search.policies",
    "run_search": "search.run",
    "Trajectory": "search.trajectory",
    "load_trajectory": "search.trajectory",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
