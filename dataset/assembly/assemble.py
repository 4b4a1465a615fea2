"""Final assembly of a job, from its journal, in program order: every output file.

Everything here is a pure function of the journalled task results, the sources' order and
the assembly options, so a job that was killed and resumed, or run with another number of
workers or on Ray, assembles to the same bytes (only measured times differ: row timings, the
preference pairs they decide, the speedup plot and the throughput section of stats.json).
Files are written under ``.journal/staging`` and moved into place at the end; a job killed in
between is simply assembled again by the next run.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import Counter, defaultdict
from pathlib import Path

from . import mix as mixing
from ..text import pairwise, row_format
from .difficulty import BUCKETS, PAPER_MIX, mix
from .filtering import (
    EXPANSION,
    MEDIUM_CAP,
    RATES,
    SIMPLIFICATION,
    MultiFilter,
    easy_group,
    keep_single,
    multi_subsets,
)
from .file_schema import CONFIGS, FILES, SPLIT_FILES, SPLITS, arrow_schema, file_path, to_arrow
from .states import StateStats, by_state
from ..timing import TimingTally

OUTPUT_FILES = ("rows.jsonl", "failures.jsonl", "skipped.jsonl", "stats.json", "README.md")
CHAT_KINDS = {"single": ("single.jsonl", "single_trl.jsonl"), "multi": ("multi.jsonl", "multi_trl.jsonl")}


def held_out_types(types: list[str], seed: int, fraction: float, group=None) -> set[str]:
    """Program types held out for the test split: the first ``round(fraction * n)`` (at least one
    when there are two or more types) in a seeded hash order. Whole types, never split across.
    ``group`` (a type -> its group, e.g. ``dataset.families.family``): whole groups instead, the
    fraction counted in groups, so no group has types in both splits."""
    uniq = list(dict.fromkeys(types))
    key = group or (lambda t: t)
    groups = list(dict.fromkeys(key(t) for t in uniq))
    if fraction <= 0 or len(groups) < 2:
        return set()
    n = min(len(groups) - 1, max(1, round(fraction * len(groups))))
    ranked = sorted(groups, key=lambda g: hashlib.sha256(f"{seed}:split:{g}".encode()).hexdigest())
    held = set(ranked[:n])
    return {t for t in uniq if key(t) in held}


def _dumps(rec) -> str:
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"))


class _Lines:
    """A JSON-lines file being written (into the staging folder)."""

    def __init__(self, path: Path):
        self.path = path
        self.f = open(path, "w")
        self.count = Counter()

    def write(self, rec: dict) -> None:
        self.f.write(_dumps(rec) + "\n")
        self.count[rec.get("split", "all")] += 1

    def close(self) -> None:
        self.f.close()


class _SplitLines:
    """A training file written split by split (``train/NAME``, ``test/NAME``): no file mixes
    the splits, so a trainer pointed at one never sees the other's rows."""

    def __init__(self, stage: Path, name: str):
        self.files = {}
        for s in SPLITS:
            (stage / s).mkdir(exist_ok=True)
            self.files[s] = _Lines(stage / s / name)
        self.count = Counter()

    def write(self, rec: dict) -> None:
        self.files[rec["split"]].write(rec)
        self.count[rec["split"]] += 1

    def close(self) -> None:
        for f in self.files.values():
            f.close()


def row_facts(row: dict) -> dict:
    """What a chat row carries to filter by: the step's strategy, difficulty bucket and
    exactness, the numerical risk, and (when the row was timed) the speedup and verdict; the
    timing record is read with ``.get`` (older records have no verdict)."""
    timing = row.get("timing") or {}
    return {"strategy": row["step"]["strategy"], "bucket": row["difficulty"]["bucket"],
            "exactness": row["step"]["exactness"], "numerical_risk": row["numerical_risk"],
            "speedup": timing.get("speedup"), "verdict": timing.get("verdict")}


def chat_single(row: dict) -> tuple[dict, dict]:
    prompt = row_format.single_prompt(row["program"], row_format.verified_exactly(row))
    answer = row_format.single_answer(row["cot"], row_format.single_label(row["transformed"], row["step"]["strategy"]))
    return _chat(row["id"], prompt, answer, row["split"], row_facts(row))


