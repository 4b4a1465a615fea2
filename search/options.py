"""``SearchOptions``: everything a search run depends on, validated once, stored in the
trajectory so that a run can be explained, replayed and resumed.

One registry: each field carries its command-line flag, group, help and choices as field
metadata (``opt``), and ``python -m search`` builds its parser from it (``add_option_flags``),
so a new option is declared once. The choices of ``--algorithm`` and ``--policy`` are the
keys of ``search.algorithms.ALGORITHMS`` and ``search.policies.POLICIES``.
"""
from __future__ import annotations

from dataclasses import MISSING, InitVar, asdict, dataclass, field, fields
from typing import Optional

from engine.leir.diagnostics import LeirError
from lowering.builds import BUILD_NAMES, DEFAULT_TIMED, SEARCH_TIMED
from lowering.measure.stats import CONFIDENCE, LOOK_EVERY, NOISE_FLOOR, ROUNDS, Protocol

from .algorithms import ALGORITHMS
from .constraint import MODES
from .features import DEFAULT_STRATEGIES
from .policies import POLICIES

ALGORITHM_NAMES = tuple(ALGORITHMS)
POLICY_NAMES = tuple(POLICIES)
TARGET_NAMES = ("llvm", "cuda")
CONSTRAINTS = MODES                          # how an llm answer is tied to the menu (search.constraint)
MENU_DETAILS = ("compact", "full")           # menu entries: what changes | whole changed statements
LLM_ANSWERS = ("name", "rank")               # the llm policy reads a number back | ranks every entry (search.rank)
GROUPS = ("search", "measurement", "policies")

COMPOSE_EVERY = 16       # kernels: samples between two compositions of the e-graph's choice
SCREEN_SHARE = 0.25       # measure: share of the budget left screened per move
COST_MARGIN = 0.02        # cost: predicted gain over the current node needed to pay for a measurement


def opt(default, group: str, help: Optional[str] = None, *, choices=None, type=None, flag=None, aliases=()):
    """A field of ``SearchOptions`` with its command-line flag (``flag=False``: none)."""
    meta = {"group": group, "help": help, "choices": choices, "type": type, "flag": flag, "aliases": tuple(aliases)}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata={"cli": meta})
    return field(default=default, metadata={"cli": meta})


