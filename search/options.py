"""``SearchOptions``: everything a search run depends on, validated once, stored in the
trajectory so that a run can be explained, replayed and resumed."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Optional

from engine.leir.diagnostics import LeirError

from .constraint import MODES

ALGORITHM_NAMES = ("greedy", "beam", "bfs", "dfs", "mcts", "chain", "chain-no-parent")
POLICY_NAMES = ("llm", "llm-free", "cost", "measure", "random")
TARGET_NAMES = ("llvm", "cuda")
CONSTRAINTS = MODES                          # how an llm answer is tied to the menu (search.constraint)
MENU_DETAILS = ("compact", "full")           # menu entries: what changes | whole changed statements


@dataclass
class SearchOptions:
    algorithm: str = "greedy"
    policy: str = "cost"
    budget: int = 64                  # samples: candidates verified (and measured when equal)
    target: str = "llvm"
    seed: int = 0
    strategies: str = "paper"
    # algorithm parameters; None: the paper's value for the algorithm (search.algorithms.PAPER)
    iterations: Optional[int] = None
    per_node: Optional[int] = None
    beam_width: Optional[int] = None
    max_depth: Optional[int] = None
    rollout_depth: Optional[int] = None
    # measurement
    trials: int = 3                   # verification trials
    timeout: float = 300.0            # seconds per build/run request
    workers: int = 1                  # verifier worker processes (builds in parallel)
    min_repeat_ms: float = 2.0        # each timed repeat runs the program this long at least
    repeat: int = 7
    confirm: int = 3                  # best nodes re-measured against the original at the end
    # policies
    screen: int = 6                   # measure policy: candidates measured per choice
    explore: float = 0.1              # cost policy: share of picks made at random
    cost_db: Optional[str] = None     # cost policy: measurements of earlier runs (JSON lines)
    lookahead: int = 1                # cost policy: steps deep the model looks before measuring (search.lookahead)
    composites: str = "auto"          # composite moves in menus: auto | on | off | FILE (search.composite.resolve)
    endpoint: Optional[str] = None    # llm policies: OpenAI-compatible base URL
    model: Optional[str] = None
    api_key_env: str = "OPENAI_API_KEY"
    constraint: str = "auto"
    temperature: float = 0.3
    max_tokens: int = 4096
    llm_timeout: float = 120.0
    retries: int = 4
    menu_size: int = 40
    menu_detail: str = "compact"
    prompt_tokens: int = 2000         # menu entries are left out beyond this many (estimated) prompt tokens
    system_prompt: str = "You are a helpful IR optimization assistant."
    gpu_name: str = "H20-3e"
    extra: dict = field(default_factory=dict)

    def validate(self) -> "SearchOptions":
        def need(ok: bool, what: str):
            if not ok:
                raise LeirError(what)
        need(self.algorithm in ALGORITHM_NAMES,
             f"unknown algorithm '{self.algorithm}' (expected one of {', '.join(ALGORITHM_NAMES)})")
        need(self.policy in POLICY_NAMES, f"unknown policy '{self.policy}' (expected one of {', '.join(POLICY_NAMES)})")
        need(self.target in TARGET_NAMES, f"unknown target '{self.target}' (expected llvm or cuda)")
        need(self.constraint in CONSTRAINTS,
             f"unknown constraint '{self.constraint}' (expected one of {', '.join(CONSTRAINTS)})")
        need(isinstance(self.budget, int) and self.budget >= 1, "--budget must be a positive number of samples")
        for name in ("iterations", "per_node", "beam_width", "max_depth"):
            v = getattr(self, name)
            need(v is None or v >= 1, f"--{name.replace('_', '-')} must be at least 1")
        need(self.rollout_depth is None or self.rollout_depth >= 0, "--rollout-depth must be at least 0")
        need(self.trials >= 1, "--trials must be at least 1")
        need(self.workers >= 1, "--workers must be at least 1")
        need(self.screen >= 1, "--screen must be at least 1")
        need(0.0 <= self.explore <= 1.0, "--explore must be between 0 and 1")
        need(isinstance(self.lookahead, int) and 1 <= self.lookahead <= 3, "--lookahead must be 1, 2 or 3")
        need(self.menu_size >= 1, "--menu-size must be at least 1")
        need(self.prompt_tokens >= 1, "--prompt-tokens must be at least 1")
        need(self.retries >= 0, "--retries must be at least 0")
        need(self.timeout > 0 and self.llm_timeout > 0, "timeouts must be positive")
        if self.policy in ("llm", "llm-free"):
            need(bool(self.endpoint), f"--policy {self.policy} needs --endpoint URL (an OpenAI-compatible server, "
                                      "e.g. http://localhost:8000/v1 for `vllm serve MODEL`)")
            need(bool(self.model), f"--policy {self.policy} needs --model NAME (the served model's name)")
        return self

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "SearchOptions":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})