def chat_multi(items: list[dict]) -> tuple[dict, dict]:
    """A multi-answer row: its facts are lists (one entry per answer), its numerical risk
    whether any answer has one; the prompt promises bitwise identical outputs only when every
    answer was verified exactly."""
    program = items[0]["program"]
    prompt = row_format.multi_prompt(program, len(items), all(row_format.verified_exactly(r) for r in items))
    label = row_format.multi_label([(r["transformed"], r["step"]["strategy"]) for r in items])
    answer = row_format.multi_answer([r["cot"] for r in items], label)
    rid = hashlib.sha256("|".join(r["id"] for r in items).encode()).hexdigest()[:16]
    each = [row_facts(r) for r in items]
    facts = {k: [f[k] for f in each] for k in each[0]}
    facts["numerical_risk"] = any(facts["numerical_risk"])
    return _chat(rid, prompt, answer, items[0]["split"], facts)


def kernel_stats(c) -> dict:
    """stats.json's ``kernel_menu`` section: rows, answers per move label, moves timed, pages asked
    (``c``: the assembly's counters)."""
    rows = sum(c["kernel_labels"].values())
    return {"rows": rows, "answers_per_label": dict(sorted(c["kernel_labels"].items())),
            "moves_timed": c["kernel_moves"]["timed"], "pages": c["kernel_moves"]["pages"]}


def _chat(rid: str, prompt: str, answer: str, split: str, facts: dict) -> tuple[dict, dict]:
    msgs = row_format.messages(prompt, answer)
    return ({"id": rid, "messages": msgs, "split": split, **facts},
            {"id": rid, "prompt": msgs[:1], "completion": msgs[1:], "split": split, **facts})




