"""One chat call to an OpenAI-compatible endpoint (OpenAI, vLLM, SGLang, llama.cpp's
server...) through the ``openai`` client, with the project's failure discipline: a 429 or
5xx is retried with exponential backoff (seeded jitter, ``Retry-After`` honoured), so is a
connection error or a timeout; what still fails comes back as an error record, never as an
exception, so that the search counts a failed sample and goes on. Every call records its
latency, attempts and token usage.

A *validation error* (HTTP 400/422, or a 500 whose body says the request did not validate,
as llama-cpp-python answers a ``response_format`` it does not know) is not a server fault:
it is returned at once, flagged ``error["validation"]``, so that ``--constraint auto`` can
try another form (``search.constraint``).

``logprobs=K`` asks for each answer token's log-probability and the ``K`` most likely tokens at
its position (``ChatResult.logprobs``): the ranking of ``search.rank_server`` reads them."""
from __future__ import annotations

import math
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Optional

MAX_BACKOFF_S = 8.0
VALIDATION_STATUS = (400, 422)
# what a 500's body says when the server failed to validate the request rather than to serve it
VALIDATION_BODY = re.compile(
    r"validation error|Input should be|literal_error|extra_forbidden|missing required|unrecognized request argument|"
    r"unknown (field|parameter|argument)|not (supported|allowed|permitted)|unsupported|invalid (request|schema|"
    r"grammar|regex|response_format|value)|'loc': \('body'|\"loc\": \[\"body\"", re.I)


def is_validation_error(status, message: str) -> bool:
    """A request the server refused to accept (as opposed to one it failed to serve)."""
    if status in VALIDATION_STATUS:
        return True
    return status == 500 and bool(VALIDATION_BODY.search(message or ""))


@dataclass
class ChatResult:
    texts: list                          # one per returned choice (n)
    usage: dict = field(default_factory=dict)
    latency_s: float = 0.0
    attempts: int = 0
    error: Optional[dict] = None         # {"type", "status", "message", "validation"} when no answer came
    finish_reasons: list = field(default_factory=list)
    # with ``logprobs=K``, per choice: [{"token", "logprob", "top": [[token, logprob], ...]}, ...], one entry
    # per answer token, or None when the server sent none
    logprobs: list = field(default_factory=list)


