"""Composite moves: a statement taken through a short sequence of ordinary steps in one move.

A greedy search keeps only steps that are faster on their own, so it rarely reaches what
MetaSchedule builds as one decision on a CPU (a spatial tile, the reduction moved inside it, a
vectorised inner loop, a parallel outer loop): the tile alone is often slower. A composite is
declared as data (``search/composites.toml``, or a file of the user's), and its instances at a
program are found by a bounded depth-first walk over ``Engine.enumerate`` of the intermediate
programs, one strategy at a time. Every instance is a tuple of ordinary ``Step``s, checked to
replay one by one with ``Engine.apply``, so a trajectory holding it replays like any other.
"""
from __future__ import annotations

import time
import tomllib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from engine.leir.ast import Nest, Var, equations, walk
from engine.leir.diagnostics import LeirError

BUILTIN = Path(__file__).with_name("composites.toml")
LOOP_PARAMS = ("loop", "outer", "inner")     # step parameters that name a loop (when their value is a name)
SITES = ("same", "next", "any")
RELATIONS = ("outermost", "innermost", "spatial", "reduction", "created", "moved")
REFERRING = ("created", "moved")              # relations that name an earlier step (":N")


# ---------------------------------------------------------------------------- the table

@dataclass(frozen=True)
class Relation:
    kind: str
    ref: Optional[int] = None     # 1-based step index (created, moved); None: the previous step


@dataclass(frozen=True)
class Constraint:
    """What one parameter of a step may be: a set of values, a numeric range, or loop relations."""

    values: Optional[tuple] = None
    low: Optional[float] = None
    high: Optional[float] = None
    relations: tuple = ()
    ranged: bool = False


@dataclass(frozen=True)
class StepSpec:
    strategy: str
    params: tuple            # ((name, Constraint), ...) in file order
    site: str = "same"


@dataclass(frozen=True)
class Composite:
    name: str
    description: str
    steps: tuple             # StepSpec, ...