class Assembly:
    """Streams the task results into the output files and counts what the statistics report.

    Chat rows wait in a pool (``.journal/staging/pool.jsonl``) until every task is in: the mix
    (``--mix``) is decided over all of them, then the kept ones are written split by split."""

    def __init__(self, out: Path, options: dict):
        self.out = Path(out)
        self.options = options
        self.stage = self.out / ".journal" / "staging"
        if self.stage.exists():
            shutil.rmtree(self.stage)
        self.stage.mkdir(parents=True)
        self.files = {name: (_SplitLines(self.stage, name) if name in SPLIT_FILES else _Lines(self.stage / name))
                      for name in FILES}
        self.pool = open(self.stage / "pool.jsonl", "w")
        self.pooled: list[tuple[str, mixing.Item]] = []      # (split, item) of each pooled chat row
        self.seed = int(options.get("seed") or 0)
        self.multi = MultiFilter(cap=int(options.get("medium_cap") or MEDIUM_CAP))
        self.keys: dict[str, str] = {}
        self.c = defaultdict(Counter)              # named counters
        self.difficulty: dict[str, dict] = {}
        self.lengths: list[tuple[int, int, int, int]] = []
        self.speedups: list[float] = []
        self.timings = TimingTally()
        self.final_buckets = Counter()
        self.mix_reports: dict[str, dict] = {}
        self.seconds = 0.0
        self.states = StateStats(options.get("target") or "llvm", options.get("strategy_names"))
        self.kernel_ids: set[str] = set()          # kernel rows written (a question once)
        self.timed_ids: set[str] = set()           # timed menus written (a question once)
        self.timed_counts = Counter()              # what their examples count (dataset.text.pairwise)

    # ------------------------------------------------------------------ per task

    def note(self, source: str, reason: str, message: str) -> None:
        self.files["skipped.jsonl"].write({"source": source, "reason": reason, "message": message})
        self.c["skipped"][reason] += 1

    def left_out(self, source: str, reason: str, message: str) -> None:
        """A source that never became a task (a file that does not read): a source all the same,
        so that the card's programs and left-out sources add up to its sources."""
        self.c["sources"]["tasks"] += 1
        self.note(source, reason, message)

    def add(self, spec: dict, res: dict, split: str) -> None:
        self.c["sources"]["tasks"] += 1
        self.seconds += res.get("seconds") or 0.0
        if res["status"] != "ok":
            note = res["note"] or {}
            return self.note(res["source"], note.get("reason", "skipped"), note.get("message", ""))
        first = self.keys.get(res["key"])
        if first is not None:
            return self.note(res["source"], "duplicate", f"the same program (modulo renaming) as {first}")
        self.keys[res["key"]] = res["source"]
        self.c["sources"]["programs"] += 1
        self.c["splits"][f"{split}_programs"] += 1
        for k, v in res["counts"].items():
            self.c["candidates"][k] += v
        for k, v in (res.get("builds") or {}).items():
            self.c["builds"][k] += v
        rows = self.states.add(res, keep_noop=bool(self.options.get("keep_noop")))
        for r in rows:
            r["split"] = split
            self._archive(r)
        self._failures(res)
        self.add_rows(rows)
        if self.options.get("time"):
            self._preferences(rows, res.get("menu") or [], split)
        if self.options.get("kernel_menu"):
            self._kernel_rows(res.get("kernel_menu") or [], split)
        if self._timed_menus_asked():
            self._timed_menus(res.get("timed_menus") or [], split)

    def _timed_menus_asked(self) -> bool:
        return bool(self.options.get("time") and (self.options.get("menu") or self.options.get("kernel_menu")))

    def _timed_menus(self, records: list[dict], split: str) -> None:
        """Every timed menu of one task, answered or not (``timed_menus.jsonl``), and the pairwise,
        pointwise and preference examples of its timings (``dataset.text.pairwise``); a question an
        earlier task asked already is written once."""
        for rec in records:
            if rec["id"] in self.timed_ids:
                continue
            self.timed_ids.add(rec["id"])
            rec["split"] = split
            self.files["timed_menus.jsonl"].write(rec)
            got, counts = pairwise.examples_of(rec, self.seed)
            self.timed_counts.update(counts)
            for name, examples in got.items():
                for ex in examples:
                    self.files[name].write(ex)

    def _preferences(self, rows: list[dict], menus: list[dict], split: str) -> None:
        """Preference pairs of the single form (rows of one state, by their verdicts) and the menu
        rows with their pairs (``dataset.text.menu``)."""
        from ..text.menu import menu_row_pairs, single_row_pairs
        for group in by_state(rows):       # a prompt is one state's program
            for p in single_row_pairs(group, chat_single):
                self.files["preferences.jsonl"].write(p)
        for m in menus:
            m["split"] = split
            self.files["menu.jsonl"].write(m)
            self.c["menu_strategies"][m["strategy"]] += 1
            for p in menu_row_pairs(m):
                self.files["preferences_menu.jsonl"].write(p)

    def _kernel_rows(self, rows: list[dict], split: str) -> None:
        """The kernel rows of one task with their pairs (``dataset.text.kernel_menu``); a question
        an earlier task asked already (the same program name, slot and kernel) is written once."""
        from ..text.kernel_menu import kernel_row_pairs
        for k in rows:
            if k["id"] in self.kernel_ids:
                continue
            self.kernel_ids.add(k["id"])
            k["split"] = split
            self.files["kernel_menu.jsonl"].write(k)
            self.c["kernel_labels"][k["label"]] += 1
            self.c["kernel_moves"]["timed"] += sum(1 for e in k["moves"] if e["timing"] is not None)
            self.c["kernel_moves"]["pages"] += k["pages"]
            for p in kernel_row_pairs(k):
                self.files["preferences_kernel_menu.jsonl"].write(p)

    def add_rows(self, rows: list[dict]) -> None:
        """The chat rows of one program's verified rows (each with its ``split``): the paper's
        filters, after ``--one-per-strategy`` when asked; into the pool."""
        if self.options.get("one_per_strategy"):
            rows = mixing.one_per_strategy(rows, self.seed)
        for r in rows:
            self._single(r)
        for group in by_state(rows):           # a prompt is one state's program
            self._multi(group)

    def _archive(self, r: dict) -> None:
        s, b = r["step"]["strategy"], r["difficulty"]["bucket"]
        self.files["rows.jsonl"].write(r)
        self.c["rows_per_strategy"][s] += 1
        self.c["verified_buckets"][b] += 1
        self.difficulty.setdefault(s, r["difficulty"] | {"category": r["step"]["category"]})
        self.lengths.append((len(r["program"]["leir"]), len(r["tir"]["original"]), len(r["transformed"]),
                             len(r["tir"]["transformed"])))
        if r["timing"]:
            self.speedups.append(r["timing"]["speedup"])
            self.timings.add(r["timing"])

    def _single(self, r: dict) -> None:
        s, b = r["step"]["strategy"], r["difficulty"]["bucket"]
        group = b if b != "easy" else f"easy_{easy_group(s)}"
        self.c["single_in"][group] += 1
        if keep_single(b, s, r["program"]["leir"], r["transformed"], self.seed):
            self.c["single_kept"][group] += 1
            self._pool("single", (b,), *chat_single(r))

    def _pool(self, kind: str, buckets: tuple, chat: dict, trl: dict) -> None:
        self.pool.write(_dumps({"kind": kind, "chat": chat, "trl": trl}) + "\n")
        self.pooled.append((chat["split"], mixing.Item(chat["id"], kind, buckets)))

    def _failures(self, res: dict) -> None:
        for f in res["failures"]:
            rec = dict(f)
            self.files["failures.jsonl"].write(rec)
            self._bug(rec["step"]["rule"], rec["step"]["strategy"], rec["stage"],
                      (rec["verdict"] or {}).get("reason") or rec["stage"])
        for bad in res["invalid"]:
            text = json.dumps([res["program"], bad["rule"], bad["error"]], sort_keys=True)
            rec = {"id": hashlib.sha256(text.encode()).hexdigest()[:16], "program": res["program"]["name"],
                   "source": res["source"],
                   "step": {"strategy": bad["strategy"], "category": "", "rule": bad["rule"], "site": [],
                            "params": {}, "exactness": "", "key": "", "leir": None},
                   "transformed": None, "stage": "enumerate", "verdict": None, "message": bad["error"]}
            self.files["failures.jsonl"].write(rec)
            self._bug(bad["rule"], bad["strategy"], "enumerate", "invalid neighbour")

    def _bug(self, rule: str, strategy, stage: str, reason: str) -> None:
        b = self.c.setdefault(f"bug:{rule}", Counter())
        b["count"] += 1
        b[f"stage:{stage}"] += 1
        b[f"reason:{reason}"] += 1
        self.c["bug_strategy"][rule] = strategy or ""

    def _multi(self, rows: list[dict]) -> None:
        if len(rows) < 2:
            return
        key = rows[0]["id"]
        subsets = multi_subsets(len(rows), self.seed, key, int(self.options.get("multi_rows") or 6),
                                int(self.options.get("multi_items") or 6))
        cands = [[{"bucket": rows[i]["difficulty"]["bucket"], "strategy": rows[i]["step"]["strategy"],
                   "transformed": rows[i]["transformed"], "row": rows[i]} for i in sub] for sub in subsets]
        for kept in self.multi.filter_program(cands):
            items = [it["row"] for it in kept]
            self._pool("multi", tuple(it["bucket"] for it in kept), *chat_multi(items))

    # ------------------------------------------------------------------ the end

    def _write_chat(self) -> None:
        """The pooled chat rows, mixed when asked (each split on its own), into their files."""
        self.pool.close()
        name = self.options.get("mix")
        keep = None
        if name:
            keep = set()
            for split in SPLITS:
                items = [it for s, it in self.pooled if s == split]
                ids, self.mix_reports[split] = mixing.select(items, name, self.seed)
                keep |= ids
        for _split, it in self.pooled:
            if keep is None or it.id in keep:
                self.final_buckets.update(it.buckets)
        with open(self.stage / "pool.jsonl") as f:
            for line in f:
                rec = json.loads(line)
                if keep is None or rec["chat"]["id"] in keep:
                    chat_name, trl_name = CHAT_KINDS[rec["kind"]]
                    self.files[chat_name].write(rec["chat"])
                    self.files[trl_name].write(rec["trl"])
        (self.stage / "pool.jsonl").unlink()

    def finish(self, job: dict, throughput: dict, split_info: dict) -> dict:
        self._write_chat()
        for f in self.files.values():
            f.close()
        written = self._parquet()
        stats = self._stats(job, throughput, split_info, written)
        (self.stage / "stats.json").write_text(json.dumps(stats, indent=1, sort_keys=False) + "\n")
        from .card import dataset_card
        (self.stage / "README.md").write_text(dataset_card(stats, written))
        plots = []
        if self.options.get("plots", True):
            from .plots import make_plots
            plots = make_plots(self.stage / "plots", stats, self.lengths, self.speedups)
        self._move_into_place(written, plots)
        return stats

    def _parquet(self) -> dict:
        """Parquet copies of each config, one file per split that has rows: {config: {split: rows}}."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        written: dict[str, dict[str, int]] = {}
        for config, name in CONFIGS.items():
            counts = self.files[name].count
            splits = [s for s in SPLITS if counts.get(s)]
            if not splits:
                continue
            schema = arrow_schema(FILES[name])
            folder = self.stage / "data" / config
            folder.mkdir(parents=True, exist_ok=True)
            writers = {s: pq.ParquetWriter(folder / f"{s}.parquet", schema) for s in splits}
            batches: dict[str, list] = {s: [] for s in splits}
            sources = [self.stage / file_path(name, s) for s in splits] if name in SPLIT_FILES else [self.stage / name]
            for path in sources:
                with open(path) as f:
                    for line in f:
                        rec = to_arrow(FILES[name], json.loads(line))
                        batches[rec["split"]].append(rec)
                        if len(batches[rec["split"]]) >= 512:
                            writers[rec["split"]].write_table(pa.Table.from_pylist(batches[rec["split"]], schema))
                            batches[rec["split"]] = []
            for s in splits:
                if batches[s]:
                    writers[s].write_table(pa.Table.from_pylist(batches[s], schema))
                writers[s].close()
            written[config] = {s: counts[s] for s in splits}
        return written

    def _stats(self, job: dict, throughput: dict, split_info: dict, written: dict) -> dict:
        single = {}
        for group in ("easy_simplification", "easy_expansion", "medium", "difficult"):
            n_in, n_kept = self.c["single_in"][group], self.c["single_kept"][group]
            entry = {"in": n_in, "kept": n_kept, "rate": round(n_kept / n_in, 4) if n_in else None}
            if group.startswith("easy_"):
                entry["paper_rate"] = RATES[group[5:]]
            single[group] = entry
        mf = self.multi
        bugs = {}
        for key in sorted(k for k in self.c if k.startswith("bug:")):
            rule, cnt = key[4:], self.c[key]
            bugs[rule] = {"strategy": self.c["bug_strategy"][rule], "count": cnt["count"],
                          "stages": {k[6:]: v for k, v in sorted(cnt.items()) if k.startswith("stage:")},
                          "reasons": {k[7:]: v for k, v in sorted(cnt.items()) if k.startswith("reason:")}}
        difficulty = {s: self.difficulty[s] for s in sorted(self.difficulty)}
        rows = sum(self.c["rows_per_strategy"].values())
        tp = dict(throughput)
        tp["worker_seconds"] = round(self.seconds, 3)        # wall time of the tasks, summed
        tp["verified_rows_per_worker_minute"] = round(rows / (self.seconds / 60), 2) if self.seconds else None
        return {
            "job": job,
            "sources": {"tasks": self.c["sources"]["tasks"], "programs": self.c["sources"]["programs"],
                        "skipped": dict(sorted(self.c["skipped"].items()))},
            "candidates": {k: self.c["candidates"][k] for k in ("neighbours", "sampled", "verified", "failed")},
            "builds": dict(sorted(self.c["builds"].items())),
            "rows": rows,
            "rows_per_strategy": dict(sorted(self.c["rows_per_strategy"].items())),
            "failures": sum(b["count"] for b in bugs.values()),
            "failures_per_rule": bugs,
            "difficulty": difficulty,
            "bucket_disagreements": sorted(s for s, d in difficulty.items() if d["bucket"] != d["computed_bucket"]),
            "filter": {
                "single": {**single, "rows_in": sum(self.c["single_in"].values()),
                           "rows_kept": sum(self.c["single_kept"].values()),
                           "groups": {"simplification": list(SIMPLIFICATION), "expansion": list(EXPANSION)}},
                "multi": {"rows_in": mf.rows_in, "rows_kept": mf.rows_kept, "dropped": dict(sorted(mf.dropped.items())),
                          "items_in": {b: mf.items_in.get(b, 0) for b in BUCKETS},
                          "items_kept": {b: mf.items_kept.get(b, 0) for b in BUCKETS}, "medium_cap": mf.cap,
                          "max_items": int(self.options.get("multi_items") or 6),
                          "max_rows_per_program": int(self.options.get("multi_rows") or 6)},
                "one_per_strategy": bool(self.options.get("one_per_strategy")),
            },
            "bucket_mix": {"verified": mix(self.c["verified_buckets"]), "dataset": mix(self.final_buckets),
                           "paper": PAPER_MIX, "verified_counts": {b: self.c["verified_buckets"][b] for b in BUCKETS},
                           "dataset_counts": {b: self.final_buckets[b] for b in BUCKETS}},
            **self.states.stats(),
            "mix": ({"name": self.options["mix"], "splits": self.mix_reports} if self.options.get("mix") else None),
            "splits": split_info | {"programs": {s: self.c["splits"][f"{s}_programs"] for s in SPLITS}},
            "files": {name: dict(sorted(self.files[name].count.items())) for name in FILES} | {"parquet": written},
            "throughput": tp,
            "menu": {"rows": sum(self.c["menu_strategies"].values()),
                     "answers_per_strategy": dict(sorted(self.c["menu_strategies"].items()))},
            **({"kernel_menu": kernel_stats(self.c)} if self.options.get("kernel_menu") else {}),
            **({"timed_menus": pairwise.stats_of(self.timed_counts)} if self._timed_menus_asked() else {}),
        } | ({"timing": self._timing_stats(rows)} if self.options.get("time") else {})

    def _timing_stats(self, rows: int) -> dict:
        return {**self.options["time"], "rows_timed": self.timings.rows, "rows_untimed": rows - self.timings.rows,
                **self.timings.summary()}

    def _writes(self, name: str) -> bool:
        """Whether this job makes a split file (pairs need --time, menu rows --menu)."""
        if name in ("menu.jsonl", "preferences_menu.jsonl"):
            return bool(self.options.get("menu"))
        if name in ("kernel_menu.jsonl", "preferences_kernel_menu.jsonl"):
            return bool(self.options.get("kernel_menu"))
        if name == "preferences.jsonl":
            return bool(self.options.get("time"))
        if name in ("pairwise.jsonl", "pointwise.jsonl", "preferences_pairwise.jsonl", "timed_menus.jsonl"):
            return self._timed_menus_asked()
        return True

    def _move_into_place(self, written: dict, plots: list[str]) -> None:
        out = self.out
        for name in OUTPUT_FILES:
            os.replace(self.stage / name, out / name)
        if self._writes("timed_menus.jsonl"):          # the archive of timed menus, with --menu or --kernel-menu
            os.replace(self.stage / "timed_menus.jsonl", out / "timed_menus.jsonl")
        else:
            (out / "timed_menus.jsonl").unlink(missing_ok=True)
        for name in SPLIT_FILES:
            for s in SPLITS:
                (out / s).mkdir(exist_ok=True)
                if not self._writes(name):
                    (out / s / name).unlink(missing_ok=True)
                    continue
                os.replace(self.stage / s / name, out / s / name)
        for name in FILES:              # the mixed-split files of an older layout
            if name in SPLIT_FILES:
                (out / name).unlink(missing_ok=True)
        data = out / "data"
        for config, splits in written.items():
            (data / config).mkdir(parents=True, exist_ok=True)
            for s in splits:
                os.replace(self.stage / "data" / config / f"{s}.parquet", data / config / f"{s}.parquet")
        if data.exists():       # copies a previous run made that this one does not
            for p in sorted(data.glob("*/*.parquet")):
                if p.stem not in written.get(p.parent.name, {}):
                    p.unlink()
        (out / "plots").mkdir(exist_ok=True)
        for name in plots:
            os.replace(self.stage / "plots" / name, out / "plots" / name)
        for p in (out / "plots").glob("*.png"):
            if p.name not in plots:
                p.unlink()
        shutil.rmtree(self.stage, ignore_errors=True)
