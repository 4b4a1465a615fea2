"""``Step``: one verified-to-be-legal rewrite of a program, named by its provenance.

A step is what a rule did (strategy, rule, site, parameters) and what it gave (the neighbour
program). ``key`` hashes the rule, site and parameters; within the steps of one program it is
unique, so a step can be stored as JSON and replayed exactly with ``Engine.apply``. A
trajectory is a list of steps, each applied to the result of the one before.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

# parameters that are a consequence of the step, not a choice: replay does not need them
DERIVED_PARAMS = ("new_names",)


def step_key(rule: str, site, params: Mapping) -> str:
    """A stable content hash of (rule, site, parameters); derived parameters are left out."""
    ps = sorted((str(k), v) for k, v in params.items() if k not in DERIVED_PARAMS)
    text = json.dumps([rule, [int(i) for i in site], ps], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _frozen(params) -> Mapping:
    if isinstance(params, MappingProxyType):
        return params
    items = params.items() if isinstance(params, Mapping) else params
    return MappingProxyType(dict(items))


@dataclass(frozen=True, eq=False)
class Step:
    """One rewrite of a program. ``program`` (the neighbour) and ``leir`` are computed on first
    use when the step came from an enumeration; a step read from JSON without its base program
    has ``leir`` only."""

    strategy: str
    category: str
    rule: str
    site: tuple[int, ...]
    params: Mapping[str, Any]
    exactness: str
    alternatives: tuple["Step", ...] = ()   # other provenances giving the same program (steps of their own)
    _source: Any = field(default=None, repr=False)     # has .program and .leir: a Neighbour, a LazyProgram
    _leir: str | None = field(default=None, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "site", tuple(int(i) for i in self.site))
        object.__setattr__(self, "params", _frozen(self.params))

    @classmethod
    def trusted(cls, strategy: str, category: str, rule: str, site: tuple, params, exactness: str,
                alternatives: tuple = (), source=None, leir: str | None = None) -> "Step":
        """A step from values already of the right types (a tuple of ints, a tuple of pairs):
        the enumerator makes one per provenance, and the checks of ``__init__`` cost several
        times what the rest does."""
        self = object.__new__(cls)
        object.__setattr__(self, "__dict__", {
            "strategy": strategy, "category": category, "rule": rule, "site": site,
            "params": MappingProxyType(dict(params)), "exactness": exactness, "alternatives": alternatives,
            "_source": source, "_leir": leir})
        return self

    def detached(self) -> "Step":
        """This step without the neighbour it came from (only its text kept): what a long-lived
        record (a search tree, an exploration) should hold, so that the enumeration's tables
        can be freed."""
        if self._source is None:
            return self
        return Step.trusted(self.strategy, self.category, self.rule, self.site, self.params, self.exactness,
                            tuple(a.detached() for a in self.alternatives), None, self.leir)

    @property
    def key(self) -> str:
        return step_key(self.rule, self.site, self.params)

    @property
    def choice(self) -> dict:
        """The parameters that identify the step (rule choices; derived ones left out)."""
        return {k: v for k, v in self.params.items() if k not in DERIVED_PARAMS}

    @property
    def program(self):
        """The rewritten program (``engine.leir.program.Program``)."""
        if self._source is None:
            raise AttributeError("this step was read without its base program: use Engine.apply(program, step)")
        return self._source.program

    @property
    def leir(self) -> str:
        if self._leir is not None:
            return self._leir
        if self._source is None:
            raise AttributeError("this step carries no program text")
        return self._source.leir

    def provenance(self) -> dict:
        """What the rule did, as JSON: strategy, category, rule, site, params, exactness."""
        return {"strategy": self.strategy, "category": self.category, "rule": self.rule,
                "site": list(self.site), "params": dict(self.params), "exactness": self.exactness}

    def to_json(self) -> dict:
        """The record ``python -m engine.enumerate --json`` prints (``leir`` included)."""
        d = self.provenance()
        d["key"] = self.key
        d["leir"] = self.leir
        if self.alternatives:
            d["also"] = [a.provenance() for a in self.alternatives]
        return d

    @classmethod
    def from_json(cls, d: Mapping, base=None) -> "Step":
        """A step from its record (or any dict with ``rule``, ``site`` and ``params``). With
        ``base`` (the program it applies to) and a ``leir`` field, ``program`` is available."""
        from engine.leir.diagnostics import LeirError
        if not isinstance(d, Mapping):
            raise LeirError("a step must be a JSON object with 'rule', 'site' and 'params'")
        missing = [k for k in ("rule", "site") if k not in d]
        if missing:
            raise LeirError(f"step record is missing {', '.join(repr(k) for k in missing)}")
        site, params = d["site"], d.get("params", {})
        if not isinstance(d["rule"], str):
            raise LeirError("step 'rule' must be a string")
        if not isinstance(site, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                          and i >= 0 for i in site):
            raise LeirError(f"step 'site' must be a list of non-negative integers, got {str(site)[:60]}")
        if not isinstance(params, Mapping):
            raise LeirError("step 'params' must be an object")
        alts = tuple(cls(str(a.get("strategy", "")), str(a.get("category", "")), a["rule"], tuple(a["site"]),
                         dict(a.get("params", {})), str(a.get("exactness", "")))
                     for a in d.get("also", ()) if isinstance(a, Mapping) and "rule" in a and "site" in a)
        source = None
        leir = d.get("leir") if isinstance(d.get("leir"), str) else None
        if base is not None and leir is not None:
            source = LazyProgram(base, leir)
        return cls(str(d.get("strategy", "")), str(d.get("category", "")), d["rule"], tuple(site),
                   dict(params), str(d.get("exactness", "")), alts, source, leir)

    def __eq__(self, other) -> bool:
        return isinstance(other, Step) and (self.rule, self.site, self.key) == (other.rule, other.site, other.key)

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        ps = ", ".join(f"{k}={v}" for k, v in self.choice.items())
        return f"Step({self.strategy}: {self.rule} at {list(self.site)}{' ' + ps if ps else ''})"


def step_from_neighbour(nb) -> Step:
    """The step of an enumerated neighbour (``Neighbour.step``): its best provenance, the
    others as alternatives."""
    return nb.step


class LazyProgram:
    """A step's result known by its text: the program is parsed and checked on first use (steps
    read from JSON, or sent back by a worker process)."""

    __slots__ = ("base", "leir", "_program")

    def __init__(self, base, leir: str):
        self.base, self.leir, self._program = base, leir, None

    @property
    def program(self):
        if self._program is None:
            from engine.leir.parser import parse_body
            self._program = self.base.with_body(parse_body(self.leir))
        return self._program
