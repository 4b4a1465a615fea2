"""The dataset card (``OUT/README.md``): YAML front matter whose ``configs`` make
``datasets.load_dataset(OUT, name)`` load each config with its train/test splits, then a short
description of the files and the job's figures."""
from __future__ import annotations

import yaml

from .difficulty import BUCKETS

DESCRIPTIONS = {
    "single": "single-answer rows in the chat `messages` format (prompt text of the Step-TP paper, "
              "`<think>` chain-of-thought, `<answer>` JSON label), filtered as the paper prescribes",
    "multi": "multi-answer rows in the `messages` format, filtered as the paper prescribes",
    "single_trl": "the single-answer rows as conversational `prompt` / `completion` pairs (TRL)",
    "multi_trl": "the multi-answer rows as conversational `prompt` / `completion` pairs (TRL)",
    "rows": "the archival record of every verified rewrite, unfiltered: program, step provenance, transformed "
            "LEIR, difficulty, chain-of-thought, verification, timing, TIR (and CUDA) text",
    "preferences": "DPO pairs in TRL's conversational `prompt` / `chosen` / `rejected` form, single-answer form: "
                   "the paper's single prompt for a state, the row measured faster (chosen) and one measured slower "
                   "or tied (rejected)",
    "menu": "the search's own question (`python -m search --policy llm`'s request for the state, byte for byte, as "
            "`messages` with its system prompt) answered with the number of the entry measured fastest among those "
            "measured faster, after a `<think>` reason: the rule's description, what the step changes here, what "
            "it can improve, the measured speedup and its interval; `menu` lists every entry shown with its step, "
            "timing and verdict",
    "preferences_menu": "DPO pairs of the menu form: the menu prompt, the answer (chosen) and an entry measured "
                        "slower or tied (rejected), each as its reason and number",
}
TRAINING = {
    "single": "SFT", "multi": "SFT", "single_trl": "SFT (loss on the completion)",
    "multi_trl": "SFT (loss on the completion)", "menu": "SFT (the task `--policy llm` asks)",
    "rows": "not for training: the archive the others are made from",
    "preferences": "DPO, after SFT", "preferences_menu": "DPO, after SFT on `menu`",
}


def dataset_card(stats: dict, written: dict) -> str:
    configs = []
    for name, splits in written.items():
        entry = {"config_name": name,
                 "data_files": [{"split": s, "path": f"data/{name}/{s}.parquet"} for s in splits]}
        if name == "single":
            entry["default"] = True
        configs.append(entry)
    front = {"configs": configs, "task_categories": ["text-generation"],
             "tags": ["tensor-programs", "compilers", "step-tp", "leir", "chain-of-thought"]}
    job = stats["job"]
    mix = stats["bucket_mix"]
    lines = ["---", yaml.safe_dump(front, sort_keys=False).rstrip(), "---", "",
             "# Step-level tensor-program rewrites (leir-engine)", "",
             "Every row is one rewrite of a LEIR tensor program by one strategy rule, verified on TVM before it was "
             "written (3 seeded trials; bitwise-exact rules compared exactly, reassociating ones within a strict "
             "dtype-aware bound), with a chain-of-thought rendered from the rule's metadata and the step's "
             "provenance. Made by `python -m dataset.generate`; `python -m dataset.check` re-derives every claim.",
             "", "## Configs", ""]
    for name, splits in written.items():
        counts = ", ".join(f"{s}: {n}" for s, n in splits.items())
        lines.append(f"- `{name}` ({counts}): {DESCRIPTIONS[name]}. Train with: {TRAINING[name]}.")
    lines += ["", "Whole program types are held out for `test`; the same rows are also in the JSON-lines files at "
              "the top of this folder (`single.jsonl`, `multi.jsonl`, `single_trl.jsonl`, `multi_trl.jsonl`, "
              "`rows.jsonl`), each row with its `split`; `menu.jsonl`, `preferences.jsonl` and "
              "`preferences_menu.jsonl` are in `train/` and `test/`, one file per split. In Parquet a menu entry's "
              "step parameters are JSON text. How to train on each config: docs/training.md of leir-engine "
              "(SFT with TRL on `menu`, then DPO on `preferences_menu`).", "", "## Figures", "",
              f"- programs: {stats['sources']['programs']} of {stats['sources']['tasks']} sources "
              f"(left out: {_counts(stats['sources']['skipped'])})",
              f"- candidates verified: {stats['candidates']['sampled']} of {stats['candidates']['neighbours']} "
              f"one-step rewrites listed; rows: {stats['rows']}; failures (rule bugs): {stats['failures']}",
              "- strategy mix (difficult / medium / easy %): dataset "
              + " / ".join(str(mix["dataset"][b]) for b in reversed(BUCKETS)) + ", paper "
              + " / ".join(str(mix["paper"][b]) for b in reversed(BUCKETS)),
              "", "## Job", "", "```json", _json(job), "```", ""]
    return "\n".join(lines)


def _counts(d: dict) -> str:
    return ", ".join(f"{n} {k}" for k, n in d.items()) or "none"


def _json(x) -> str:
    import json
    return json.dumps(x, indent=1, sort_keys=True)
