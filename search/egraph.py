"""The e-graph of per-statement choices (egglog): each slot's kernel variants are one e-class
(unioned: equal by construction, each verified against the slot's kernel), a program structure
is a term over its slots' e-classes, and every structure is unioned with the root, so the
e-graph holds the product of per-statement choices of every structure without listing it.
Extraction takes the cheapest term under a cost function over e-nodes (a variant's cost is
looked up by its renaming key); the choice is never enumerated program by program.

Terms: ``Prog.structure(sid, Slots.cons(Kernel.variant(key), ... Slots.nil()))``. A kernel
that occurs in two structures (the same statement, the same kernel) is one e-node, so its
e-class and its measurements are shared.
"""
from __future__ import annotations

import json
import math
from typing import Callable, Optional

from egglog import EGraph, Expr, StringLike, i64Like, union
from egglog.deconstruct import get_callable_args, get_callable_fn, get_literal_value


class Kernel(Expr):
    """A kernel variant, named by its renaming key."""

    @classmethod
    def variant(cls, key: StringLike) -> Kernel: ...


class Slots(Expr):
    """The slots of a structure, in statement order."""

    @classmethod
    def nil(cls) -> Slots: ...

    @classmethod
    def cons(cls, head: Kernel, tail: Slots) -> Slots: ...


class Prog(Expr):
    """A program structure: the root (0) or one cross-statement rewrite of it."""

    @classmethod
    def structure(cls, sid: i64Like, slots: Slots) -> Prog: ...


class ChoiceGraph:
    """Structures over slot e-classes. ``cost(key)`` (set per extraction) prices a variant;
    ``math.inf`` keeps it out of the extracted term."""

    def __init__(self):
        self.egraph = EGraph()
        self.root: Optional[Prog] = None
        self.structures: dict[int, list[str]] = {}     # sid -> base key of each slot
        self.members: dict[str, list[str]] = {}        # base key of a slot -> variant keys (base first)
        self._class_of: dict[str, str] = {}            # variant key -> base key of its e-class

    # ------------------------------------------------------------------ building

    def add_structure(self, sid: int, slot_keys: list[str]) -> None:
        """A structure whose slots are the kernels ``slot_keys``; unioned with the root (the
        first structure added)."""
        slots = Slots.nil()
        for k in reversed(slot_keys):
            self._class_of.setdefault(k, k)
            self.members.setdefault(self._class_of[k], [self._class_of[k]])
            slots = Slots.cons(Kernel.variant(k), slots)
        term = Prog.structure(sid, slots)
        self.structures[sid] = [self._class_of[k] for k in slot_keys]
        if self.root is None:
            self.root = term
            self.egraph.register(term)
        else:
            self.egraph.register(union(self.root).with_(term))

    def add_variant(self, base: str, key: str) -> bool:
        """Put variant ``key`` into the e-class of slot kernel ``base``; False when it is there
        already (or in another slot's class: an equal kernel, so the classes are one)."""
        cls = self._class_of.get(base, base)
        if key in self._class_of:
            return False
        self._class_of[key] = cls
        self.members.setdefault(cls, [cls]).append(key)
        self.egraph.register(union(Kernel.variant(cls)).with_(Kernel.variant(key)))
        return True

    def class_of(self, key: str) -> str:
        return self._class_of.get(key, key)

    # ------------------------------------------------------------------ extraction

    def extract(self, cost: Callable[[str], float]) -> tuple[int, list[str], float]:
        """(structure id, the chosen variant key per slot, total cost) of the cheapest term."""
        self.egraph.run(1)                              # rebuild: congruence after the unions

        def model(egraph, expr, children_costs):
            if get_callable_fn(expr) == Kernel.variant:
                (k,) = get_callable_args(expr)
                return float(cost(get_literal_value(k)))
            if get_callable_fn(expr) is None:          # a literal (the key string, the sid)
                return 0.0
            return float(sum(children_costs, 0.0))

        term, total = self.egraph.extract(self.root, include_cost=True, cost_model=model)
        sid_expr, slots = get_callable_args(term)
        keys = []
        while get_callable_fn(slots) == Slots.cons:
            head, slots = get_callable_args(slots)
            (k,) = get_callable_args(head)
            keys.append(get_literal_value(k))
        return int(get_literal_value(sid_expr)), keys, float(total)

    # ------------------------------------------------------------------ size

    def size(self) -> dict:
        """e-nodes and e-classes (egglog's own serialisation, literals left out), against the
        number of programs the e-graph represents (per structure, the product of its slots'
        class sizes; summed over structures)."""
        self.egraph.run(1)
        d = json.loads(self.egraph._serialize().to_json())
        nodes = [n for k, n in d["nodes"].items() if k.startswith("function-")]
        programs = sum(math.prod(len(self.members.get(c, [c])) for c in slots) for slots in self.structures.values())
        return {"enodes": len(nodes), "eclasses": len({n["eclass"] for n in nodes}),
                "kernel_enodes": sum(1 for n in nodes if n["op"] == "Kernel.variant"),
                "structures": len(self.structures), "programs": programs}