@dataclass
class SearchOptions:
    algorithm: str = opt("kernels", "search", "the search algorithm: kernels (default: per-statement kernels composed "
                         "by e-graph extraction, the search that wins on held-out programs; docs/search.md), or the "
                         "paper's greedy, beam, bfs, dfs, mcts, chain, chain-no-parent", choices=ALGORITHM_NAMES)
    policy: str = opt("cost", "search", "who chooses what to measure next: cost (a cost model, with a prior trained "
                      "on the public corpus), measure (a screen, strategies taking turns), random (among exactly what "
                      "a model is shown), random-all (among the whole menu), llm (a served model chooses from the "
                      "menu or, in the kernel search, among a kernel's moves), llm-free (a served model writes the "
                      "next program; paper algorithms only), or package.module:Class (your own Policy subclass)")
    budget: int = opt(64, "search", "samples: candidates verified and timed (default 64)")
    target: str = opt("llvm", "search", "where candidates are built, verified and timed: llvm (this CPU) or cuda",
                      choices=TARGET_NAMES)
    seed: int = opt(0, "search", "seed of every random choice of the run")
    strategies: str = opt(DEFAULT_STRATEGIES, "search",
                          "strategy set or comma-separated names and sets (all, paper, extra, user, bitwise, graph, "
                          "operator, memory, math; default paper,extra: the paper's 43 and the project's own "
                          "(dead code elimination, vectorised reductions, register blocking); your own strategies "
                          "need 'all', 'user' or their names; --strategy is the same flag)", aliases=("--strategy",))
    # algorithm parameters; None: the paper's value for the algorithm (search.algorithms.PAPER)
    iterations: Optional[int] = opt(None, "search", "override the paper's iterations (greedy, beam, mcts, chain)",
                                    type=int)
    per_node: Optional[int] = opt(None, "search", "override the proposals per expansion", type=int)
    beam_width: Optional[int] = opt(None, "search", "override beam's k (2)", type=int)
    max_depth: Optional[int] = opt(None, "search", "override BFS/DFS depth (20); kernels: moves per kernel variant (6)",
                                   type=int)
    rollout_depth: Optional[int] = opt(None, "search", "override MCTS rollout length (3)", type=int)
    kernel_nodes: Optional[int] = opt(None, "search", "kernels: variants held in the e-graph at most (2000)", type=int)
    kernel_seconds: Optional[float] = opt(None, "search", "kernels: seconds of kernel enumeration at most (300)",
                                          type=float)
    # measurement
    trials: int = opt(3, "measurement", "verification trials (default 3)")
    timeout: float = opt(300.0, "measurement", "seconds per build/run (default 300)")
    workers: int = opt(1, "measurement", "verifier processes: builds in parallel")
    min_repeat_ms: float = opt(2.0, "measurement", "each timed repeat runs the program this many ms at least")
    repeat: int = opt(7, "measurement", "timed repeats per measurement")
    confirm: int = opt(3, "measurement", "best nodes re-timed against the original at the end")
    # policies
    screen: int = opt(6, "policies", "measure policy: candidates timed per choice")
    explore: float = opt(0.1, "policies", "cost policy: share of random picks")
    database: Optional[str] = opt(
        None, "policies", "JSON-lines database of evaluations (append-only): its rows train the cost policy, "
        "--resume reads this run's outcomes from it, and this run's outcomes are added to it (--cost-db: its "
        "earlier name)", flag="--database", aliases=("--cost-db",))
    endpoint: Optional[str] = opt(None, "policies", "llm policies: OpenAI-compatible base URL, e.g. "
                                  "http://localhost:8000/v1")
    model: Optional[str] = opt(None, "policies", "llm policies: model name as the server knows it")
    api_key_env: str = opt("OPENAI_API_KEY", "policies", "environment variable holding the API key")
    constraint: str = opt("auto", "policies",
                          "auto (default): the first form the server accepts and follows, tried in order: choice "
                          "(vLLM structured_outputs), regex (SGLang), grammar (llama.cpp GBNF), json (response_format "
                          "json_schema), json-object (llama.cpp json_object + schema), openai (strict json_schema), "
                          "none; vllm-json (structured_outputs json) on request only. Answers are parsed and checked "
                          "either way", choices=CONSTRAINTS)
    temperature: float = opt(0.3, "policies", "llm policies: sampling temperature")
    max_tokens: int = opt(4096, "policies", "llm policies: tokens per answer at most")
    llm_timeout: float = opt(120.0, "policies", "seconds per LLM request")
    retries: int = opt(4, "policies", "retries on 429/5xx/timeouts (backoff)")
    menu_size: int = opt(40, "policies", "menu entries shown to the model at most")
    prompt_tokens: int = opt(2000, "policies", "menu entries beyond what keeps the prompt within this many tokens are "
                             "left out (a tokenizer-free estimate, on the high side; default 2000)")
    menu_detail: str = opt("compact", "policies", "menu entries show what changes (compact, default) or the whole "
                           "changed statements (full)", choices=MENU_DETAILS)
    system_prompt: str = opt("You are a helpful IR optimization assistant.", "policies",
                             "llm policies: the system message")
    gpu_name: str = opt("H20-3e", "policies", "GPU named in the prompt for --target cuda")
    # additions (after the flags of earlier versions, so that --help only grows)
    screen_share: float = opt(SCREEN_SHARE, "policies",
                              f"measure policy: share of the budget left screened per move: ceil(left x share), at "
                              f"least the proposals wanted, at most --screen, the menu and the budget left (default "
                              f"{SCREEN_SHARE})")
    cost_margin: float = opt(COST_MARGIN, "policies",
                             f"cost policy: measure a candidate only when its predicted speedup over the current node "
                             f"exceeds 1 + margin; when none does, the single best prediction (default {COST_MARGIN})")
    cost_prior: str = opt("on", "policies", "cost policy: start from the shipped model trained on the public corpus "
                          "(off: empty model)", choices=("on", "off"))
    lookahead: int = opt(1, "policies", "cost policy: rank each entry by the best predicted state within this many "
                         "steps (1-3)")
    composites: str = opt("auto", "policies", "composite moves in menus: auto (on in the kernel search; in the paper's algorithms off for llm and random, which draws from what llm is shown), on, off, "
                          "or a TOML table")
    # paired timing (lowering.measure): every decision is a paired verdict, not one median
    rounds: int = opt(ROUNDS, "measurement",
                      f"most interleaved rounds of a paired comparison (candidates against the node they were "
                      f"proposed at; the best against the original at the end); a candidate stops earlier once its "
                      f"verdict is clear (default {ROUNDS})")
    noise_floor: float = opt(NOISE_FLOOR, "measurement",
                             f"a speedup whose interval does not clear 1 +/- this is a tie: never a move, never "
                             f"reported (default {NOISE_FLOOR}; benchmarks/timing_noise.py measures it)")
    confidence: float = opt(CONFIDENCE, "measurement", f"confidence of every verdict (default {CONFIDENCE})")
    look_every: int = opt(LOOK_EVERY, "measurement",
                          f"rounds between two looks of the sequential rule (default {LOOK_EVERY}; 0: always --rounds)")
    compose_every: int = opt(COMPOSE_EVERY, "search",
                             f"kernels: compose, verify and confirm the e-graph's choice against the original every "
                             f"this many samples (default {COMPOSE_EVERY})")
    llm_answer: str = opt("name", "policies", "llm policy: name (the model answers a number; default) or rank (every "
                          "entry shown is scored by its log-probability as the answer and the best taken; --scorer; "
                          "docs/search.md)", choices=LLM_ANSWERS)
    scorer: str = opt("server", "policies", "--llm-answer rank: where log-probabilities come from: server (the "
                      "endpoint's, each answer forced by a constraint; default) or local:PATH (transformers on a "
                      "Hugging Face folder or a .gguf file; no server needed)")
    build: str = opt(SEARCH_TIMED, "measurement",
                     "the build candidates are timed in (lowering.builds): fast (the default: this CPU's FMA and "
                     "AVX-512, what users receive; each program's fast build is checked against its exact build at "
                     "the strict tolerance before it is timed) or exact (no fused multiply-add, what verification "
                     "runs; what searches timed before builds were named)", choices=BUILD_NAMES)
    threads: Optional[int] = opt(None, "measurement",
                                 "threads each candidate runs on (TVM's thread pool in the timing workers, unbound "
                                 "from cores); default: TVM's own (TVM_NUM_THREADS, else OMP_NUM_THREADS, else half the CPUs on x86)", type=int)
    extra: dict = opt({}, "search", flag=False)
    cost_db: InitVar[Optional[str]] = None          # the earlier name of ``database`` (a property below)

    def __post_init__(self, cost_db):
        if cost_db is not None and isinstance(cost_db, str):
            self.database = cost_db

    def validate(self) -> "SearchOptions":
        def need(ok: bool, what: str):
            if not ok:
                raise LeirError(what)
        need(self.algorithm in ALGORITHM_NAMES,
             f"--algorithm: unknown algorithm '{self.algorithm}' (expected one of {', '.join(ALGORITHM_NAMES)})")
        need(self.policy in POLICY_NAMES or ":" in self.policy,
             f"--policy: unknown policy '{self.policy}' (expected one of {', '.join(POLICY_NAMES)}, or "
             "package.module:Class for your own)")
        if self.policy not in POLICY_NAMES:
            from .policies import policy_class
            try:
                policy_class(self.policy)
            except ValueError as e:
                raise LeirError(f"--policy: {e}") from None
        need(not (self.algorithm == "kernels" and self.policy == "llm-free"),
             "--policy llm-free writes whole programs: use it with one of the paper's algorithms (--algorithm "
             "greedy, ...); the kernel search asks --policy llm which move of a kernel to measure")
        need(self.target in TARGET_NAMES, f"--target: unknown target '{self.target}' (expected llvm or cuda)")
        need(self.build in BUILD_NAMES, f"--build: unknown build '{self.build}' (expected {' or '.join(BUILD_NAMES)})")
        need(self.constraint in CONSTRAINTS,
             f"--constraint: unknown constraint '{self.constraint}' (expected one of {', '.join(CONSTRAINTS)})")
        need(isinstance(self.budget, int) and self.budget >= 1, "--budget must be a positive number of samples")
        for name in ("iterations", "per_node", "beam_width", "max_depth"):
            v = getattr(self, name)
            need(v is None or v >= 1, f"--{name.replace('_', '-')} must be at least 1")
        need(self.rollout_depth is None or self.rollout_depth >= 0, "--rollout-depth must be at least 0")
        need(self.kernel_nodes is None or self.kernel_nodes >= 1, "--kernel-nodes must be at least 1")
        need(self.kernel_seconds is None or self.kernel_seconds > 0, "--kernel-seconds must be positive")
        need(self.trials >= 1, "--trials must be at least 1")
        need(self.workers >= 1, "--workers must be at least 1")
        need(self.threads is None or (isinstance(self.threads, int) and not isinstance(self.threads, bool)
                                      and self.threads >= 1),
             f"--threads must be a whole number at least 1, got {self.threads!r}")
        need(self.screen >= 1, "--screen must be at least 1")
        need(0.0 < self.screen_share <= 1.0, "--screen-share must be above 0 and at most 1")
        need(self.cost_margin >= 0.0, "--cost-margin must be at least 0")
        need(0.0 <= self.explore <= 1.0, "--explore must be between 0 and 1")
        need(self.cost_prior in ("on", "off"), f"--cost-prior must be on or off, not '{self.cost_prior}'")
        need(isinstance(self.lookahead, int) and 1 <= self.lookahead <= 3, "--lookahead must be 1, 2 or 3")
        need(self.menu_size >= 1, "--menu-size must be at least 1")
        need(self.prompt_tokens >= 1, "--prompt-tokens must be at least 1")
        need(self.retries >= 0, "--retries must be at least 0")
        need(self.timeout > 0, f"--timeout must be positive, got {self.timeout}")
        need(self.llm_timeout > 0, f"--llm-timeout must be positive, got {self.llm_timeout}")
        need(self.temperature >= 0, f"--temperature must be at least 0, got {self.temperature}")
        need(self.max_tokens >= 1, f"--max-tokens must be at least 1, got {self.max_tokens}")
        need(self.repeat >= 1, f"--repeat must be at least 1, got {self.repeat}")
        need(self.min_repeat_ms > 0, f"--min-repeat-ms must be positive, got {self.min_repeat_ms}")
        need(self.confirm >= 0, f"--confirm must be at least 0, got {self.confirm}")
        need(self.compose_every >= 2, "--compose-every must be at least 2")
        try:
            self.protocol()
        except ValueError as e:
            raise LeirError(f"--rounds/--confidence/--noise-floor/--look-every: {e}") from None
        need(self.llm_answer in LLM_ANSWERS,
             f"--llm-answer: unknown answer mode '{self.llm_answer}' (expected {' or '.join(LLM_ANSWERS)})")
        need(self.llm_answer == "name" or self.policy == "llm" or ":" in self.policy,
             f"--llm-answer rank ranks the menu of --policy llm, not of --policy {self.policy}")
        from .scorers import parse_scorer
        scorer, path = parse_scorer(self.scorer)
        if path is not None:
            from .rank_local import resolve_model
            resolve_model(path)
        if self.policy in ("llm", "llm-free") and not (self.llm_answer == "rank" and scorer == "local"):
            need(bool(self.endpoint), f"--policy {self.policy} needs --endpoint URL (an OpenAI-compatible server, "
                                      "e.g. http://localhost:8000/v1 for `vllm serve MODEL`)")
            need(bool(self.model), f"--policy {self.policy} needs --model NAME (the served model's name)")
        return self

    def protocol(self) -> Protocol:
        """How candidates are timed against each other (``lowering.measure``)."""
        return Protocol(rounds=self.rounds, confidence=self.confidence, noise_floor=self.noise_floor,
                        look_every=self.look_every).check()

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "SearchOptions":
        """Options from a trajectory's record; fields it lacks (an older version) take their
        defaults (but ``build``: exact, what they timed), ``cost_db`` is read as ``database``."""
        d = dict(d)
        d.setdefault("build", DEFAULT_TIMED)        # written before builds were named: it timed the exact build
        if "cost_db" in d and d.get("database") is None:
            d["database"] = d.pop("cost_db")
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def _get_cost_db(self) -> Optional[str]:
    return self.database


