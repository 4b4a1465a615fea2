"""``python -m dataset.check OUT``: re-derive a generated dataset and report every disagreement.

* every file against its schema (``dataset.assembly.file_schema``), the dataset card's configs against the
  Parquet copies, and the Parquet copies against the JSON-lines files, row for row; each config
  loaded with ``datasets`` (when installed);
* every row: its id, its difficulty from the rule block, its transformed program replayed
  through ``Engine.apply`` (byte for byte), its program replayed from the source along its
  ``state.path`` and its ``noop_on_target`` re-derived (``dataset.check.state_replay``), its TIR
  text regenerated, every claim of its chain-of-thought re-derived from the step and the two programs (``dataset.check.claims``);
* every chat row: the paper's prompt text, a valid JSON label naming a verified row, the trace,
  the filter's decision (easy rates, medium cap, at least two items, no duplicate answer sets),
  whole program types in one split;
* every timing (``--time``): speedup, interval and verdict re-derived from the recorded paired
  samples (``lowering.measure.stats.verdict_of``), the job's rounds, floor and confidence, one machine
  and target for the whole dataset; preference pairs only of a faster row and a slower or tied one;
* every menu row (``dataset.check.menu_rows``): its prompt asked again with the search's own function,
  each entry's verdict re-derived from its timing samples and its reason checked like a trace, the
  answer re-chosen; both preference files rebuilt from the rows and compared;
* every kernel row (``dataset.check.kernel_rows``): the kernel search's question asked again at its slot's
  kernel, the conversation compared byte for byte, each timed move's verdict re-derived and its reason
  re-rendered, the answer re-chosen and its steps replayed on the kernel; its pair file rebuilt;
* every timed menu (``dataset.check.timed_menus``, answered or not): its question asked again, each
  timing re-derived; the pairwise, pointwise and preference examples rebuilt from them and compared;
* a seeded sample of rows verified again on TVM (``--sample N``, default 20);
* at least one row (``--allow-empty`` when a dataset without rows is expected).

Exit status 0 when everything agrees, 1 when anything does not (each problem is listed), 2 on
bad input.
"""
from __future__ import annotations

import argparse
import json
import random
from collections import Counter, defaultdict
from pathlib import Path

from engine.leir.diagnostics import LeirError

from .state_replay import check_states

MAX_SHOWN = 30


class Report:
    def __init__(self):
        self.problems: list[tuple[str, str]] = []
        self.counts = Counter()

    def add(self, where: str, what: str) -> None:
        self.problems.append((where, what))

    def ok(self, kind: str, n: int = 1) -> None:
        self.counts[kind] += n


def _lines(path: Path, report: Report) -> list[dict]:
    out = []
    if not path.exists():
        return out
    for no, line in enumerate(path.read_text().splitlines(), 1):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            report.add(f"{path.name}:{no}", f"not JSON: {e.msg}")
    return out


def _read(out: Path, name: str, report: Report) -> list[dict]:
    """The records of one output file; a training file's split files joined (train, then test),
    each record's ``split`` checked against its folder."""
    from ..assembly.file_schema import SPLIT_FILES, SPLITS, file_path
    if name not in SPLIT_FILES:
        return _lines(out / name, report)
    recs = []
    for split in SPLITS:
        rel = file_path(name, split)
        part = _lines(out / rel, report)
        bad = sum(1 for r in part if isinstance(r, dict) and r.get("split") != split)
        if bad:
            report.add(rel, f"{bad} row(s) of another split in the {split} file")
        recs += part
    return recs


def check_schemas(out: Path, data: dict, report: Report) -> None:
    from ..assembly.file_schema import FILES, STATS, validator
    for name, schema in FILES.items():
        v = validator(schema)
        for no, rec in enumerate(data.get(name, []), 1):
            errs = sorted(v.iter_errors(rec), key=lambda e: list(e.path))
            for e in errs[:3]:
                report.add(f"{name}:{no}", f"schema: {'/'.join(str(p) for p in e.path)}: {e.message[:200]}")
            if not errs:
                report.ok("records")
    stats = data.get("stats.json")
    if stats is None:
        report.add("stats.json", "missing")
    else:
        for e in validator(STATS).iter_errors(stats):
            report.add("stats.json", f"schema: {e.message[:200]}")


