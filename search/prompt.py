"""The search prompt of the paper (Step-TP App. B.2/C.2, the reference's template), plus, for
the menu policy, a numbered menu of the enumerated candidates.

``free_prompt`` reproduces the paper's text for models trained on the reference data (they
write a transformed LEIR). ``menu_prompt`` keeps the paper's description of the state, the
hardware and the history, and replaces the task with a choice among numbered legal steps.

``menu_messages`` / ``free_messages`` are the whole chat request (system + user message) as
pure functions of a state, the ordered candidates and ``PromptOptions``: no run state, no
I/O, deterministic, and importable without the search machinery, so that the dataset's menu
rows are byte for byte what the search sends. One numbering: the candidates are numbered
1..m in the order given; those are the numbers shown, the numbers a constraint allows and
the numbers an answer is read as.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from engine.leir.ast import DTYPES

SYSTEM_PROMPT = "You are a helpful IR optimization assistant."     # the reference's search prompt
MENU_DETAILS = ("compact", "full")

ALGORITHM_TEXT = {"greedy": "Greedy", "beam": "Beam", "bfs": "Breadth-first", "dfs": "Depth-first",
                  "mcts": "Monte Carlo tree search", "chain": "Chain", "chain-no-parent": "Chain"}

# the paper's 43 strategies in the reference generator's order, dead_code_elimination left out
# and normal matmul appended (spec search.md 2.3)
PAPER_STRATEGY_TEXT = (
    "operator fusion, operator fission, compute inline, expression splitting, tensor concat to fuse operators, "
    "tensor split to decouple operators, common subexpression elimination, expression reorder, loop reorder, "
    "loop tiling, loop split, loop fusion, loop unrolling, loop parallelization, loop vectorization, loop binding, "
    "reduction factorization, cache read write, layout transformation, set storage scope, set storage layout, "
    "precompute indices, factorization, expand factorization, cancellation, expand cancellation, apart, together, "
    "powsimp, expand powsimp, expand log, logsimp, collect, expand collect, partially equivalent then correct, "
    "normal loop max to prefix max, exponential split, multiplicative split, additive split, normal loop summation "
    "on exp to prefix summation on exp, online softmax, flashattention wo tiling, normal matmul to prefix matmul "
    "based on online softmax")

# how the paper's prompts (these and the dataset's, dataset.text.row_format) name a LEIR dtype: torch's name
TORCH_DTYPES = {code: f"torch.{name}" for code, name in DTYPES.items()}

CUDA_RULES = (
    "CUDA binding rules: Loop axes bound to block (along x,y,z axis, max dimension value: 2^31-1, 65535, 65535) "
    "MUST be renamed with prefixes bx, by, bz and unique, respectively, followed by other unique lowercase letters. "
    "Loop axes bound to thread (along x,y,z axis, max dimension value: 1024, 1024, 64) MUST be renamed with "
    "prefixes tx, ty, tz, respectively, followed by other unique lowercase letters.\n\n"
    "Memory usage rules: Data indexed by block-level loops may be placed in shared (s) or global (g) memory. "
    "Data indexed by thread-level loops may be placed in local (l), shared (s) or global (g) memory.")

CPU_RULES = (
    "CPU rules: loops bound with B (named tx, bx, ...) and P loops run in parallel across the CPU cores when "
    "their iterations are independent; V loops are vectorised when innermost; U loops are unrolled.")


def _quote_list(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + ", and " + items[-1]


def known_variables(program) -> str:
    return _quote_list([f"'{d.name}' with the dtype {TORCH_DTYPES.get(d.dtype, d.dtype)} and shape {list(d.shape)}"
                        for d in program.known])


def _num(x) -> str:
    return repr(float(x)) if x is not None else "unknown"


def _state(node, parent, history: bool, algorithm: str, root_key: str) -> list[str]:
    prog = node.program
    parts = [f"{ALGORITHM_TEXT[algorithm]}-based optimization is used on a given IR to improve performance. "
             "Each IR is a state, and has a parent transformation and speedup performance.",
             f"Give the current IR of {prog.name.replace('_', ' ')}: '{prog.to_leir()}', where the known variables "
             f"are {known_variables(prog)}. Do not change the names, shapes or dtypes of these known variables in "
             "the IR."]
    if node.parent is None:
        current = "The current IR is the same as the root IR, and the depth is 0"
    else:
        if history and parent is not None:
            if parent.parent is None:
                parts.append("History:\n\nThe parent IR: same as the root IR, depth:0, speedup value: 1.")
            else:
                parts.append(f"History:\n\nThe parent IR: '{parent.program.to_leir()}', depth:{parent.depth}, "
                             f"speedup value: {_num(parent.speedup)}.")
        current = (f"The speedup value of the current IR: {_num(node.speedup)}, the depth is {node.depth}, and the "
                   f"current IR is obtained from the parent IR using the strategy '{node.strategy}'")
    if node.failures:
        last = node.failures[-1]
        current += (f". This current IR has been transformed {len(node.failures)} times but failed to pass the "
                    f"verification. Last time, the transformed IR, '{last.get('leir') or last.get('answer', '')}', "
                    f"{_failure_text(last, root_key, node.key)}. You are FORBIDDEN to generate this failed "
                    "transformed IR again")
    parts.append(current + ".")
    return parts


def _failure_text(f: dict, root_key: str, current_key: str) -> str:
    if f.get("key") == root_key:
        return "was same as the root IR"
    if f.get("key") == current_key:
        return "was same as the current IR"
    if f.get("reason") == "not equal":
        return "was not numerically equivalent to the root IR"
    return f"could not be used ({f.get('reason')}: {(f.get('message') or '')[:200]})"


def _hardware(target: str, gpu_name: str) -> list[str]:
    if target == "cuda":
        return [f"**Target hardware**: NVIDIA {gpu_name} GPU.", CUDA_RULES]
    return ["**Target hardware**: CPU (TVM target llvm).", CPU_RULES]


CRITICAL = (
    "CRITICAL:\n\n"
    "1. Before you suggest each new transformation, you MUST identify what has been changed in the current IR "
    "compared to the root IR. For each new optimization, you MUST build it ON TOP OF these existing changes, "
    "namely ON TOP OF the current IR. The strategies MUST be used on the current IR! You MUST compare your modified "
    "parts in each transformed IR with the current IR. If they are identical strings, your answer is WRONG. If the "
    "unmodified part in each transformed IR is different from the current IR, your answer is WRONG.\n\n"
    "2. Don't repeat the current or parent IRs! You MUST NOT revert to the parent IR: In particular, you are NOT "
    "allowed to apply any reverse or undo operation that reconstructs the current IR from its parent IR, including "
    "inverse transformations such as operator fusion <-> operator fission, loop tiling <-> loop fusion, loop split "
    "<-> loop fusion, apart <-> together, collect <-> expand collect, or similar reversals.")


def free_prompt(node, parent, *, k: int, history: bool, algorithm: str, target: str, gpu_name: str,
                root_key: str) -> str:
    """The paper's prompt: the model writes ``k`` transformed IRs."""
    parts = _state(node, parent, history, algorithm, root_key) + _hardware(target, gpu_name)
    parts.append("The following strategies and any other mathematical strategies can be considered: "
                 f"{PAPER_STRATEGY_TEXT}.")
    if k == 1:
        task = ("**Task**:\n\nPlease give me a **numerically equivalent, runtime-performance-optimized** IR that "
                "produces exactly the same outputs for any floating-point inputs (bitwise identical) to achieve a "
                "higher speedup value (should be more than 1), and also provide applied strategy for the transformed "
                "IR.\n\nReturn the answer **only** as a valid JSON object with the following keys: 'transformed_IR', "
                "'applied_strategies'.")
    else:
        task = (f"**Task**:\n\nPlease give me at least {k} different **numerically equivalent, "
                "runtime-performance-optimized** IRs that produce exactly the same outputs for any floating-point "
                "inputs (bitwise identical) to achieve higher speedup values (should be more than 1), and also "
                "provide applied strategy for each transformed IR.\n\nReturn the answer list **only** as a valid "
                "JSON object, and each entry with the following keys: 'idx', 'transformed_IR', "
                "'applied_strategies'.")
    parts += [task, CRITICAL]
    return "\n\n".join(parts)


