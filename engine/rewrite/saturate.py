"""Bounded multi-step exploration over the one-step rules, with explicit limits.

The strategies run in step mode (no unions of program terms), so "saturation" here is a
breadth-first closure of the one-step neighbour relation: level k holds the programs
reachable in exactly k rule steps and not fewer. Every limit is explicit and the runner
says which one stopped it: ``iterations`` (levels), ``nodes`` (distinct programs),
``time`` (seconds) and ``memory`` (MiB of resident memory the exploration added to the process,
checked between expansions: the process may hold far more before it starts).
"""
from __future__ import annotations

import resource
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Limits:
    iterations: int = 2
    nodes: int = 20_000
    time_s: float = 60.0
    memory_mib: int = 4096


@dataclass
class Exploration:
    """Result: parents map each program text to (parent text, provenance) for path recovery."""

    start: str
    levels: list[list[str]] = field(default_factory=list)
    parents: dict[str, tuple] = field(default_factory=dict)
    stop_reason: str = "saturated"
    found: str | None = None
    elapsed_s: float = 0.0
    invalid: int = 0          # rule results that failed re-analysis (rule bugs), left out

    @property
    def nodes(self) -> int:
        return len(self.parents) + 1

    def path(self, text: str) -> list:
        """The steps (``Step``, one provenance each) from the start to ``text`` (empty for the start)."""
        out = []
        while text != self.start:
            parent, prov = self.parents[text]
            out.append(prov)
            text = parent
        return out[::-1]


def _rss_mib() -> float:
    """The process's resident memory now (Linux: /proc/self/statm), else its peak (getrusage): the
    peak never falls, so a process that once held more than a limit would stop every later run."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() / 2 ** 20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def explore(engine, program, limits: Limits = Limits(), target: str | None = None,
            strategies=None, categories=None) -> Exploration:
    """Breadth-first closure from ``program``; stops early when ``target`` text is reached."""
    t0, rss0 = time.perf_counter(), _rss_mib()
    start = program.to_leir()
    ex = Exploration(start, [[start]])
    if target == start:
        ex.found, ex.stop_reason = start, "found"
        return ex
    programs = {start: program}
    frontier = [start]
    for level in range(limits.iterations):
        nxt: list[str] = []
        for text in frontier:
            if time.perf_counter() - t0 > limits.time_s:
                ex.stop_reason = "time"
                break
            if _rss_mib() - rss0 > limits.memory_mib:
                ex.stop_reason = "memory"
                break
            res = engine.enumerate(programs[text], strategies, categories, validate=True)
            ex.invalid += len(res.invalid)
            for nb in res.neighbours:
                t = nb.leir
                if t == start or t in ex.parents:
                    continue
                ex.parents[t] = (text, nb.provenances[0].detached())
                nxt.append(t)
                if t == target:
                    ex.found, ex.stop_reason = t, "found"
                    ex.levels.append(nxt)
                    ex.elapsed_s = time.perf_counter() - t0
                    return ex
                if level + 1 < limits.iterations:
                    programs[t] = nb.program
                if ex.nodes >= limits.nodes:
                    ex.stop_reason = "nodes"
                    break
            if ex.stop_reason != "saturated":
                break
        ex.levels.append(nxt)
        frontier = nxt
        if ex.stop_reason != "saturated":
            break
        if not nxt:
            break
    else:
        ex.stop_reason = "iterations" if frontier else "saturated"
    ex.elapsed_s = time.perf_counter() - t0
    return ex
