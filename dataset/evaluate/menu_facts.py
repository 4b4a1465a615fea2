"""What a menu's measurements can tell choosers apart by (pure functions of a menu row).

A menu counts in the comparison (``non-trivial``) when it shows at least two entries and at least
one **decisive pair**: two timed entries whose order the timing settles. With intervals (every
timed entry of a ``--time`` dataset has one) that is the rule of the pairwise examples
(``dataset.text.pairwise.faster_of``): one's interval lies above the other's by more than the noise
floor. Entries without intervals (hand-made rows) fall back to their verdicts: a pair is decisive
when the verdicts differ (faster > tie > slower) and the speedups agree with them. Any chooser is
right on a one-entry menu, and a menu whose timings tie cannot tell a good chooser from a bad one:
such menus are counted apart, with the reason (``LEFT_OUT``).

Regret of a choice: best measured speedup / the chosen entry's. A choice the timing cannot rank
(an entry that failed verification or was not timed) and an answer that names no entry are
charged the menu's largest regret, that of its slowest timed entry, so that every chooser has a
regret on every counted menu and none gains by answering off the menu.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

ONE_ENTRY, UNTIMED, TIED = "one entry", "fewer than two timed entries", "no decisive pair"
LEFT_OUT = (ONE_ENTRY, UNTIMED, TIED)
_VERDICT_RANK = {"faster": 2, "tie": 1, "slower": 0}


@dataclass(frozen=True)
class Pick:
    """One chooser's answer to one menu: the entry it names (None: no entry, e.g. an answer off
    the menu) and, for a chooser that ranks every entry, its ranking (entry numbers, best first)."""
    choice: int | None
    ranking: tuple[int, ...] | None = None


@dataclass(frozen=True)
class MenuFacts:
    id: str
    size: int                                   # entries shown
    speedups: tuple                             # per entry (number - 1): measured speedup, or None
    strategies: tuple                           # per entry: its strategy ("" when the row does not say)
    decisive: tuple[tuple[int, int], ...]       # (faster, slower) entry numbers, in entry order
    left_out: str | None                        # why the menu is not counted (``LEFT_OUT``), None when it is

    @property
    def best(self) -> float | None:
        timed = [s for s in self.speedups if s is not None]
        return max(timed) if timed else None

    @property
    def worst_regret(self) -> float | None:
        timed = [s for s in self.speedups if s is not None]
        return self.best / min(timed) if timed else None

    def timed(self, number) -> bool:
        return isinstance(number, int) and 1 <= number <= self.size and self.speedups[number - 1] is not None

    def hit(self, number) -> bool:
        """Whether the choice is an entry of the highest measured speedup (ties all count)."""
        return self.timed(number) and self.speedups[number - 1] == self.best

    def regret(self, number) -> float:
        """best / chosen speedup; the menu's largest regret for a choice the timing cannot rank."""
        return self.best / self.speedups[number - 1] if self.timed(number) else self.worst_regret

    def log_regret(self, number) -> float:
        return math.log(self.regret(number))


def _speedup(e: dict):
    sp = e.get("speedup")
    return sp if e.get("verified", True) and isinstance(sp, (int, float)) and sp > 0 else None


def _interval_view(e: dict):
    """The entry as ``pairwise.faster_of`` reads it, or None without a recorded interval."""
    t = e.get("timing") or {}
    ci = t.get("ci") or e.get("ci")
    if not ci or t.get("noise_floor") is None:
        return None
    return {"ci": ci, "timing": {"noise_floor": t["noise_floor"]}}


def faster_of(a: dict, b: dict):
    """The entry (``a`` or ``b``) whose timing is decisively faster, or None (see the module)."""
    from ..text.pairwise import faster_of as by_intervals
    va, vb = _interval_view(a), _interval_view(b)
    if va is not None and vb is not None:
        won = by_intervals(va, vb)
        return None if won is None else (a if won is va else b)
    ra, rb = _VERDICT_RANK.get(a.get("verdict")), _VERDICT_RANK.get(b.get("verdict"))
    if ra is None or rb is None or ra == rb:
        return None
    fast, slow = (a, b) if ra > rb else (b, a)
    return fast if _speedup(fast) > _speedup(slow) else None


def menu_facts(item: dict) -> MenuFacts:
    """The facts of a menu item (``dataset.evaluate.items``: its ``menu`` entries, numbered 1, 2, ...)."""
    menu = item["menu"]
    speedups = tuple(_speedup(e) for e in menu)
    decisive = []
    for i, a in enumerate(menu):
        for b in menu[i + 1:]:
            if _speedup(a) is None or _speedup(b) is None:
                continue
            fast = faster_of(a, b)
            if fast is not None:
                slow = b if fast is a else a
                decisive.append((fast["number"], slow["number"]))
    timed = sum(1 for s in speedups if s is not None)
    left_out = ONE_ENTRY if len(menu) < 2 else UNTIMED if timed < 2 else TIED if not decisive else None
    return MenuFacts(item["id"], len(menu), speedups, tuple(e.get("strategy") or "" for e in menu),
                     tuple(decisive), left_out)