MENU_INTRO = {
    "full": "The legal single-step transformations of the current IR, each verified to be applicable, are "
            "listed below with the statements they produce:",
    "compact": "The legal single-step transformations of the current IR, each verified to be applicable, are "
               "listed below with what they change in it (old -> new; + added, - removed; a tensor in global "
               "memory is written without its ^{dtype,g} annotation):",
}


def menu_entry(number: int, c, current, detail: str = "compact") -> str:
    """``N. strategy at statement S (params): change``; ``c`` a search candidate or an engine step."""
    from .fragment import compact_change, compact_leir, full_change
    step = getattr(c, "step", c)
    params = ", ".join(f"{k}={v}" for k, v in step.choice.items())
    if detail == "compact":
        params, changed = compact_leir(params), compact_change(current, step.program)
    else:
        changed = full_change(current, step.program)
    where = f"statement {step.site[0] + 1}" if step.site else "program"
    if getattr(c, "description", None):            # a composite move: its name and what it does
        return f"{number}. {c.name} at {where} ({c.description}): {changed}"
    return f"{number}. {step.strategy} at {where}{' (' + params + ')' if params else ''}: {changed}"


def menu_prompt(node, parent, menu, *, k: int, history: bool, algorithm: str, target: str, gpu_name: str,
                root_key: str, answer: str = "number", detail: str = "compact") -> str:
    """The paper's description of the state, then the menu numbered 1..len(menu) in its
    order. ``answer``: "number" (one menu number per answer; several answers are several
    samples) or "json" (an object ``{"choices": [...]}`` with ``k`` numbers)."""
    parts = _state(node, parent, history, algorithm, root_key) + _hardware(target, gpu_name)
    parts.append(MENU_INTRO[detail] + "\n\n" +
                 "\n".join(menu_entry(i + 1, c, node.program, detail) for i, c in enumerate(menu)))
    if answer == "number":
        parts.append("**Task**:\n\nChoose the ONE transformation above that will most increase the speedup value "
                     "(runtime-performance) of the current IR. Answer with its number only.")
    else:
        parts.append(f"**Task**:\n\nChoose {k} different transformation(s) above that will most increase the "
                     "speedup value (runtime-performance) of the current IR, best first. Answer **only** with a "
                     f"JSON object {{\"choices\": [...]}} holding {k} of their numbers.")
    return "\n\n".join(parts)


