"""The dataset card (``OUT/README.md``): YAML front matter whose ``configs`` make
``datasets.load_dataset(OUT, name)`` load each config with its train/test splits, then a short
description of the files and the job's figures."""
from __future__ import annotations

import yaml

from .difficulty import BUCKETS

DESCRIPTIONS = {
    "single": "single-answer rows in the chat `messages` format (prompt text of the Step-TP paper, "
              "`<think>` chain-of-thought, `<answer>` JSON label), filtered as the paper prescribes; each row also "
              "carries `strategy`, `bucket`, `exactness`, `numerical_risk`, `speedup` and `verdict` (null when "
              "not timed) to filter by",
    "multi": "multi-answer rows in the `messages` format, filtered as the paper prescribes; the same fields, as "
             "lists (one entry per answer; `numerical_risk`: any answer's)",
    "single_trl": "the single-answer rows as conversational `prompt` / `completion` pairs (TRL)",
    "multi_trl": "the multi-answer rows as conversational `prompt` / `completion` pairs (TRL)",
    "rows": "the archival record of every verified rewrite, unfiltered, both splits with a `split` column: "
            "program, step (`Step.to_json()`; in this Parquet copy `step.params` is JSON text, in `rows.jsonl` an "
            "object), transformed LEIR, difficulty, chain-of-thought, verification, timing, TIR (and CUDA) text, "
            "`noop_on_target` (with --target cuda), and the `state` the row's program is: `depth` (verified steps "
            "from the source), `path` (those steps, replayable with `engine.apply --steps`; each step is JSON text "
            "in the Parquet copy) and `parent` (the row that reached it)",
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
    "kernel_menu": "the kernel search's question at one statement's kernel (`python -m search`'s default "
                   "`--algorithm kernels`, its `--policy llm` request, byte for byte, page by page) answered with "
                   "the number of the move measured fastest among those measured faster, after a `<think>` reason; "
                   "`moves` lists every timed move with its steps, timing and verdict; `kernel`, `slot` and "
                   "`program` say where the question was asked",
    "preferences_kernel_menu": "DPO pairs of the kernel form: the kernel question's conversation, the answer "
                               "(chosen) and a move of the same page measured slower or tied (rejected)",
    "pairwise": "which of two moves is faster, from every timed menu (`timed_menus.jsonl`, answered or not): the "
                "question's system message and header (the kernel, or the state), two entries whose intervals "
                "against the same parent lie apart by more than the noise floor, in a seeded order, and the answer "
                "`1` or `2`; `form` says whether the question is the kernel search's (`kernel`) or the search's "
                "(`menu`)",
    "pointwise": "whether one move is faster than the current kernel or program, from every timed menu: an entry "
                 "measured faster (`yes`) or slower (`no`); ties are left out",
    "preferences_pairwise": "DPO pairs from the same decisive pairs as `pairwise`, on the question the search "
                            "itself asks (its first request): the faster entry's number (chosen), the other's "
                            "(rejected)",
}
TRAINING = {
    "single": "SFT", "multi": "SFT", "single_trl": "SFT (loss on the completion)",
    "multi_trl": "SFT (loss on the completion)", "menu": "SFT (the task `--policy llm` asks)",
    "rows": "not for training: the archive the others are made from",
    "preferences": "DPO, after SFT", "preferences_menu": "DPO, after SFT on `menu`",
    "kernel_menu": "SFT (the task the kernel search's `--policy llm` asks)",
    "preferences_kernel_menu": "DPO, after SFT on `kernel_menu`",
    "pairwise": "SFT (`python -m dataset.train --examples ...,pairwise`)",
    "pointwise": "SFT (`python -m dataset.train --examples ...,pointwise`)",
    "preferences_pairwise": "DPO, after SFT (`--examples ...,pairwise --dpo`)",
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
    held = "operator families (`--split-by family`)" if job.get("split_by") == "family" else "program types"
    lines += ["", f"Whole {held} are held out for `test`. The training files are also JSON lines, one file "
              "per split, never both splits in one file: `train/single.jsonl` and `test/single.jsonl`, and the "
              "same for `multi`, `single_trl`, `multi_trl` (`preferences` with `--time`; `menu` and `preferences_menu` with `--menu`; `kernel_menu` and "
              "`preferences_kernel_menu` with `--kernel-menu`; `pairwise`, `pointwise` and `preferences_pairwise` "
              "with either, made from every timed menu kept in `timed_menus.jsonl`); point a trainer at "
              "the `train/` file as it is. `rows.jsonl` (the archive, not a training file) keeps both splits with "
              "their `split`.", "",
              "Prompts and labels use the same key, `applied_strategies` (a list of the one strategy applied), as "
              "the search's free-form prompt does; the prompt promises *bitwise identical* outputs only on rows "
              "verified exactly (a bitwise rule compared exactly), the others ask for outputs *numerically "
              "equivalent within the stated tolerance* and state it. Sources are named relative to the argument "
              "they came from, with their sha256: nothing here names a path of the generating machine.", "",
              "How to train on each config: docs/training.md of leir-engine (SFT with TRL on "
              "`menu`, then DPO on `preferences_menu`). In Parquet a menu entry's step parameters are JSON text.", "",
              *_mix_lines(stats), "## Figures", "",
              f"- programs: {stats['sources']['programs']} of {stats['sources']['tasks']} sources "
              f"(left out: {_counts(stats['sources']['skipped'])})",
              f"- candidates verified: {stats['candidates']['sampled']} of {stats['candidates']['neighbours']} "
              f"one-step rewrites listed; rows: {stats['rows']}; failures (rule bugs): {stats['failures']}",
              f"- states: {stats['depth']['states']}; rows per state depth: "
              + (", ".join(f"{d}: {n}" for d, n in stats["depth"]["rows_per_depth"].items()) or "none")
              + f"; strategies without rows: {len(stats['depth']['strategies_without_rows'])}",
              *([f"- rows that change nothing on the CUDA target: {stats['noop_on_target']['noop_rows']} "
                 f"({'kept' if stats['noop_on_target']['kept'] else 'dropped'})"]
                if stats["noop_on_target"]["compared"] else []),
              "- strategy mix (difficult / medium / easy %): dataset "
              + " / ".join(str(mix["dataset"][b]) for b in reversed(BUCKETS)) + ", paper "
              + " / ".join(str(mix["paper"][b]) for b in reversed(BUCKETS)),
              *_timed_menus(stats.get("timed_menus")), *_timing(stats.get("timing")), "", "## Job", "", "```json", _json(job), "```", ""]
    return "\n".join(lines)


def _mix_lines(stats: dict) -> list[str]:
    m = stats.get("mix")
    one = (stats.get("filter") or {}).get("one_per_strategy")
    if not m and not one:
        return []
    out = ["## Mix", ""]
    if one:
        out.append("- one verified row per (program, strategy) in the chat rows (`--one-per-strategy`), as the paper")
    if m:
        out.append(f"- `--mix {m['name']}`: chat rows down-sampled after verification to the paper's mix")
        for split, r in m["splits"].items():
            a, t = r["achieved"], r["target"]
            out.append(f"  - {split}: difficult / medium / easy "
                       + " / ".join(str(a["buckets"][b]) for b in reversed(BUCKETS)) + " % (target "
                       + " / ".join(str(t["buckets"][b]) for b in reversed(BUCKETS)) + f"), single : multi "
                       f"{a['kinds']['single']} : {a['kinds']['multi']} (target {t['kinds']['single']:g} : "
                       f"{t['kinds']['multi']:g}); " + (f"within {r['within_points']:g} points" if r["within"]
                                                          else "short: " + "; ".join(r["short"])))
    return out + [""]


def _timing(t: dict | None) -> list[str]:
    """The card's timing section: how the speed labels were measured, and on which machine(s)."""
    if not t:
        return []
    v = t["verdicts"]
    lines = ["", "## Timings", "",
             f"Each row's program was timed against its parent (the program the step was applied to) in "
             f"interleaved rounds on one warm worker (parent, candidate, parent, ... under a machine-wide timing "
             f"lock), at most {t['rounds']} rounds: a candidate stops as soon as its verdict is clear (the sequential "
             f"rule looks every {t.get('look_every', 0) or t['rounds']} rounds, each look's interval at a confidence "
             f"corrected for the number of looks, so every verdict holds at {t['confidence']:g} overall). "
             f"`timing.speedup` is the median of the per-round ratios parent / candidate, "
             f"`timing.ci` its distribution-free confidence interval (sign test), and "
             f"`timing.verdict` is `faster` or `slower` when the interval clears the noise floor {t['noise_floor']:g} "
             f"(1 ± the floor), else `tie`; `timing.samples` keeps the paired times every figure is re-derived from "
             f"(`python -m dataset.check`). Timings say how fast a program ran on the machine named below, not "
             f"elsewhere; the measured times are the only part of a job that differs between two runs.", "",
             f"- verdicts: {v['faster']} faster, {v['slower']} slower, {v['tie']} tie "
             f"({t['rows_untimed']} rows could not be timed)"]
    for m in t["machines"]:
        gpu = f", GPU {m['machine']['gpu']}" if m["machine"].get("gpu") else ""
        lines.append(f"- measured on: target {m['target']}, CPU {m['machine']['cpu']}{gpu}, "
                     f"{m['machine']['cores']} cores ({m['rows']} rows)")
    if len(t["machines"]) > 1:
        lines.append("- WARNING: timings of several machines or targets; compare speedups only within one")
    return lines


def _timed_menus(t: dict | None) -> list[str]:
    """The card's figure of the examples made from every timed menu (``dataset.text.pairwise``)."""
    if not t:
        return []
    return [f"- timed menus: {t['menus']} ({t['kernel_menus']} kernel, {t['menu_menus']} menu), {t['entries_timed']} "
            f"entries timed; pairwise examples: {t['pairwise']} of {t['decisive_pairs']} decisive pairs (at most "
            f"{t['pairs_per_menu']} a menu); pointwise: {t['pointwise_yes']} yes, {t['pointwise_no']} no "
            f"({t['pointwise_ties_left_out']} ties left out); preference pairs: {t['preferences_pairwise']}"]


def _counts(d: dict) -> str:
    return ", ".join(f"{n} {k}" for k, n in d.items()) or "none"


def _json(x) -> str:
    import json
    return json.dumps(x, indent=1, sort_keys=True)
