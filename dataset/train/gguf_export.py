"""A trained Llama-family checkpoint as one GGUF file for llama.cpp's server.

``python -m dataset.train`` serves its models with llama.cpp (the ``llm-local`` extra's
``python -m llama_cpp.server``): it answers on the CPU at a few seconds a menu prompt and honours
a GBNF grammar, so every answer of the search's ``--constraint auto`` is a menu number. llama.cpp
reads GGUF only, and its converter (``convert_hf_to_gguf.py``) is not installed by any package,
so the conversion is done here with the ``gguf`` package (llama.cpp's own writer), for the
architecture the default base model has (``LlamaForCausalLM``: SmolLM2, Llama, TinyLlama...).

What llama.cpp expects and Hugging Face stores differently: the q and k projections' rows are
interleaved per head for rotary embeddings (the inverse of what ``transformers`` undoes when it
loads a GGUF); tensor names (``gguf.TensorNameMap``); the tokenizer as lists (tokens by id, BPE
merges, token types) with a pre-tokenizer name. The tokenizer of a base model read from a GGUF
is copied from that file as it is (same vocabulary, same pre-tokenizer); one read from a
Hugging Face folder is written from its ``tokenizer.json``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from engine.leir.diagnostics import LeirError

TYPES = ("f16", "f32", "q8_0")
ARCHITECTURES = ("LlamaForCausalLM",)


def _permute(w, n_head: int):
    """Hugging Face's q/k rows -> llama.cpp's (rotary halves interleaved per head)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_tokenizer_fields(path: str) -> list[tuple]:
    """Every ``tokenizer.*`` key of a GGUF file as (key, value, type, sub type)."""
    from gguf import GGUFReader, GGUFValueType
    reader = GGUFReader(path)
    out = []
    for name, f in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        vtype = f.types[0]
        sub = f.types[-1] if vtype == GGUFValueType.ARRAY else None
        value = f.contents()
        out.append((name, value, vtype, sub))
    return out


def pre_tokenizer_name(tokenizer_json: dict) -> str:
    """llama.cpp's pre-tokenizer for a Hugging Face byte-level BPE tokenizer, when it is one
    llama.cpp knows by a plain description (GPT-2's: byte-level with its regex)."""
    pre = tokenizer_json.get("pre_tokenizer") or {}
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True):
        return "gpt-2"
    raise LeirError("cannot tell llama.cpp's pre-tokenizer of this tokenizer (its tokenizer.json "
                    f"pre_tokenizer is {json.dumps(pre)[:120]}): serve the Hugging Face folder instead "
                    "(transformers serve, vLLM) or convert it with llama.cpp's convert_hf_to_gguf.py")