def _set_cost_db(self, path: Optional[str]) -> None:
    self.database = path


# ``cost_db``: read and written as ``database`` (the constructor takes it too, as an InitVar)
SearchOptions.cost_db = property(_get_cost_db, _set_cost_db, doc="the earlier name of ``database``")


def add_option_flags(parser, groups: Optional[dict] = None) -> dict:
    """Add a flag for every ``SearchOptions`` field that has one, in field order, to the named
    argument groups (made when missing). Returns {group name: argparse group}."""
    groups = dict(groups or {})
    for f in fields(SearchOptions):
        meta = f.metadata.get("cli")
        if meta is None or meta["flag"] is False:
            continue
        g = groups.get(meta["group"])
        if g is None:
            g = groups[meta["group"]] = parser.add_argument_group(meta["group"])
        flag = meta["flag"] or "--" + f.name.replace("_", "-")
        kw = {"dest": f.name}
        default = f.default if f.default is not MISSING else None
        if default is not None:
            kw["default"] = default
            kw["type"] = meta["type"] or type(default)
        elif meta["type"] is not None:
            kw["type"] = meta["type"]
        if meta["choices"] is not None:
            kw["choices"] = meta["choices"]
            kw.pop("type", None)
        text = meta["help"] or ""
        if default is not None and "default" not in text:      # every flag says its default
            text = (text + " " if text else "") + f"(default {default})"
        if text:
            kw["help"] = text
        g.add_argument(flag, *meta["aliases"], **kw)
    return groups


def options_from_args(args) -> SearchOptions:
    """The ``SearchOptions`` of parsed arguments (the fields that have a flag)."""
    kw = {f.name: getattr(args, f.name) for f in fields(SearchOptions)
          if f.metadata.get("cli", {}).get("flag") is not False and hasattr(args, f.name)}
    return SearchOptions(**kw)
