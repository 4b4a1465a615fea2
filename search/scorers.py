"""``--scorer``: which scorer ranks a question's answers (``search.rank``), made from the flag's
value: ``server`` (``search.rank_server``) or ``local:PATH`` (``search.rank_local``)."""
from __future__ import annotations

from typing import Optional

from .rank import Scorer

SCORER_HELP = "server, or local:PATH (a Hugging Face model folder, a .gguf file or a folder holding one)"


def parse_scorer(text: str) -> tuple[str, Optional[str]]:
    """``--scorer``: ("server", None) or ("local", PATH); ``LeirError`` naming the flag."""
    from engine.leir.diagnostics import LeirError
    text = (text or "").strip()
    if text == "server":
        return "server", None
    if text.startswith("local:") and text[len("local:"):].strip():
        return "local", text[len("local:"):].strip()
    raise LeirError(f"--scorer: '{text}' is not a scorer (expected {SCORER_HELP})")


def make_scorer(spec: str, *, client=None, endpoint: Optional[str] = None, model: Optional[str] = None,
                api_key_env: str = "OPENAI_API_KEY", timeout: float = 120.0, retries: int = 4, seed: int = 0,
                resume: Optional[dict] = None) -> Scorer:
    """The scorer of a ``--scorer`` value. ``server`` asks ``client`` (a ``search.client.ChatClient``)
    or one made for ``endpoint`` and ``model``; ``local:PATH`` loads the model file (transformers,
    the ``train`` extra). ``resume``: a previous run's ``state()`` (the server form it settled on)."""
    kind, path = parse_scorer(spec)
    if kind == "local":
        from .rank_local import LocalScorer
        return LocalScorer(path)
    from .rank_server import ServerScorer
    if client is None:
        from engine.leir.diagnostics import LeirError

        from .client import ChatClient
        if not endpoint or not model:
            raise LeirError("--scorer server needs --endpoint URL and --model NAME")
        client = ChatClient(endpoint, model, api_key_env=api_key_env, timeout=timeout, retries=retries, seed=seed)
    return ServerScorer(client, seed=seed, resume=resume)