def hf_tokenizer_fields(tokenizer) -> list[tuple]:
    """The ``tokenizer.*`` keys of a Hugging Face fast BPE tokenizer."""
    from gguf import GGUFValueType, TokenType
    data = json.loads(tokenizer.backend_tokenizer.to_str())
    model = data.get("model") or {}
    if model.get("type") != "BPE":
        raise LeirError(f"GGUF export handles byte-level BPE tokenizers, not {model.get('type')}")
    vocab = tokenizer.get_vocab()
    size = max(vocab.values()) + 1
    tokens = [f"[PAD{i}]" for i in range(size)]
    for tok, i in vocab.items():
        tokens[i] = tok
    types = [int(TokenType.NORMAL)] * size
    for added in data.get("added_tokens") or []:
        types[added["id"]] = int(TokenType.CONTROL if added.get("special") else TokenType.USER_DEFINED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    fields = [("tokenizer.ggml.model", "gpt2", GGUFValueType.STRING, None),
              ("tokenizer.ggml.pre", pre_tokenizer_name(data), GGUFValueType.STRING, None),
              ("tokenizer.ggml.tokens", tokens, GGUFValueType.ARRAY, GGUFValueType.STRING),
              ("tokenizer.ggml.token_type", types, GGUFValueType.ARRAY, GGUFValueType.INT32),
              ("tokenizer.ggml.merges", merges, GGUFValueType.ARRAY, GGUFValueType.STRING)]
    for key, tid in (("bos", tokenizer.bos_token_id), ("eos", tokenizer.eos_token_id),
                     ("padding", tokenizer.pad_token_id), ("unknown", tokenizer.unk_token_id)):
        if tid is not None:
            fields.append((f"tokenizer.ggml.{key}_token_id", int(tid), GGUFValueType.UINT32, None))
    fields.append(("tokenizer.ggml.add_bos_token", tokenizer.bos_token_id is not None and
                   bool(getattr(tokenizer, "add_bos_token", False)), GGUFValueType.BOOL, None))
    if tokenizer.chat_template:
        fields.append(("tokenizer.chat_template", tokenizer.chat_template, GGUFValueType.STRING, None))
    return fields


def export_gguf(model, tokenizer, path: str, *, dtype: str = "f16", tokenizer_fields=None, name: str = "") -> Path:
    """Write ``model`` (a Hugging Face ``LlamaForCausalLM``, merged) as a GGUF file, atomically.
    ``tokenizer_fields``: the base GGUF's (``gguf_tokenizer_fields``), else the tokenizer's own."""
    import gguf
    import numpy as np
    arch = type(model).__name__
    if arch not in ARCHITECTURES:
        raise LeirError(f"GGUF export handles {', '.join(ARCHITECTURES)}, not {arch}: serve the Hugging "
                        "Face folder instead (transformers serve, vLLM)")
    if dtype not in TYPES:
        raise LeirError(f"--gguf-type must be one of {', '.join(TYPES)}, not {dtype!r}")
    cfg = model.config
    n_head, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_head
    if getattr(cfg, "rope_scaling", None) and (cfg.rope_scaling or {}).get("rope_type", "default") != "default":
        raise LeirError("GGUF export does not write rope scaling: serve the Hugging Face folder instead")
    qtype = {"f16": gguf.GGMLQuantizationType.F16, "f32": gguf.GGMLQuantizationType.F32,
             "q8_0": gguf.GGMLQuantizationType.Q8_0}[dtype]
    ftype = {"f16": gguf.LlamaFileType.MOSTLY_F16, "f32": gguf.LlamaFileType.ALL_F32,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[dtype]
    out = Path(path)
    tmp = out.with_name(out.name + ".tmp")
    w = gguf.GGUFWriter(str(tmp), "llama")
    if name:
        w.add_name(name)
    w.add_context_length(int(cfg.max_position_embeddings))
    w.add_embedding_length(int(cfg.hidden_size))
    w.add_block_count(int(cfg.num_hidden_layers))
    w.add_feed_forward_length(int(cfg.intermediate_size))
    w.add_head_count(int(n_head))
    w.add_head_count_kv(int(n_kv))
    w.add_rope_dimension_count(int(head_dim))
    rope = getattr(cfg, "rope_theta", None) or (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
    w.add_rope_freq_base(float(rope))
    w.add_layer_norm_rms_eps(float(cfg.rms_norm_eps))
    w.add_vocab_size(int(cfg.vocab_size))
    w.add_file_type(int(ftype))
    for key, value, vtype, sub in (tokenizer_fields if tokenizer_fields is not None else hf_tokenizer_fields(tokenizer)):
        w.add_key_value(key, value, vtype, sub)
    names = gguf.TensorNameMap(gguf.MODEL_ARCH.LLAMA, int(cfg.num_hidden_layers))
    tied = bool(getattr(cfg, "tie_word_embeddings", False))
    for hf_name, tensor in model.state_dict().items():
        if tied and hf_name == "lm_head.weight":
            continue                                  # llama.cpp reuses token_embd as the output
        if hf_name.endswith("rotary_emb.inv_freq"):
            continue
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise LeirError(f"GGUF export does not know the tensor {hf_name}")
        data = tensor.detach().float().cpu().numpy()
        if hf_name.endswith("q_proj.weight"):
            data = _permute(data, n_head)
        elif hf_name.endswith("k_proj.weight"):
            data = _permute(data, n_kv)
        if data.ndim == 1 or qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, data.astype(np.float32))
        elif qtype == gguf.GGMLQuantizationType.Q8_0 and data.shape[-1] % 32:
            w.add_tensor(name, data.astype(np.float16))          # Q8_0 rows are blocks of 32
        else:
            q = gguf.quants.quantize(data, qtype)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, out)
    return out