def check_card_and_parquet(out: Path, data: dict, report: Report) -> None:
    import pyarrow.parquet as pq
    import yaml

    from ..assembly.file_schema import CONFIGS, FILES, to_arrow
    card = out / "README.md"
    if not card.exists():
        return report.add("README.md", "missing dataset card")
    text = card.read_text()
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        return report.add("README.md", "no YAML front matter")
    front = yaml.safe_load(text[4:text.index("\n---\n", 4)])
    configs = {c["config_name"]: c for c in front.get("configs", [])}
    for config, name in CONFIGS.items():
        recs = data.get(name, [])
        by_split = defaultdict(list)
        for r in recs:
            by_split[r.get("split")].append(r)
        if not recs:
            if config in configs:
                report.add("README.md", f"config '{config}' lists files of an empty {name}")
            continue
        if config not in configs:
            report.add("README.md", f"no config for {name}")
            continue
        files = {d["split"]: d["path"] for d in configs[config]["data_files"]}
        if set(files) != set(by_split):
            report.add("README.md", f"config '{config}' has splits {sorted(files)}, {name} has {sorted(by_split)}")
        for split, rel in files.items():
            path = out / rel
            if not path.exists():
                report.add(rel, "missing")
                continue
            table = pq.read_table(path).to_pylist()
            want = by_split.get(split, [])
            if len(table) != len(want):
                report.add(rel, f"{len(table)} rows, {name} has {len(want)} in split {split}")
                continue
            bad = sum(1 for a, b in zip(table, want) if _norm(a) != _norm(_arrow_form(FILES[name], b, to_arrow)))
            if bad:
                report.add(rel, f"{bad} row(s) differ from {name}")
            else:
                report.ok("parquet rows", len(table))


def _arrow_form(schema: dict, rec, to_arrow):
    try:
        return to_arrow(schema, rec)
    except (AttributeError, TypeError):         # a malformed record: the schema check names it
        return rec


def check_datasets_load(out: Path, data: dict, report: Report) -> None:
    """``datasets.load_dataset(OUT, config)`` gives each config's splits with the rows of its
    JSON-lines file (when ``datasets`` is installed; a fresh cache, so nothing stale is read)."""
    try:
        import datasets
    except ImportError:
        report.ok("datasets load checks skipped (datasets not installed)", 0)
        return
    import tempfile

    from ..assembly.file_schema import CONFIGS
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory() as cache:
        for config, name in CONFIGS.items():
            want = Counter(r.get("split") for r in data.get(name, []))
            if not want:
                continue
            try:
                ds = datasets.load_dataset(str(out), config, cache_dir=cache)
            except Exception as e:    # whatever datasets raises is the disagreement to report
                report.add("README.md", f"datasets cannot load config '{config}': {type(e).__name__}: {e}"[:300])
                continue
            got = {k: len(v) for k, v in ds.items()}
            if got != dict(want):
                report.add("README.md", f"datasets loads config '{config}' as {got}, {name} has {dict(want)}")
            else:
                report.ok("configs loaded with datasets")