class ChatClient:
    def __init__(self, endpoint: str, model: str, *, api_key_env: str = "OPENAI_API_KEY", timeout: float = 120.0,
                 retries: int = 4, seed: int = 0, backoff_s: float = 0.5, sleep=time.sleep):
        import openai
        self.model = model
        self.retries = retries
        self.backoff_s = backoff_s
        self.sleep = sleep
        self.rng = random.Random(f"backoff:{seed}")
        self.key_set = bool(os.environ.get(api_key_env))
        # local servers (vLLM, SGLang) accept any key; the client insists on a non-empty one
        self.client = openai.OpenAI(base_url=endpoint, api_key=os.environ.get(api_key_env) or "EMPTY",
                                    timeout=timeout, max_retries=0)

    def _delay(self, attempt: int, err) -> float:
        retry_after = None
        resp = getattr(err, "response", None)
        if resp is not None:
            try:
                retry_after = float(resp.headers.get("retry-after"))
            except (TypeError, ValueError):
                retry_after = None
        base = min(MAX_BACKOFF_S, self.backoff_s * 2 ** attempt)
        d = base * (0.5 + 0.5 * self.rng.random())
        return min(MAX_BACKOFF_S, max(d, retry_after or 0.0))

    def chat(self, messages: list, *, n: int = 1, temperature: float = 0.3, max_tokens: int = 4096,
             seed: Optional[int] = None, extra_body: Optional[dict] = None,
             response_format: Optional[dict] = None, logprobs: Optional[int] = None) -> ChatResult:
        import openai
        kwargs = {"model": self.model, "messages": messages, "n": n, "temperature": temperature,
                  "max_tokens": max_tokens}
        if logprobs is not None:
            kwargs.update(logprobs=True, top_logprobs=logprobs)
        if seed is not None:
            kwargs["seed"] = seed
        if extra_body:
            kwargs["extra_body"] = extra_body
        if response_format:
            kwargs["response_format"] = response_format
        t0 = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            try:
                r = self.client.chat.completions.create(**kwargs)
            except (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError) as e:
                status = getattr(e, "status_code", None)
                validation = is_validation_error(status, str(e))
                if attempt > self.retries or validation:
                    return ChatResult([], {}, time.perf_counter() - t0, attempt, _error(e, status, validation))
                self.sleep(self._delay(attempt - 1, e))
                continue
            except openai.APIStatusError as e:            # 4xx: retrying would not help
                return ChatResult([], {}, time.perf_counter() - t0, attempt,
                                  _error(e, e.status_code, is_validation_error(e.status_code, str(e))))
            except (openai.OpenAIError, ValueError) as e:  # a malformed response body, ...
                return ChatResult([], {}, time.perf_counter() - t0, attempt, _error(e, None, False))
            usage = {}
            if getattr(r, "usage", None) is not None:
                usage = {k: getattr(r.usage, k, None) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
            texts = [(c.message.content if c.message is not None else None) or "" for c in (r.choices or [])]
            return ChatResult(texts, usage, time.perf_counter() - t0, attempt, None,
                              [c.finish_reason for c in (r.choices or [])],
                              [_token_logprobs(c) for c in (r.choices or [])] if logprobs is not None else [])


def _token_logprobs(choice) -> Optional[list]:
    """A choice's answer tokens with their log-probabilities and the alternatives listed (None:
    the server sent none). A value that is not a finite number reads as None."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    return [{"token": str(t.token), "logprob": _finite(t.logprob),
             "top": [[str(a.token), _finite(a.logprob)] for a in (getattr(t, "top_logprobs", None) or [])]}
            for t in content]


def _finite(x) -> Optional[float]:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _error(e, status, validation: bool) -> dict:
    return {"type": type(e).__name__, "status": status, "message": str(e)[:300], "validation": validation}


def check_url(url: str) -> None:
    """``--endpoint`` is an http(s) URL (``LeirError`` otherwise); no request is made."""
    from urllib.parse import urlparse

    from engine.leir.diagnostics import LeirError
    u = urlparse(url)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise LeirError(f"--endpoint '{url}' is not an http(s) URL (expected e.g. http://localhost:8000/v1)")


def check_endpoint(url: str, model: str | None = None, *, api_key_env: str = "OPENAI_API_KEY",
                   timeout: float = 30.0) -> list[str]:
    """Before the first prompt: ``url`` is an http(s) URL of a server that answers the
    OpenAI-compatible ``GET /models``, and serves ``model`` (when the server lists any).
    Raises ``LeirError`` naming ``--endpoint`` or ``--model`` with what went wrong (not
    reachable, no such API at that path, a refused key, an unknown model); returns the models
    served. ``python -m search --policy llm`` and ``python -m dataset.evaluate`` call it."""
    import openai

    from engine.leir.diagnostics import LeirError
    from engine.rewrite.unknown import did_you_mean
    check_url(url)
    client = openai.OpenAI(base_url=url, api_key=os.environ.get(api_key_env) or "EMPTY", timeout=timeout,
                           max_retries=0)
    where = f"--endpoint {url}"
    try:
        served = [m.id for m in client.models.list()]
    except (openai.APIConnectionError, openai.APITimeoutError) as e:
        cause = e.__cause__ or e
        raise LeirError(f"{where}: cannot reach the endpoint ({type(cause).__name__}: {str(cause)[:120]}); is the "
                        "server running, and is the URL right?") from None
    except openai.NotFoundError:
        raise LeirError(f"{where}: no OpenAI-compatible API there (GET {url.rstrip('/')}/models answered 404); the "
                        "base URL usually ends with /v1, e.g. http://localhost:8000/v1") from None
    except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
        raise LeirError(f"{where}: the server refused the API key (HTTP {e.status_code}); put the key in "
                        f"${api_key_env} (--api-key-env names another variable)") from None
    except openai.APIStatusError as e:
        raise LeirError(f"{where}: GET /models answered HTTP {e.status_code}: {str(e)[:160]}") from None
    except (openai.OpenAIError, ValueError, TypeError, AttributeError) as e:   # not the API's JSON
        raise LeirError(f"{where}: not an OpenAI-compatible API (GET /models: {type(e).__name__}: "
                        f"{str(e)[:120]})") from None
    if model is not None and served and model not in served:
        shown = ", ".join(served[:8]) + (", ..." if len(served) > 8 else "")
        raise LeirError(f"--model {model}: the server at {url} does not serve it{did_you_mean(model, served)}; it "
                        f"serves: {shown}")
    return served