def load_table(path=None, strategies=None) -> tuple[Composite, ...]:
    """The composites of a TOML file (the built-in table when ``path`` is None), checked:
    ``strategies`` (the rule book's names) catches a misspelt strategy. Bad entries raise
    ``LeirError`` naming the file and the entry."""
    p = Path(path) if path is not None else BUILTIN
    shown = p.name if path is None else str(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise LeirError(f"composites file not found: {shown}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise LeirError(f"cannot read composites file {shown}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise LeirError(f"{shown}: not valid TOML: {e}") from None
    entries = data.get("composite")
    extra = sorted(set(data) - {"composite"})
    if extra:
        raise LeirError(f"{shown}: unknown top-level key {extra[0]!r} (expected [[composite]] entries)")
    if not isinstance(entries, list) or not entries:
        raise LeirError(f"{shown}: no [[composite]] entries")
    known = set(strategies) if strategies is not None else None
    out, names = [], set()
    for i, entry in enumerate(entries, 1):
        c = _composite(entry, f"{shown}: composite {i}", known)
        if c.name in names:
            raise LeirError(f"{shown}: composite {i} ({c.name}): the name is used twice")
        names.add(c.name)
        out.append(c)
    return tuple(out)


def _composite(entry, where: str, known) -> Composite:
    def need(ok, what):
        if not ok:
            raise LeirError(f"{where}: {what}")
    need(isinstance(entry, dict), "must be a table")
    name = entry.get("name")
    need(isinstance(name, str) and name.strip() and name.replace("-", "").replace("_", "").isalnum(),
         "needs a name of letters, digits, '-' and '_'")
    where = f"{where} ({name})"
    desc = entry.get("description")
    need(isinstance(desc, str) and desc.strip() and "\n" not in desc.strip(), "needs a one-line description")
    unknown = sorted(set(entry) - {"name", "description", "step"})
    need(not unknown, f"unknown key {unknown[0] if unknown else ''!r}")
    steps = entry.get("step")
    need(isinstance(steps, list) and len(steps) >= 1, "needs at least one [[composite.step]] entry")
    specs = tuple(_step(s, f"{where} step {j}", j, known) for j, s in enumerate(steps, 1))
    return Composite(name, desc.strip(), specs)


def _step(d, where: str, index: int, known) -> StepSpec:
    if not isinstance(d, dict):
        raise LeirError(f"{where}: must be a table")
    strategy = d.get("strategy")
    if not isinstance(strategy, str):
        raise LeirError(f"{where}: needs a strategy")
    if known is not None and strategy not in known:
        raise LeirError(f"{where}: unknown strategy {strategy!r}")
    site = d.get("site", "same")
    if site not in SITES:
        raise LeirError(f"{where}: site must be one of {', '.join(SITES)}, got {site!r}")
    params = tuple((k, _constraint(v, f"{where} parameter {k!r}", index))
                   for k, v in d.items() if k not in ("strategy", "site"))
    return StepSpec(strategy, params, site)


def _constraint(v, where: str, index: int) -> Constraint:
    def bad(what):
        raise LeirError(f"{where}: {what}")
    if isinstance(v, list):
        if not v:
            bad("an empty list allows nothing")
        if any(isinstance(x, (dict, list)) for x in v):
            bad("list values must be numbers or strings")
        return Constraint(values=tuple(v))
    if isinstance(v, dict):
        extra = sorted(set(v) - {"min", "max"})
        if extra:
            bad(f"a range has only min and max, not {extra[0]!r}")
        lo, hi = v.get("min"), v.get("max")
        for b in (lo, hi):
            if b is not None and (isinstance(b, bool) or not isinstance(b, (int, float))):
                bad("range bounds must be numbers")
        if lo is None and hi is None:
            bad("a range needs min or max")
        if lo is not None and hi is not None and lo > hi:
            bad(f"empty range (min {lo} > max {hi})")
        return Constraint(low=lo, high=hi, ranged=True)
    if isinstance(v, str) and v.startswith("@"):
        rels = []
        for word in v.split():
            kind, _, ref = word[1:].partition(":")
            if not word.startswith("@") or kind not in RELATIONS:
                bad(f"unknown relation {word!r} (known: {', '.join('@' + r for r in RELATIONS)})")
            n = None
            if ref:
                if kind not in REFERRING or not ref.isdigit():
                    bad(f"{word!r}: only @created and @moved name a step, as @{kind}:N")
                n = int(ref)
            if kind in REFERRING:
                target = n if n is not None else index - 1
                if not 1 <= target < index:
                    bad(f"{word!r} must refer to an earlier step (1..{index - 1})")
            rels.append(Relation(kind, n))
        return Constraint(relations=tuple(rels))
    if isinstance(v, (str, int, float, bool)):
        return Constraint(values=(v,))
    bad(f"unsupported value {v!r}")


# ---------------------------------------------------------------------------- matching

def nest_at(program, site) -> Optional[Nest]:
    """The loop nest a step's site names (a statement, then sub-nests), or None."""
    if not site or site[0] >= len(program.body):
        return None
    node = program.body[site[0]]
    for i in site[1:]:
        if isinstance(node, Nest) and i < len(node.body) and isinstance(node.body[i], Nest):
            node = node.body[i]
        else:
            break
    return node if isinstance(node, Nest) else None


def _written_vars(nest: Nest) -> set:
    """Loop variables that index a tensor the nest writes (its output loops)."""
    out = set()
    for _, eq in equations([nest]):
        for ix in eq.lhs.index:
            out.update(e.name for e in walk(ix) if isinstance(e, Var))
    return out


def _loop_names(step) -> set:
    return {v for k, v in step.params.items() if k in LOOP_PARAMS and isinstance(v, str)}


def _holds(rel: Relation, var: str, nest: Nest, chosen: tuple) -> bool:
    if rel.kind in REFERRING:
        ref = chosen[(rel.ref or len(chosen)) - 1]
        names = set(ref.params.get("new_names", ()) or ()) if rel.kind == "created" else _loop_names(ref)
        return var in names
    if rel.kind == "outermost":
        return bool(nest.loops) and nest.loops[0].var == var
    if rel.kind == "innermost":
        return bool(nest.loops) and nest.loops[-1].var == var
    spatial = var in _written_vars(nest)
    return spatial if rel.kind == "spatial" else not spatial


def _allows(c: Constraint, value, nest, chosen) -> bool:
    if value is None:
        return False
    if c.values is not None:
        return value in c.values
    if c.ranged:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return (c.low is None or value >= c.low) and (c.high is None or value <= c.high)
    if not isinstance(value, str) or nest is None:
        return False
    return all(_holds(r, value, nest, chosen) for r in c.relations)


def _site_after(site, how: str) -> tuple:
    """The site a step constrained by ``how`` rewrites after a step at ``site``: the same nest,
    or the top-level statement after it (where a step that inserts a statement before its site,
    a layout copy or a vectorised reduction's partials, leaves the rest of its work)."""
    site = tuple(site)
    return site if how == "same" else (site[0] + 1,) + site[1:]


def matches(spec: StepSpec, step, program, chosen: tuple) -> bool:
    """Whether an enumerated ``step`` of ``program`` is what ``spec`` asks for after ``chosen``."""
    if step.strategy != spec.strategy:
        return False
    if chosen and spec.site != "any" and tuple(step.site) != _site_after(chosen[-1].site, spec.site):
        return False
    nest = nest_at(program, step.site)
    return all(_allows(c, step.params.get(name), nest, chosen) for name, c in spec.params)


# ---------------------------------------------------------------------------- instances

@dataclass(frozen=True)
class Limits:
    """Bounds of the walk: instances kept per composite, steps followed per level (spread over
    the matching ones), enumerations (one strategy of one program) per composite and program, and
    per program over the whole table, composites in table order (a walk that fails only at its
    last step, a parallel loop in a nest that already has one, spends its whole share)."""

    instances: int = 6
    width: int = 3
    enumerations: int = 40
    table_enumerations: int = 80


@dataclass(frozen=True)
class Instance:
    composite: Composite
    steps: tuple             # engine Steps, each applying to the previous one's program

    @property
    def program(self):
        return self.steps[-1].program


class Enumerations:
    """Steps of (program, strategy), kept in a bounded LRU: the composites of a state share
    their intermediate programs, and a state's menu is asked for more than once."""

    def __init__(self, engine, size: int = 256):
        self.engine = engine
        self.size = size
        self._cache: OrderedDict = OrderedDict()
        self.stats = {"calls": 0, "hits": 0, "seconds": 0.0}

    def steps(self, program, strategy: str) -> list:
        self.stats["calls"] += 1
        if strategy not in self.engine.strategies:
            return []
        key = (program.to_leir(), tuple((d.name, d.dtype, d.shape) for d in program.known), strategy)
        got = self._cache.get(key)
        if got is not None:
            self.stats["hits"] += 1
            self._cache.move_to_end(key)
            return got
        t0 = time.perf_counter()
        got = self.engine.enumerate(program, strategies=[strategy])
        self.stats["seconds"] += time.perf_counter() - t0
        self._cache[key] = got
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return got


def spread(items: list, width: int) -> list:
    """At most ``width`` of ``items``, evenly spaced from first to last (deterministic), so a
    bounded walk sees small and large factors alike."""
    n = len(items)
    if n <= width:
        return list(items)
    if width == 1:
        return [items[0]]
    idx = sorted({round(k * (n - 1) / (width - 1)) for k in range(width)})
    return [items[i] for i in idx]


def instances(composite: Composite, program, enums: Enumerations, limits: Limits = Limits(),
              shared: Optional[list] = None) -> list[Instance]:
    """The composite's instances at ``program``, in a stable order: a depth-first walk over the
    enumerations of the intermediate programs, bounded by ``limits`` (and by ``shared``, a
    one-element list of enumerations left for the rest of a table, decremented)."""
    out: list[Instance] = []
    budget = [limits.enumerations]
    shared = shared if shared is not None else [limits.enumerations]

    def visit(prog, chosen: tuple):
        if len(out) >= limits.instances:
            return
        i = len(chosen)
        if i == len(composite.steps):
            out.append(Instance(composite, chosen))
            return
        if budget[0] <= 0 or shared[0] <= 0:
            return
        budget[0] -= 1
        shared[0] -= 1
        spec = composite.steps[i]
        found = [s for s in enums.steps(prog, spec.strategy) if matches(spec, s, prog, chosen)]
        for s in spread(found, limits.width):
            visit(s.program, chosen + (s,))

    visit(program, ())
    return out


def replays(engine, program, steps) -> bool:
    """Whether each step, applied with ``Engine.apply`` to the previous result, gives back the
    text it was enumerated with."""
    from engine.rewrite.engine import StepError
    for s in steps:
        try:
            program = engine.apply(program, {"rule": s.rule, "site": list(s.site), "params": dict(s.params)})
        except StepError:
            return False
        if program.to_leir() != s.leir:
            return False
    return True


@dataclass
class CompositeMenu:
    """The composite instances of states, for ``search.space.Space``: every composite of the
    table walked at a program, instances that do not replay dropped (counted)."""

    engine: object
    table: tuple
    limits: Limits = Limits()
    enums: Enumerations = None
    stats: dict = field(default_factory=lambda: {"instances": 0, "unreplayable": 0, "seconds": 0.0})

    def __post_init__(self):
        if self.enums is None:
            self.enums = Enumerations(self.engine)

    def of(self, program) -> list[Instance]:
        t0 = time.perf_counter()
        out = []
        shared = [self.limits.table_enumerations]
        for comp in self.table:
            for inst in instances(comp, program, self.enums, self.limits, shared):
                if replays(self.engine, program, inst.steps):
                    out.append(inst)
                else:
                    self.stats["unreplayable"] += 1
        self.stats["instances"] += len(out)
        self.stats["seconds"] += time.perf_counter() - t0
        return out


def resolve(option, policy: str, algorithm: str = "greedy") -> Optional[str]:
    """The table a run uses for ``--composites`` (auto | on | off | FILE): a path, ``""`` for
    the built-in table, or None for none. ``auto``: in the kernel search, the built-in table for
    every policy (a kernel's question shows its composite moves); in the paper's algorithms, the
    built-in table for the policies that pick from the menu by measurement or model (cost,
    measure, random-all), none for the llm policies (the paper's one-step menus, as the dataset's
    menu rows ask) nor for random (it draws from what the llm policy would be shown)."""
    if option in (None, "off"):
        return None
    if option == "on":
        return ""
    if option == "auto":
        if algorithm == "kernels":
            return ""
        return None if policy.startswith("llm") or policy == "random" else ""
    return str(option)