def _norm(x):
    """JSON-comparable form (Parquet reads integral floats back as floats, JSON as ints)."""
    if isinstance(x, dict):
        return {k: _norm(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_norm(v) for v in x]
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return x


class RowChecker:
    """Replays, re-renders and re-derives each archival row."""

    def __init__(self, report: Report, rules=None):
        from engine import Engine
        self.engine = Engine(rules=rules, strategies="all")
        self.report = report
        self._programs: dict[str, object] = {}

    def program(self, rec: dict):
        from engine.leir.files import program_from_json
        key = json.dumps(rec, sort_keys=True)
        p = self._programs.get(key)
        if p is None:
            if len(self._programs) > 256:
                self._programs.clear()
            p = self._programs[key] = program_from_json(rec)
        return p

    def check(self, no: int, row: dict) -> None:
        from lowering.tir import lower_to_tvmscript

        from .claims import check_trace
        from ..assembly.difficulty import difficulty
        from ..generate.task import row_id
        where = f"rows.jsonl:{no} ({row['id']}, {row['step']['strategy']})"
        rep = self.report
        step = row["step"]
        if row["id"] != row_id(row["program"], step["key"]):
            rep.add(where, "id is not the hash of the program and the step")
        try:
            original = self.program(row["program"])
            params = step["params"]
            replayed = self.engine.apply(original, {"rule": step["rule"], "site": step["site"], "params": params})
        except LeirError as e:
            return rep.add(where, f"replay: {e.message}")
        if replayed.to_leir() != row["transformed"]:
            return rep.add(where, "Engine.apply gives a different program than the row's")
        rep.ok("replayed")
        try:
            owner = self.engine.owner(step["rule"])
            block = self.engine.strategy(step["strategy"])
            meta = block.meta
        except LeirError as e:
            return rep.add(where, e.message)
        if owner is None or owner.name != step["strategy"]:
            rep.add(where, f"rule {step['rule']} does not belong to {step['strategy']}")
        if row["difficulty"] != difficulty(meta):
            rep.add(where, "difficulty differs from the strategy's declaration")
        if row["numerical_risk"] != (step["exactness"] != "bitwise"):
            rep.add(where, "numerical_risk does not follow the exactness")
        v = row["verification"]
        mode = "exact" if step["exactness"] == "bitwise" else "strict"
        if not v["equal"] or v["tolerance"]["mode"] != mode or len(v["trials"]) != 3 or \
                not all(t["equal"] for t in v["trials"]):
            rep.add(where, f"verification is not 3 equal trials at tolerance {mode}")
        if row.get("benefit") != list(block.benefit):
            rep.add(where, f"benefit {row.get('benefit')} is not the block's @benefit {list(block.benefit)}")
        problems = check_trace(row["cot"], block, original, replayed,
                               {"rule": step["rule"], "site": step["site"], "params": params}, row.get("timing"))
        for p in problems:
            rep.add(where, f"chain-of-thought: {p}")
        if not problems:
            rep.ok("traces")
        tir = row["tir"]
        try:
            if lower_to_tvmscript(original, tir["target"]) != tir["original"] or \
                    lower_to_tvmscript(replayed, tir["target"]) != tir["transformed"]:
                rep.add(where, "TIR text differs from the lowering of the programs")
        except Exception as e:       # a LoweringError here is itself a disagreement
            rep.add(where, f"TIR: {e}")


def check_chat(data: dict, rows: list[dict], options: dict, report: Report) -> None:
    from ..text import row_format
    from ..assembly.assemble import chat_multi, chat_single
    from ..assembly.filtering import MEDIUM_CAP, keep_single
    from ..assembly.mix import one_per_strategy
    from ..assembly.file_schema import SPLITS
    by_id = {r["id"]: r for r in rows}
    seed = options.get("seed", 0)
    # single: exactly the rows the filter keeps (a seeded subsequence of them with --mix), each in
    # the paper's format, train then test
    pool = one_per_strategy(rows, seed) if options.get("one_per_strategy") else rows
    want = [chat_single(r) for r in pool if keep_single(r["difficulty"]["bucket"], r["step"]["strategy"],
                                                       r["program"]["leir"], r["transformed"], seed)]
    want.sort(key=lambda w: SPLITS.index(w[0]["split"]))
    got = data.get("single.jsonl", [])
    want_ids, got_ids = [w[0]["id"] for w in want], [c["id"] for c in got]
    if options.get("mix") and not _subsequence(got_ids, want_ids):
        report.add("single.jsonl", "the mixed rows are not a subsequence of the rows the filter keeps")
    elif not options.get("mix") and got_ids != want_ids:
        report.add("single.jsonl", f"{len(got)} rows, the filter keeps {len(want)} of rows.jsonl (or another order)")
    for no, c in enumerate(got, 1):
        r = by_id.get(c["id"])
        if r is None:
            report.add(f"single.jsonl:{no}", "no archival row with this id")
            continue
        _check_single_text(f"single.jsonl:{no}", c, r, report)
        if c != chat_single(r)[0]:
            report.add(f"single.jsonl:{no}", "differs from the row rendered in the paper's format")
        else:
            report.ok("single rows")
    _same_pairs("single_trl.jsonl", got, data.get("single_trl.jsonl", []), report)
    # multi: items are verified rows of one program, no easy ones, >= 2, no duplicate answer sets
    rows_by_program = defaultdict(dict)
    for r in rows:
        rows_by_program[json.dumps(r["program"], sort_keys=True)][(r["transformed"], r["step"]["strategy"])] = r
    seen = defaultdict(set)
    medium = Counter()
    for no, c in enumerate(data.get("multi.jsonl", []), 1):
        where = f"multi.jsonl:{no}"
        user, answer = c["messages"][0]["content"], c["messages"][1]["content"]
        parts = row_format.split_answer(answer)
        if parts is None:
            report.add(where, "assistant content is not <think>...</think><answer>...</answer>")
            continue
        try:
            label = json.loads(parts[1])
        except json.JSONDecodeError:
            report.add(where, "label is not valid JSON")
            continue
        if not isinstance(label, list) or [it.get("idx") for it in label] != list(range(len(label))):
            report.add(where, "label items are not numbered 0..n-1")
            continue
        program = _program_of_prompt(user, rows_by_program)
        if program is None:
            report.add(where, "the prompt is no program of rows.jsonl in the paper's format")
            continue
        items = [rows_by_program[program].get((it.get("transformed_IR"), _one(it.get("applied_strategies"))))
                 for it in label]
        if None in items:
            report.add(where, "an answer is not a verified row of this program")
            continue
        if len(items) < 2:
            report.add(where, "fewer than 2 answers")
        if any(r["difficulty"]["bucket"] == "easy" for r in items):
            report.add(where, "an easy strategy in a multi-answer row")
        sig = tuple(sorted(r["transformed"] for r in items))
        if sig in seen[program]:
            report.add(where, "the same answers as another row of this program")
        seen[program].add(sig)
        for r in items:
            if r["difficulty"]["bucket"] == "medium":
                medium[r["step"]["strategy"]] += 1
        if c != chat_multi(items)[0]:
            report.add(where, "differs from its items rendered in the paper's format (prompt, traces, label)")
        else:
            report.ok("multi rows")
    cap = options.get("medium_cap") or MEDIUM_CAP
    for s, n in medium.items():
        if n > cap:
            report.add("multi.jsonl", f"{n} medium items of {s} (cap {cap})")
    _same_pairs("multi_trl.jsonl", data.get("multi.jsonl", []), data.get("multi_trl.jsonl", []), report)


def _subsequence(part: list, whole: list) -> bool:
    it = iter(whole)
    return all(x in it for x in part)


def _one(strategies):
    """The strategy of a label entry's ``applied_strategies`` (a list of one)."""
    return strategies[0] if isinstance(strategies, list) and len(strategies) == 1 else None


def _program_of_prompt(user: str, rows_by_program: dict):
    from ..text import row_format
    for key in rows_by_program:
        prog = json.loads(key)
        head = row_format.prefix(prog)
        if user.startswith(head):
            k = row_format.AT_LEAST.search(user[len(head):])
            if k and user in (row_format.multi_prompt(prog, int(k[1]), True), row_format.multi_prompt(prog, int(k[1]), False)):
                return key
    return None


def check_mix(data: dict, options: dict, report: Report) -> None:
    """With ``--mix``: the achieved mix stats.json reports is the mix of the chat files, split by
    split, and ``within`` says whether every share is within the promised points of its target."""
    from ..assembly.mix import WITHIN, Item, shares
    from ..assembly.file_schema import SPLITS
    name = options.get("mix")
    if not name:
        return
    got = ((data.get("stats.json") or {}).get("mix") or {}).get("splits") or {}
    for split in SPLITS:
        items = [Item(c["id"], "single", (c["bucket"],)) for c in data.get("single.jsonl", []) if c["split"] == split]
        items += [Item(c["id"], "multi", tuple(c["bucket"])) for c in data.get("multi.jsonl", [])
                  if c["split"] == split]
        rep = got.get(split)
        mine = shares(items)
        if rep is None or rep["achieved"] != {"buckets": mine["buckets"], "kinds": mine["kinds"]}:
            report.add("stats.json", f"mix of the {split} chat files differs from the one reported")
            continue
        far = any(abs(mine[g][k] - want) > WITHIN for g in ("buckets", "kinds") for k, want in rep["target"][g].items())
        if rep["within"] == far and items:
            report.add("stats.json", f"the {split} mix is reported {'within' if rep['within'] else 'not within'} "
                                     f"{WITHIN:g} points of its target, and it is not")
        else:
            report.ok("mixes")


def _check_single_text(where: str, c: dict, r: dict, report: Report) -> None:
    from ..text import row_format
    user, answer = c["messages"][0]["content"], c["messages"][1]["content"]
    if user != row_format.single_prompt(r["program"], row_format.verified_exactly(r)):
        report.add(where, "the prompt is not the single-answer prompt for this program and its exactness")
    parts = row_format.split_answer(answer)
    if parts is None:
        return report.add(where, "assistant content is not <think>...</think><answer>...</answer>")
    if parts[0] != r["cot"]:
        report.add(where, "the trace is not the row's chain-of-thought")
    try:
        label = json.loads(parts[1])
    except json.JSONDecodeError:
        return report.add(where, "label is not valid JSON")
    if label != {"transformed_IR": r["transformed"], "applied_strategies": [r["step"]["strategy"]]}:
        report.add(where, "label does not name the row's transformed IR and strategy")


def _same_pairs(name: str, chats: list[dict], trl: list[dict], report: Report) -> None:
    if len(chats) != len(trl) or any(a["id"] != b["id"] or a["messages"] != b["prompt"] + b["completion"]
                                     or a["split"] != b["split"] for a, b in zip(chats, trl)):
        report.add(name, "not the same rows as the messages file")
    else:
        report.ok("prompt/completion rows", len(trl))


def check_splits(rows: list[dict], report: Report) -> None:
    split_of = defaultdict(set)
    for r in rows:
        split_of[r["program"]["name"]].add(r["split"])
    for name, splits in split_of.items():
        if len(splits) > 1:
            report.add("rows.jsonl", f"program type {name} is in both splits")
    pairs = Counter((json.dumps(r["program"], sort_keys=True), r["transformed"]) for r in rows)
    for (prog, _), n in pairs.items():
        if n > 1:
            report.add("rows.jsonl", f"{n} rows of program {json.loads(prog)['name']} give the same transformed program")
    ids = Counter(r["id"] for r in rows)
    for i, n in ids.items():
        if n > 1:
            report.add("rows.jsonl", f"row id {i} occurs {n} times")


def check_timings(rows: list[dict], options: dict, report: Report) -> None:
    """Every row's speedup, interval and verdict re-derived from its samples (dataset.timing),
    the job's timing options, and one machine and target for all timings."""
    from ..timing import dataset_problems
    problems, ok = dataset_problems(rows, options.get("time"))
    for where, what in problems:
        report.add(where, what)
    if ok:
        report.ok("timings re-derived", ok)


def check_stats(data: dict, rows: list[dict], report: Report) -> None:
    stats = data.get("stats.json") or {}
    per = Counter(r["step"]["strategy"] for r in rows)
    if stats.get("rows") != len(rows) or stats.get("rows_per_strategy") != dict(sorted(per.items())):
        report.add("stats.json", "row counts differ from rows.jsonl")
    if (options := stats.get("job", {})).get("time"):
        from ..timing import TimingTally
        tally = TimingTally()
        for r in rows:
            if r.get("timing"):
                tally.add(r["timing"])
        want = {**options["time"], "rows_timed": tally.rows, "rows_untimed": len(rows) - tally.rows,
                **tally.summary()}
        if stats.get("timing") != want:
            report.add("stats.json", "the timing section differs from the rows' timings")
    fails = data.get("failures.jsonl", [])
    if stats.get("failures") != len(fails):
        report.add("stats.json", "failure count differs from failures.jsonl")


def reverify(rows: list[dict], n: int, seed: int, report: Report) -> None:
    from engine.leir.files import program_from_json
    from engine.leir.parser import parse_body
    from lowering import Verifier
    if not rows or n <= 0:
        return
    sample = random.Random(f"check:{seed}").sample(range(len(rows)), min(n, len(rows)))
    with Verifier(target=rows[0]["verification"]["target"], trials=3, seed=seed, timeout=600) as v:
        for i in sorted(sample):
            r = rows[i]
            p = program_from_json(r["program"])
            q = p.with_body(parse_body(r["transformed"]))
            mode = "exact" if r["step"]["exactness"] == "bitwise" else "strict"
            verdict = v.verify(p, q, tolerance=mode)
            if not verdict.equal:
                report.add(f"rows.jsonl:{i + 1}", f"re-verification: {verdict.reason}: {verdict.message}")
            else:
                report.ok("re-verified")


def _left_out(stats) -> str:
    """What the generation said about its sources, for the empty-dataset problem."""
    src = (stats or {}).get("sources") or {}
    skipped = src.get("skipped") or {}
    why = ", ".join(f"{n} {k}" for k, n in skipped.items()) or "none"
    return f"{src.get('programs', 0)} program(s) of {src.get('tasks', 0)} source(s); left out: {why}; see skipped.jsonl"


def check_rules(rows: list[dict], options: dict, manifest: list[dict]) -> None:
    """The rules loaded now are the ones that made the dataset (its job's and every row's
    record of the rule files), else a one-line error naming the difference (exit 2)."""
    from engine.rewrite.rule_sources import check_same_rules
    seen = [options.get("rules")] if options.get("rules") is not None else []
    for r in rows:
        if isinstance(r, dict) and isinstance(r.get("rules"), list) and r["rules"] not in seen:
            seen.append(r["rules"])
    for recorded in seen:
        check_same_rules(recorded, manifest, "the dataset")


def check(out: Path, sample: int = 20, progress: bool = True, rules=None, allow_empty: bool = False) -> Report:
    """``rules``: the rule sources the dataset was generated with (Engine's ``rules``).
    A dataset without rows is a problem unless ``allow_empty`` (a generation that produced
    nothing is not a dataset that checks)."""
    from ..progress import Progress
    from ..assembly.file_schema import FILES
    report = Report()
    if not (out / "rows.jsonl").exists():
        raise LeirError(f"{out} holds no generated dataset (no rows.jsonl)")
    data = {name: _read(out, name, report) for name in FILES}
    try:
        data["stats.json"] = json.loads((out / "stats.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        report.add("stats.json", f"unreadable: {e}")
    check_schemas(out, data, report)
    check_card_and_parquet(out, data, report)
    check_datasets_load(out, data, report)
    rows = data["rows.jsonl"]
    if not rows and not allow_empty:
        report.add("rows.jsonl", f"no rows: the dataset is empty ({_left_out(data.get('stats.json'))}); "
                                 "--allow-empty when that is expected")
    options = (data.get("stats.json") or {}).get("job", {})
    rc = RowChecker(report, rules)
    try:
        check_rules(rows, options, rc.engine.rule_manifest)
    except LeirError as e:
        raise LeirError(e.message, file=str(out)) from None
    bar = Progress(total=len(rows), unit="row") if progress else None
    for no, r in enumerate(rows, 1):
        try:
            rc.check(no, r)
        except (KeyError, TypeError) as e:           # a row the schema check already flagged
            report.add(f"rows.jsonl:{no}", f"malformed: {e}")
        if bar:
            bar.advance()
    if bar:
        bar.close()
    check_states(rows, rc.engine, options, report)
    check_splits(rows, report)
    check_chat(data, rows, options, report)
    check_mix(data, options, report)
    check_timings(rows, options, report)
    from .menu_rows import check_menu
    check_menu(data, rows, options, rules, report)
    from .kernel_rows import check_kernel_rows
    check_kernel_rows(data, options, rules, report)
    from .timed_menus import check_timed_menus
    check_timed_menus(data, options, rules, report)
    check_stats(data, rows, report)
    reverify(rows, sample, int(options.get("seed") or 0), report)
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dataset.check",
                                 description="Re-derive a generated dataset: schemas, replay, traces, chat files, "
                                             "filters, splits, and a seeded re-verification sample.")
    ap.add_argument("out", help="the folder python -m dataset.generate wrote")
    ap.add_argument("--sample", type=int, default=20, help="rows to verify again on TVM (default 20; 0: none)")
    ap.add_argument("--json", action="store_true", help="print the report as one JSON object")
    ap.add_argument("--allow-empty", action="store_true",
                    help="accept a dataset without rows (default: no rows is a problem, exit status 1)")
    from engine.rewrite.rule_sources import add_rules_options
    add_rules_options(ap)
    from engine.leir.cli import say_defaults
    args = say_defaults(ap).parse_args(argv)
    if args.sample < 0:
        raise LeirError(f"--sample must be at least 0, got {args.sample}")
    out = Path(args.out)
    if not out.is_dir():
        raise LeirError("no such dataset folder", file=str(out))
    report = check(out, args.sample, progress=not args.json, rules=args.rules, allow_empty=args.allow_empty)
    if args.json:
        print(json.dumps({"ok": not report.problems, "checked": dict(report.counts),
                          "problems": [{"where": w, "what": p} for w, p in report.problems]}))
    else:
        for w, p in report.problems[:MAX_SHOWN]:
            print(f"{w}: {p}")
        if len(report.problems) > MAX_SHOWN:
            print(f"... and {len(report.problems) - MAX_SHOWN} more")
        checked = ", ".join(f"{n} {k}" for k, n in report.counts.items())
        verdict = "OK" if not report.problems else f"{len(report.problems)} disagreement(s)"
        print(f"{out}: {verdict} ({checked})")
    return 0 if not report.problems else 1

