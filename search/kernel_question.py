"""The kernel search's question: which move of one kernel to measure next.

The kernel search (``search.kernel_search``) decides *where* to look (the slot, and the variant of
its kernel whose moves are open); the run's policy decides *which move* to measure. A question is
one statement's kernel program and its candidate moves (one engine step, or a composite move),
each entry the move and what it changes, in few tokens: a kernel is one statement, so an entry
needs no statement number and its change is short. Entries are shown in a seeded order in which
strategies take turns (seeded by the run's seed and the kernel's renaming key, so the question
asked at a kernel does not depend on the search's path: a dataset asks it without a search).

Nothing is dropped. When every move fits in ``prompt_tokens`` (estimated, ``search.prompt.
estimate_tokens``), the question is one page. Otherwise the page holds the longest prefix of the
order that fits together with one line per strategy whose moves are not all shown ("more
loop_tiling moves (37 not shown)"); choosing such a line asks a second question over that
strategy's moves, then, if they do not fit either, over one site's, then page by page: a
deterministic drill-down (strategy first, then site) that reaches every move.

Pure and light: no run state, no I/O, importable without tvm; ``dataset`` asks the same question
(``dataset.text.kernel_menu``) byte for byte.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Optional

from engine.rewrite.sampling import shuffled_groups, take_turns

from .prompt import PromptOptions, _hardware, estimate_tokens

ENTRY_CHARS = 60           # an entry's text is cut here: the strategy and its parameters name the move, the
PARAM_CHARS = 36           # change (cut first, then long parameters) says what it does to this kernel
MEASURED_SHOWN = 6         # the state's latest measured moves recounted in the question
LEVELS = ("strategy", "site", "page")   # how a page that cannot show every move groups the rest
MIN_SHOWN = 30             # a page shows at least this many moves (or all) before it groups the rest by strategy
KERNEL_TOKENS = 300        # a kernel of many statements (an in-place group) is shown up to about this many tokens


@dataclass(frozen=True)
class KernelMove:
    """One candidate move of a kernel: ``key`` names the variant it gives (its renaming key),
    ``label`` its strategy (or composite name), ``site`` the place it applies, ``text`` the entry
    (after the number)."""

    key: str
    label: str
    site: str
    text: str


@dataclass(frozen=True)
class KernelState:
    """The kernel a question is asked about (a variant of a slot's kernel, or the kernel)."""

    program_name: str          # the whole program's name
    slot: int                  # 0-based slot index and the number of slots
    slots: int
    kernel: object             # the variant's program (one statement, or an in-place group)
    key: str                   # its renaming key
    path: tuple = ()                           # strategies from the slot's kernel to it
    speedup: float = 1.0                       # over the slot's kernel
    measured: tuple = ()                       # "strategy: 1.23x faster" of moves measured from here


def _params(record: dict) -> str:
    from engine.rewrite.steps import DERIVED_PARAMS
    from .fragment import compact_leir
    ps = {k: v for k, v in (record.get("params") or {}).items() if k not in DERIVED_PARAMS and k != "exactness"}
    return compact_leir(", ".join(f"{k}={v}" for k, v in ps.items()))


def kernel_move(key: str, before, after, record: dict, composite: str = "", description: str = "") -> KernelMove:
    """The entry of the move from ``before`` to ``after`` (kernel programs): ``record`` the last
    step's record (strategy, site, params), ``composite`` the composite move's name, if it is one."""
    from .fragment import compact_change
    site = json.dumps(list(record.get("site") or []))
    if composite:
        label, params = composite, description
    else:
        label, params = record.get("strategy", ""), _params(record)
    head = f"{label} ({_cut(params, PARAM_CHARS)})" if params else label
    if len(before.body) > 1 and record.get("site"):
        head += f" at statement {record['site'][0] + 1}"
    return KernelMove(key, label, site, f"{head}: {_cut(compact_change(before, after), ENTRY_CHARS - len(head) - 2)}")


def _cut(text: str, n: int) -> str:
    n = max(n, 12)
    return text if len(text) <= n else text[:n - 1].rstrip("…").rstrip() + "…"


# ------------------------------------------------------------------ pages


@dataclass(frozen=True)
class Line:
    """A numbered line of a page: a move (``move``: its index in the question's moves) or a
    drill-down (``more``: the indices of the moves it opens, ``level`` the grouping below)."""

    text: str
    move: Optional[int] = None
    more: tuple = ()
    level: int = 0


@dataclass(frozen=True)
class Page:
    lines: tuple
    messages: tuple            # the chat request (system, user)
    level: int                 # how this page's hidden moves are grouped (LEVELS)
    subset: tuple              # the move indices this page is about

    @property
    def size(self) -> int:
        return len(self.lines)

    @property
    def shown_moves(self) -> list[int]:
        return [ln.move for ln in self.lines if ln.move is not None]

    def numbers(self) -> list[int]:
        return list(range(1, len(self.lines) + 1))

    def chars(self) -> int:
        return sum(len(m["content"]) for m in self.messages)

    def tokens(self) -> int:
        return sum(estimate_tokens(m["content"]) for m in self.messages)


INTRO = ("Kernel search: the program {name} runs as {slots} kernel(s), one per statement, each optimised on its "
         "own; the fastest variants are composed back.")


def kernel_text(kernel) -> str:
    """The kernel's LEIR, its statements after about ``KERNEL_TOKENS`` estimated tokens left out
    (an in-place group can hold a dozen statements; the moves name their statement)."""
    from engine.leir.printer import item_to_str
    out, used = [], 0
    body = [item_to_str(n) for n in kernel.body]
    for i, st in enumerate(body):
        used += estimate_tokens(st)
        if out and used > KERNEL_TOKENS:
            return "".join(out) + f"… ({len(body) - i} more statements)"
        out.append(st)
    return "".join(out)


def _header(state: KernelState, options: PromptOptions) -> str:
    k = state.kernel
    parts = [INTRO.format(name=state.program_name.replace("_", " "), slots=state.slots),
             f"The current kernel (kernel {state.slot + 1} of {state.slots}): '{kernel_text(k)}', with "
             + ", ".join(f"{d.name} {d.dtype}{list(d.shape)}" for d in k.known) + "."]
    if state.path:
        parts.append(f"It is {state.speedup:.3g}x as fast as the statement's original kernel, reached by "
                     + ", ".join(state.path) + ".")
    if state.measured:
        parts.append("Moves of this kernel measured so far: " + "; ".join(state.measured[-MEASURED_SHOWN:]) + ".")
    return "\n\n".join(parts + _hardware(options.target, options.gpu_name))


MOVES_INTRO = ("The legal moves of the current kernel, with what they change (a tensor in global memory is "
               "written without ^{dtype,g}):")
TASK = ("**Task**:\n\nChoose the ONE move above that will most reduce the kernel's run time. Answer with its "
        "number only.")
TASK_MORE = ("**Task**:\n\nChoose the ONE move above that will most reduce the kernel's run time (a \"more\" line "
             "lists moves not shown). Answer with its number only.")


def _more_text(level: int, label: str, site: str, hidden: int) -> str:
    if LEVELS[level] == "strategy":
        return f"more {label} moves ({hidden} not shown)"
    if LEVELS[level] == "site":
        return f"more {label} moves at site {site} ({hidden} not shown)"
    return f"more moves ({hidden} not shown)"


class KernelQuestion:
    """The question at one kernel state over its candidate ``moves`` (``KernelMove``), within
    ``budget`` estimated tokens a page; ``seed`` and the state's key order the entries."""

    def __init__(self, state: KernelState, moves: list, options: Optional[PromptOptions] = None, *,
                 budget: int = 2000, seed: int = 0):
        self.state = state
        self.moves = list(moves)
        self.options = options = options or PromptOptions()
        self.budget = budget
        rng = random.Random(f"kernel:{seed}:{state.key}")
        by_key = sorted(range(len(self.moves)), key=lambda i: (self.moves[i].key, i))   # the order given is no input
        groups = shuffled_groups(by_key, lambda i: self.moves[i].label, rng)
        self.order = take_turns(groups)          # the display order: strategies taking turns
        self._rank = {m: r for r, m in enumerate(self.order)}
        self._header = _header(state, options)
        self._tokens: dict[int, int] = {}
        self._head_tokens = estimate_tokens(options.system_prompt) + estimate_tokens(self._header) + \
            estimate_tokens(MOVES_INTRO) + estimate_tokens(TASK_MORE) + 8

    # ------------------------------------------------------------------ building pages

    def first(self) -> Page:
        return self.page(tuple(self.order), 0)

    def _groups(self, subset: tuple, level: int) -> list[tuple[str, tuple]]:
        """The subset's moves grouped at ``level`` (group key, members in display order)."""
        if LEVELS[level] == "page":
            return [("", subset)]
        by: dict[str, list] = {}
        for i in subset:
            m = self.moves[i]
            by.setdefault(m.label if LEVELS[level] == "strategy" else m.site, []).append(i)
        return [(k, tuple(v)) for k, v in by.items()]

    def page(self, subset: tuple, level: int) -> Page:
        """The page of the moves ``subset`` (display order): all of them when they fit, else the
        longest prefix that fits with a "more" line per group not wholly shown."""
        subset = tuple(sorted(subset, key=self._rank.__getitem__))
        while level < len(LEVELS) - 1 and len(self._groups(subset, level)) == 1 and not self._fits(subset, ()):
            level += 1                        # one group: it is the whole subset, group one level down
        if self._fits(subset, ()):
            return self._page([Line(self.moves[i].text, move=i) for i in subset], subset, level)
        groups = self._groups(subset, level)
        n = self._longest_prefix(subset, groups, level)
        shown = set(subset[:n])
        more = [(k, g) for k, g in groups if any(i not in shown for i in g)]
        if n < min(MIN_SHOWN, len(subset)) and LEVELS[level] != "page":
            return self.page(subset, LEVELS.index("page"))   # too many groups to list: page by page
        lines = [Line(self.moves[i].text, move=i) for i in subset[:n]]
        shown = set(subset[:n])
        for _k, g in more:
            hidden = tuple(i for i in g if i not in shown)
            text = self._more(level, g, len(hidden))
            if LEVELS[level] == "page":       # the next page: what this one left out
                lines.append(Line(text, more=hidden, level=level))
            else:                             # the group's moves, grouped one level down
                lines.append(Line(text, more=g, level=level + 1))
        return self._page(lines, subset, level)

    def _more(self, level: int, group: tuple, hidden: int) -> str:
        m = self.moves[group[0]]
        return _more_text(level, m.label, ".".join(str(i) for i in json.loads(m.site)), hidden)

    def _line_tokens(self, text: str) -> int:
        return estimate_tokens(f"100. {text}") + 1

    def _move_tokens(self, i: int) -> int:
        t = self._tokens.get(i)
        if t is None:
            t = self._tokens[i] = self._line_tokens(self.moves[i].text)
        return t

    def _fits(self, moves: tuple, more: list, level: int = 0) -> bool:
        total = self._head_tokens + sum(self._move_tokens(i) for i in moves)
        total += sum(self._line_tokens(self._more(level, g, 999)) for _k, g in more)
        return total <= self.budget

    def _longest_prefix(self, subset: tuple, groups: list, level: int) -> int:
        """The most moves of ``subset`` (a prefix) that fit with a "more" line for each group
        not wholly among them (0 when none do)."""
        pos = {i: p for p, i in enumerate(subset)}
        last = sorted((max(pos[i] for i in g), self._line_tokens(self._more(level, g, 999))) for _k, g in groups)
        more_total = sum(t for _p, t in last)     # every group open
        total, j, best = self._head_tokens, 0, 0
        for n in range(len(subset) + 1):          # n moves shown: groups whose last member is below n are whole
            while j < len(last) and last[j][0] < n:
                more_total -= last[j][1]
                j += 1
            if total + more_total <= self.budget:
                best = n
            if n < len(subset):
                total += self._move_tokens(subset[n])
        return best

    def _page(self, lines: list, subset: tuple, level: int) -> Page:
        more = any(ln.move is None for ln in lines)
        body = "\n".join(f"{n}. {ln.text}" for n, ln in enumerate(lines, 1))
        user = "\n\n".join([self._header, MOVES_INTRO + "\n\n" + body, TASK_MORE if more else TASK])
        messages = ({"role": "system", "content": self.options.system_prompt}, {"role": "user", "content": user})
        return Page(tuple(lines), messages, level, subset)

    # ------------------------------------------------------------------ answers

    def follow(self, page: Page, number: int):
        """("move", index) for a move's number, ("page", Page) for a "more" line's."""
        ln = page.lines[number - 1]
        if ln.move is not None:
            return "move", ln.move
        return "page", self.page(ln.more, ln.level)

    def path_to(self, move: int) -> list[tuple[Page, int]]:
        """The pages asked, with the number answered on each, that lead to ``move`` (the
        dataset's kernel rows: the conversation that chooses it)."""
        out, page = [], self.first()
        for _ in range(len(self.moves) + len(LEVELS) + 1):
            for n, ln in enumerate(page.lines, 1):
                if ln.move == move:
                    out.append((page, n))
                    return out
            for n, ln in enumerate(page.lines, 1):
                if move in ln.more:
                    out.append((page, n))
                    page = self.page(ln.more, ln.level)
                    break
            else:
                raise ValueError(f"move {move} is not reachable")     # cannot happen: every move is on a page
        raise ValueError(f"move {move} is not reachable")


class KernelAsk:
    """What the kernel search hands a policy at a kernel state: the moves open there (``keys``,
    ``labels``: strategy or composite name), the search's own estimate of each move's time
    (``estimates``, ms) and its order (``priorities``, higher first: the cost policy's choice), the
    moves measured from this state so far (``measured``: {"label", "verdict", "ratio"}), the
    slot's index, and the question in words (``question``, built on first use: only a policy that
    reads text pays for it)."""

    def __init__(self, slot: int, keys: list, labels: list, estimates: list, priorities: list, measured: list,
                 build):
        self.slot, self.keys, self.labels = slot, list(keys), list(labels)
        self.estimates, self.priorities, self.measured = list(estimates), list(priorities), list(measured)
        self._build = build
        self._question: Optional[KernelQuestion] = None

    @property
    def question(self) -> KernelQuestion:
        if self._question is None:
            self._question = self._build()
        return self._question

    def __len__(self) -> int:
        return len(self.keys)


def kernel_question(state: KernelState, moves: list, options) -> KernelQuestion:
    """The question of a kernel state with a search's options (``SearchOptions``: seed, target,
    prompt budget and words): the one constructor the kernel search and the dataset call."""
    popts = PromptOptions(algorithm="kernels", target=options.target, gpu_name=options.gpu_name,
                          system_prompt=options.system_prompt, detail="compact", history=False)
    return KernelQuestion(state, moves, popts, budget=options.prompt_tokens, seed=options.seed)


def candidate_move(candidate, before) -> KernelMove:
    """The entry of a ``search.kernel_slots.KernelCandidate`` of the kernel ``before``."""
    return kernel_move(candidate.key, before, candidate.program, candidate.steps[-1].provenance(),
                       candidate.composite, candidate.description)
