"""Ranking by a local model file (``--scorer local:PATH``), for a checkpoint no server serves:
transformers on a Hugging Face folder, a ``.gguf`` file (dequantised to float32 as it loads) or a
folder holding exactly one ``.gguf``.

The prompt is the messages through the tokenizer's chat template with the assistant prefix
(``add_generation_prompt``), tokenised without added special tokens (a template writes its own);
an answer is its own tokens after it, as a server generates them. One forward pass over the prompt
keeps its key-value cache; each answer is then a forward pass over its few tokens from that cache
(cropped back to the prompt after each), which gives the log-probability of every answer token and
the whole next-token distribution after the answer, so the end term (``search.rank``) is exact.
Needs the ``train`` extra (transformers); torch and transformers load only when a scorer is made.
"""
from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Optional

from engine.leir.diagnostics import LeirError

from .rank import DIGITS, MIN_END_PROBABILITY, EntryScore, RankError, Ranking

INSTALL = "--scorer local:PATH needs transformers: pip install -e '.[train]'"


def resolve_model(path: str) -> tuple[Path, Optional[str]]:
    """(folder, GGUF file name or None for a Hugging Face folder) of ``local:PATH``."""
    p = Path(path)
    if p.is_file():
        if p.suffix != ".gguf":
            raise LeirError("--scorer local:PATH: PATH must be a Hugging Face model folder, a .gguf file or a "
                            "folder holding one", file=path)
        return p.parent, p.name
    if not p.is_dir():
        raise LeirError("--scorer local:PATH: no such model folder or file", file=path)
    if (p / "config.json").is_file():
        return p, None
    ggufs = sorted(x.name for x in p.glob("*.gguf"))
    if len(ggufs) == 1:
        return p, ggufs[0]
    raise LeirError("--scorer local:PATH: the folder has no config.json" +
                    (f" and {len(ggufs)} .gguf files (name one)" if ggufs else " and no .gguf file"), file=path)


class LocalScorer:
    """Scores with a causal language model and its tokenizer: loaded from ``path``, or given
    (``model``, ``tokenizer``: a model built in memory)."""

    name = "local"

    def __init__(self, path: Optional[str] = None, *, model=None, tokenizer=None):
        self.path = path
        if model is None:
            model, tokenizer = _load(path)
        if not getattr(tokenizer, "chat_template", None):
            raise LeirError("--scorer local:PATH: the model's tokenizer has no chat template", file=path or "")
        self.model, self.tokenizer = model.eval(), tokenizer
        self._digits = None

    def state(self) -> dict:
        return {"scorer": self.name, "model": Path(self.path).name if self.path else None}

    def close(self) -> None:
        self.model = None

    def _digit_ids(self):
        """The token ids whose text begins with a digit (a number that goes on)."""
        if self._digits is None:
            import torch
            size = self.model.get_output_embeddings().weight.shape[0]
            texts = self.tokenizer.batch_decode([[i] for i in range(min(size, len(self.tokenizer)))])
            self._digits = torch.tensor([i for i, t in enumerate(texts) if t[:1] and t[0] in DIGITS], dtype=torch.long)
        return self._digits

    def _answer_ids(self, answer: str) -> list[int]:
        ids = self.tokenizer(answer, add_special_tokens=False)["input_ids"]
        if not ids or self.tokenizer.decode(ids) != answer:
            raise RankError(f"the tokenizer does not write the answer {answer!r} as tokens of its own")
        return list(ids)

    def score(self, messages: list[dict], answers: list[str]) -> Ranking:
        import torch
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        prompt = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = [self._answer_ids(a) for a in answers]
        digits = self._digit_ids()
        out = []
        # transformers 5 names the key-value cache ``cache`` (``past_key_values`` before)
        name = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"
        with torch.inference_mode():
            first = self.model(input_ids=torch.tensor([prompt]), use_cache=True)
            cache = getattr(first, name)
            after_prompt = torch.log_softmax(first.logits[0, -1].float(), dim=-1)
            for a, toks in zip(answers, ids):
                more = self.model(input_ids=torch.tensor([toks]), use_cache=True, **{name: cache})
                cache.crop(-len(toks))             # back to the prompt alone
                dists = [after_prompt] + list(torch.log_softmax(more.logits[0].float(), dim=-1))
                lps = tuple(float(dists[i][t]) for i, t in enumerate(toks))
                end = _end(dists[len(toks)], digits)
                out.append(EntryScore(a, sum(lps) + end, tuple(self.tokenizer.decode([t]) for t in toks), lps, end))
        return Ranking(out, self.name, "local")


def _end(logprobs, digits) -> float:
    """log(1 - P(a digit-initial token)), computed in log space."""
    import torch
    lse = float(torch.logsumexp(logprobs[digits], dim=0)) if len(digits) else -math.inf
    p = -math.expm1(lse)
    return math.log(max(p, MIN_END_PROBABILITY))


def _load(path: Optional[str]):
    if path is None:
        raise LeirError("--scorer local:PATH needs a PATH")
    folder, gguf = resolve_model(path)
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise LeirError(INSTALL) from None
    kw = {"gguf_file": gguf} if gguf else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), **kw)
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, **kw)
    except (OSError, ValueError) as e:
        raise LeirError(f"--scorer local:PATH: cannot load the model: {str(e)[:300]}", file=path) from None
    return model, tokenizer