# ------------------------------------------------------------------ whole requests, pure


@dataclass
class PromptState:
    """A state described by a prompt outside a search (the dataset's rows): by default the
    program itself at depth 0. A search passes its ``Node`` objects, which have the same
    attributes."""

    program: object
    parent: Optional[int] = None          # not None: the state has a parent (then pass it as ``parent``)
    depth: int = 0
    speedup: float = 1.0
    strategy: Optional[str] = None        # the step that produced it from its parent
    failures: list = field(default_factory=list)
    key: str = ""


@dataclass(frozen=True)
class PromptOptions:
    """What, besides the state and the candidates, a prompt depends on."""

    algorithm: str = "greedy"
    target: str = "llvm"
    gpu_name: str = "H20-3e"
    system_prompt: str = SYSTEM_PROMPT
    detail: str = "compact"               # menu entries: compact changes | full statements
    history: bool = True                  # show the parent (chain-no-parent: False)


def _messages(options: PromptOptions, user: str) -> list[dict]:
    return [{"role": "system", "content": options.system_prompt}, {"role": "user", "content": user}]


def menu_messages(state, candidates: list, options: PromptOptions = PromptOptions(), *, parent=None, k: int = 1,
                  answer: str = "number", root_key: str = "") -> list[dict]:
    """The chat messages of a menu request: ``state`` (a ``PromptState`` or a search node),
    ``candidates`` in menu order (search candidates or engine steps; shown as 1..m),
    ``answer`` "number" or "json" (``search.constraint.menu_answer_kind``)."""
    return _messages(options, menu_prompt(state, parent, candidates, k=k, history=options.history,
                                          algorithm=options.algorithm, target=options.target,
                                          gpu_name=options.gpu_name, root_key=root_key, answer=answer,
                                          detail=options.detail))


def free_messages(state, options: PromptOptions = PromptOptions(), *, parent=None, k: int = 1,
                  root_key: str = "") -> list[dict]:
    """The chat messages of the paper's free-form request (the model writes ``k`` IRs)."""
    return _messages(options, free_prompt(state, parent, k=k, history=options.history, algorithm=options.algorithm,
                                          target=options.target, gpu_name=options.gpu_name, root_key=root_key))


# ------------------------------------------------------------------ prompt size

_PIECE = re.compile(r"\d|[A-Za-z]+|\s+|[^\sA-Za-z\d]")


def estimate_tokens(text: str) -> int:
    """A tokenizer-free, deterministic and deliberately high estimate of a prompt's tokens:
    a digit or a symbol is a token, a word one per six letters, whitespace runs one. On the
    bundled examples' menu prompts it is 17-26% above SmolLM2's tokenizer (whose vocabulary
    is small: larger ones give fewer tokens still)."""
    n = 0
    for p in _PIECE.findall(text):
        if p[0].isalpha():
            n += 1 + len(p) // 6
        elif not p.isspace() or p != " ":
            n += 1
    return n


def fit_menu(state, preferred: list, options: PromptOptions = PromptOptions(), *, budget: int, parent=None,
             k: int = 1, root_key: str = "") -> list:
    """The longest prefix of ``preferred`` (candidates in the order a policy would rather show
    them) whose menu request stays within ``budget`` estimated tokens (at least one entry),
    in menu order (by candidate number, when the candidates have one)."""
    def ordered(n: int) -> list:
        chosen = preferred[:n]
        return sorted(chosen, key=lambda c: c.number) if all(hasattr(c, "number") for c in chosen) else chosen

    def size(n: int) -> int:
        msgs = menu_messages(state, ordered(n), options, parent=parent, k=k, answer="json", root_key=root_key)
        return sum(estimate_tokens(m["content"]) for m in msgs)

    lo, hi = 1, len(preferred)
    while lo < hi:                                   # the largest n that fits (sizes grow with n)
        mid = (lo + hi + 1) // 2
        if size(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return ordered(lo)
