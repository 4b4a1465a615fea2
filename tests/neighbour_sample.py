"""A seeded sample of one-step neighbours of the public corpus, stratified by strategy, for the
CUDA checks (tests/test_cuda_static.py, tests/test_cuda_crosscheck.py)."""
from __future__ import annotations

import functools
import random
from collections import defaultdict

from conftest import corpus_records

SEED = 14


@functools.lru_cache(maxsize=None)
def corpus_programs(names: tuple | None = None) -> tuple:
    """Corpus programs in file order (only ``names``, in corpus order, when given)."""
    from engine.leir.files import program_from_json
    progs = [program_from_json(r) for r in corpus_records()]
    return tuple(p for p in progs if names is None or p.name in names)


@functools.lru_cache(maxsize=None)
def _engine():
    from engine import Engine
    return Engine()


@functools.lru_cache(maxsize=None)
def _steps(program):
    return tuple(_engine().enumerate(program))


def stratified_neighbours(programs, per_strategy: int, seed: int = SEED) -> list:
    """[(program, step)]: for every strategy, ``per_strategy`` of its neighbours over
    ``programs`` drawn with ``random.Random(seed)`` (all of them when there are fewer), in
    a deterministic order (strategy name, then draw order)."""
    by_strategy = defaultdict(list)
    for p in programs:
        for s in _steps(p):
            by_strategy[s.strategy].append((p, s))
    out = []
    for name in sorted(by_strategy):
        items = by_strategy[name]
        rng = random.Random(f"{seed}:{name}")
        pick = items if len(items) <= per_strategy else [items[i] for i in sorted(rng.sample(range(len(items)), per_strategy))]
        out += pick
    return out
