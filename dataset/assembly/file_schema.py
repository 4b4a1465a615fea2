"""The schema of every file a job writes, declared once as JSON Schema.

``jsonschema`` validates each record (``python -m dataset.check``); the same declarations give
the Arrow types of the Parquet copies (``arrow_schema``), so a column has one type in every
row and ``datasets`` loads each config without guessing. Fields whose shape varies from rule to
rule are objects in the JSON-lines files (a step's parameters: ``step`` is exactly
``Step.to_json()``, so ``python -m engine.apply --step`` takes it as it is) and canonical JSON
text in the Parquet copies (``JSON_TEXT``: Arrow needs one type per column), as chat APIs do for
tool arguments; a workload's shape parameters are JSON text in both.
"""
from __future__ import annotations

import json

from lowering.builds import BUILD_NAMES


def _t(kind, nullable=False):
    return {"type": [kind, "null"] if nullable else kind}


def obj(props: dict, nullable: bool = False, optional: tuple = ()) -> dict:
    """An object with exactly these keys, all required but the ``optional`` ones (a missing
    optional key is a null column in Parquet)."""
    return {"type": ["object", "null"] if nullable else "object", "properties": props,
            "required": [k for k in props if k not in optional], "additionalProperties": False}


def arr(items: dict) -> dict:
    return {"type": "array", "items": items}


STR, INT, NUM, BOOL = _t("string"), _t("integer"), _t("number"), _t("boolean")
NSTR, NINT, NNUM, NBOOL = _t("string", True), _t("integer", True), _t("number", True), _t("boolean", True)
BUCKET = {"type": "string", "enum": ["easy", "medium", "difficult"]}
SPLIT = {"type": "string", "enum": ["train", "test"]}

DECL = obj({"name": STR, "dtype": STR, "shape": arr(INT)})
PROGRAM = obj({"name": STR, "inputs": arr(DECL), "outputs": arr(DECL), "leir": STR})
# source: its name relative to the command-line argument it came from; sha256: of its file (null: a workload)
ORIGIN = obj({"source": STR, "sha256": NSTR, "kind": {"type": "string", "enum": ["program", "workload", "kernelbench"]},
              "workload": NSTR, "shapes": NSTR, "dtype": NSTR, "points": INT,
              "shrunk": obj({"from_points": INT, "points": INT, "granularity": INT, "leir_sha256": STR},
                            nullable=True)})
# an object of any keys: canonical JSON text in Parquet (``to_arrow``)
JSON_TEXT = {"type": "object", "x-arrow": "json"}
PROVENANCE = obj({"strategy": STR, "category": STR, "rule": STR, "site": arr(INT), "params": JSON_TEXT,
                  "exactness": STR})
# exactly Step.to_json() (engine/rewrite/steps.py): ``also`` only when other strategies give the same program
STEP = obj({**PROVENANCE["properties"], "key": STR, "leir": STR, "also": arr(PROVENANCE)}, optional=("also",))
COMPARISON = obj({"name": STR, "equal": BOOL, "max_abs_err": NNUM, "max_rel_err": NNUM, "mismatches": INT,
                  "nonfinite_match": BOOL, "dtype": STR, "mode": STR, "reduction_length": INT, "atol": NNUM,
                  "rtol": NNUM, "mse": NNUM})
VERIFICATION = obj({"equal": BOOL, "reason": STR, "target": STR,
                    "tolerance": obj({"mode": STR, "formula": STR, "k": NINT, "reduction_length": NINT}),
                    "max_abs_err": NNUM, "max_rel_err": NNUM,
                    "trials": arr(obj({"trial": INT, "seed": arr(INT), "equal": BOOL, "outputs": arr(COMPARISON)}))})
# lowering.measure: the row's program against its parent in interleaved rounds (null without --time,
# or when the measurement failed); samples are the paired per-round times the figures derive from.
# ``sequential`` records (the rule that stops a decided candidate early) name their most rounds, the
# looks and each look's confidence; ``interleaved`` records (fixed rounds, older jobs) do not.
# ``statements`` records (lowering.measure.summodel) pair the changed slot's kernels (``samples``) and
# derive the program's figures by the sum model from the parent's profile (the whole parent and each
# slot kernel timed alone, per round), which they store with the slots and the kernels' own figures.
# ``build``: the named build timed (lowering.builds); records written before builds were named timed
# the exact build.
MACHINE = obj({"cpu": STR, "gpu": NSTR, "cores": INT, "threads": NINT}, optional=("threads",))
CI = {**arr(NUM), "minItems": 2, "maxItems": 2}
STATEMENT_TIMING = obj({"slot": INT, "slots": arr({**arr(INT), "minItems": 2, "maxItems": 2}),
                        "kernel": obj({"parent_ms": NUM, "candidate_ms": NUM, "speedup": NUM, "ci": CI}),
                        "profile": obj({"times": arr(arr(NUM)), "runs": arr(INT)}),
                        "whole_ms": NUM, "kernel_ms": arr(NUM), "sum_ms": NUM, "sum_ratio": NUM,
                        "sum_tolerance": NUM})
TIMING = obj({"target": STR, "machine": MACHINE, "build": {"type": "string", "enum": list(BUILD_NAMES)},
              "method": {"type": "string", "enum": ["sequential", "interleaved", "statements"]},
              "rounds": INT, "max_rounds": INT, "look_every": INT, "look_confidence": NUM,
              "runs_per_sample": INT, "parent_ms": NUM, "candidate_ms": NUM, "speedup": NUM,
              "ci": CI, "confidence": NUM, "noise_floor": NUM,
              "verdict": {"type": "string", "enum": ["faster", "slower", "tie"]},
              "samples": obj({"parent": arr(NUM), "candidate": arr(NUM)}), "statements": STATEMENT_TIMING},
             nullable=True, optional=("build", "max_rounds", "look_every", "look_confidence", "statements"))
RULE_FILES = arr(obj({"file": STR, "sha256": STR}))      # the rule files that made a row (names, content hashes)
DIFFICULTY = obj({"K": INT, "P": INT, "S": INT, "score": NUM, "bucket": BUCKET, "computed_bucket": BUCKET})

# a step of a state's path: exactly Step.to_json(), replayable with engine.apply; canonical JSON text in Parquet
PATH_STEP = {**STEP, "x-arrow": "json"}
STATE = obj({"depth": INT, "path": arr(PATH_STEP), "parent": NSTR})

ROW = obj({"id": STR, "program": PROGRAM, "origin": ORIGIN, "step": STEP, "transformed": STR,
           "difficulty": DIFFICULTY, "cot": STR, "benefit": arr(STR), "numerical_risk": BOOL, "verification": VERIFICATION,
           "timing": TIMING, "tir": obj({"target": STR, "original": STR, "transformed": STR}),
           "cuda": obj({"original": STR, "transformed": STR}, nullable=True), "seed": INT, "split": SPLIT,
           "rules": RULE_FILES, "noop_on_target": NBOOL, "state": STATE})

# a candidate that is not a row: a rule bug. Stage "enumerate": the engine refused the program the
# rule built (no site or parameters recorded); "invalid": the step's program does not analyse;
# "duplicate": an earlier step of the same program gave the same program (listed twice);
# "replay": Engine.apply does not find the step again by its rule, site and parameters;
# "verify": it does not compute what the original computes; "cot": no trace fits it; "lower":
# its TIR (or CUDA source) could not be made.
FAILURE = obj({"id": STR, "program": STR, "source": STR,
               "step": obj({**STEP["properties"], "strategy": NSTR, "leir": NSTR}, optional=("also",)),
               "transformed": NSTR,
               "stage": {"type": "string", "enum": ["enumerate", "invalid", "duplicate", "replay", "verify",
                                                            "cot", "lower"]},
               "verdict": {**VERIFICATION, "type": ["object", "null"]}, "message": STR})

SKIPPED = obj({"source": STR, "reason": STR, "message": STR})

MESSAGE = obj({"role": {"type": "string", "enum": ["user", "assistant"]}, "content": STR})
MESSAGES = {"type": "array", "items": MESSAGE, "minItems": 1}
# what a chat row carries to filter by (assemble.row_facts); a multi-answer row has one entry per answer
VERDICT = {"type": ["string", "null"], "enum": ["faster", "slower", "tie", None]}
FACTS = {"strategy": STR, "bucket": BUCKET, "exactness": STR, "numerical_risk": BOOL, "speedup": NNUM,
         "verdict": VERDICT}
MULTI_FACTS = {**{k: arr(v) for k, v in FACTS.items()}, "numerical_risk": BOOL}
CHAT = obj({"id": STR, "messages": {**MESSAGES, "minItems": 2, "maxItems": 2}, "split": SPLIT, **FACTS})
TRL = obj({"id": STR, "prompt": {**MESSAGES, "maxItems": 1}, "completion": {**MESSAGES, "maxItems": 1},
           "split": SPLIT, **FACTS})
MULTI_CHAT = obj({**CHAT["properties"], **MULTI_FACTS})
MULTI_TRL = obj({**TRL["properties"], **MULTI_FACTS})
# a preference pair (TRL's conversational prompt/chosen/rejected): the menu form (prompt: the search's
# question, answers: an entry's reason and number) or the single-answer form (prompt: the paper's
# single prompt, answers: two verified rows of one state)
PREFERENCE = obj({"id": STR, "form": {"type": "string", "enum": ["menu", "single"]}, "program": STR,
                  "prompt": {"type": "array", "minItems": 1, "maxItems": 2,
                             "items": obj({"role": {"type": "string", "enum": ["system", "user"]}, "content": STR})},
                  "chosen": {**MESSAGES, "maxItems": 1}, "rejected": {**MESSAGES, "maxItems": 1},
                  "chosen_key": STR, "rejected_key": STR, "chosen_speedup": NUM, "rejected_speedup": NUM,
                  "chosen_verdict": {"type": "string", "enum": ["faster"]},
                  "rejected_verdict": {"type": "string", "enum": ["slower", "tie"]}, "split": SPLIT})
MENU_STEP = obj({**PROVENANCE["properties"], "key": STR})     # Step.to_json() less leir and also
MENU_ENTRY = obj({"number": INT, "key": STR, "strategy": STR, "step": MENU_STEP, "verified": BOOL,
                  "speedup": NNUM, "verdict": VERDICT, "timing": TIMING, "reason": NSTR})
MENU = obj({"id": STR, "program": PROGRAM, "depth": INT,
            "messages": {"type": "array", "minItems": 3, "maxItems": 3,
                         "items": obj({"role": {"type": "string", "enum": ["system", "user", "assistant"]},
                                       "content": STR})},
            "menu": {**arr(MENU_ENTRY), "minItems": 1}, "answer": INT, "strategy": STR, "split": SPLIT})

# a kernel row (dataset.text.kernel_menu): the kernel search's question at one slot's kernel of a state,
# asked page by page (messages: system, then a user page and its answer per page), its timed moves
# (steps: each Step.to_json() less leir and also, applied in order to the kernel; path: the numbers
# answered from the first page to the move's own line; ci null when not timed) and the answer
KERNEL_ENTRY = obj({"key": STR, "label": STR, "composite": STR, "text": STR, "steps": {**arr(MENU_STEP), "minItems": 1},
                    "number": INT, "path": {**arr(INT), "minItems": 1}, "tolerance": STR, "verified": BOOL,
                    "speedup": NNUM, "ci": {"type": ["array", "null"], "items": NUM}, "verdict": VERDICT,
                    "timing": TIMING, "reason": NSTR})
KERNEL_MENU = obj({"id": STR, "program": PROGRAM, "depth": INT, "slot": INT, "slots": INT, "kernel": PROGRAM,
                   "key": STR,
                   "messages": {"type": "array", "minItems": 3,
                                "items": obj({"role": {"type": "string", "enum": ["system", "user", "assistant"]},
                                              "content": STR})},
                   "moves": {**arr(KERNEL_ENTRY), "minItems": 1}, "answer": INT, "answer_key": STR, "label": STR,
                   "pages": INT, "split": SPLIT})
# a kernel row's preference pair: the conversation up to the answer's page, the answer and a move of
# that page measured slower or tied
KERNEL_PREFERENCE = obj({"id": STR, "form": {"type": "string", "enum": ["kernel"]}, "program": STR, "slot": INT,
                         "prompt": {"type": "array", "minItems": 2,
                                    "items": obj({"role": {"type": "string", "enum": ["system", "user", "assistant"]},
                                                  "content": STR})},
                         "chosen": {**MESSAGES, "maxItems": 1}, "rejected": {**MESSAGES, "maxItems": 1},
                         "chosen_key": STR, "rejected_key": STR, "chosen_speedup": NUM, "rejected_speedup": NUM,
                         "chosen_verdict": {"type": "string", "enum": ["faster"]},
                         "rejected_verdict": {"type": "string", "enum": ["slower", "tie"]}, "split": SPLIT})

# a timed menu (dataset.text.timed_menus): every question a --time --menu / --kernel-menu job measured,
# answered or not: its first request, the text before its entries (header), every entry with its line,
# steps, number on the first page (null: a kernel move shown on a later page), verification and timing
FORM = {"type": "string", "enum": ["kernel", "menu"]}
REQUEST = {"type": "array", "minItems": 2, "maxItems": 2,
           "items": obj({"role": {"type": "string", "enum": ["system", "user"]}, "content": STR})}
TIMED_ENTRY = obj({"key": STR, "label": STR, "text": STR, "steps": {**arr(MENU_STEP), "minItems": 1}, "number": NINT,
                   "verified": BOOL, "speedup": NNUM, "ci": {"type": ["array", "null"], "items": NUM},
                   "verdict": VERDICT, "timing": TIMING})
TIMED_MENU = obj({"id": STR, "form": FORM, "program": PROGRAM, "depth": INT, "slot": NINT, "slots": NINT,
                  "kernel": obj(PROGRAM["properties"], nullable=True), "kernel_key": NSTR, "messages": REQUEST,
                  "header": STR, "entries": {**arr(TIMED_ENTRY), "minItems": 1}, "split": SPLIT})
# examples from every timing of a timed menu (dataset.text.pairwise): which of two entries is faster
# (a decisive pair, shown in a seeded order), whether one entry is faster than its parent (faster or
# slower, ties left out), and the decisive pairs as preference pairs on the question's own request
CHAT3 = {"type": "array", "minItems": 3, "maxItems": 3,
         "items": obj({"role": {"type": "string", "enum": ["system", "user", "assistant"]}, "content": STR})}
MEASURED = {"type": "string", "enum": ["faster", "slower", "tie"]}
WHERE = {"id": STR, "form": FORM, "program": STR, "slot": NINT, "question": STR}


def two(items: dict) -> dict:
    return {**arr(items), "minItems": 2, "maxItems": 2}


PAIRWISE = obj({**WHERE, "messages": CHAT3, "keys": two(STR), "labels": two(STR), "speedups": two(NUM),
                "cis": two(CI), "verdicts": two(MEASURED), "answer": {"type": "string", "enum": ["1", "2"]},
                "split": SPLIT})
POINTWISE = obj({**WHERE, "messages": CHAT3, "key": STR, "label": STR, "speedup": NUM, "ci": CI,
                 "verdict": {"type": "string", "enum": ["faster", "slower"]},
                 "answer": {"type": "string", "enum": ["yes", "no"]}, "split": SPLIT})
PAIRWISE_PREFERENCE = obj({**WHERE, "prompt": REQUEST, "chosen": {**MESSAGES, "maxItems": 1},
                           "rejected": {**MESSAGES, "maxItems": 1}, "chosen_key": STR, "rejected_key": STR,
                           "chosen_speedup": NUM, "rejected_speedup": NUM, "chosen_verdict": MEASURED,
                           "rejected_verdict": MEASURED, "split": SPLIT})

STATS = {"type": "object", "required": ["job", "sources", "candidates", "rows_per_strategy", "failures_per_rule",
                                        "difficulty", "filter", "bucket_mix", "splits", "files", "throughput"]}

FILES = {"rows.jsonl": ROW, "failures.jsonl": FAILURE, "skipped.jsonl": SKIPPED,
         "single.jsonl": CHAT, "multi.jsonl": MULTI_CHAT, "single_trl.jsonl": TRL, "multi_trl.jsonl": MULTI_TRL,
         "preferences.jsonl": PREFERENCE, "preferences_menu.jsonl": PREFERENCE, "menu.jsonl": MENU,
         "kernel_menu.jsonl": KERNEL_MENU, "preferences_kernel_menu.jsonl": KERNEL_PREFERENCE,
         "timed_menus.jsonl": TIMED_MENU, "pairwise.jsonl": PAIRWISE, "pointwise.jsonl": POINTWISE,
         "preferences_pairwise.jsonl": PAIRWISE_PREFERENCE}
SPLITS = ("train", "test")
# the training files: written split by split, OUT/train/NAME and OUT/test/NAME, never both in one
# file; rows.jsonl (the archive, not a training file) keeps both with their ``split``
SPLIT_FILES = ("single.jsonl", "multi.jsonl", "single_trl.jsonl", "multi_trl.jsonl", "preferences.jsonl",
               "menu.jsonl", "preferences_menu.jsonl", "kernel_menu.jsonl", "preferences_kernel_menu.jsonl",
               "pairwise.jsonl", "pointwise.jsonl", "preferences_pairwise.jsonl")


def file_path(name: str, split: str) -> str:
    """Where a split's rows of a file are, relative to the output folder."""
    return f"{split}/{name}" if name in SPLIT_FILES else name
# the dataset card's configs: name -> the JSON-lines file its Parquet copies are made from
CONFIGS = {"single": "single.jsonl", "multi": "multi.jsonl", "single_trl": "single_trl.jsonl",
           "multi_trl": "multi_trl.jsonl", "rows": "rows.jsonl", "preferences": "preferences.jsonl",
           "menu": "menu.jsonl", "preferences_menu": "preferences_menu.jsonl", "kernel_menu": "kernel_menu.jsonl",
           "preferences_kernel_menu": "preferences_kernel_menu.jsonl", "pairwise": "pairwise.jsonl",
           "pointwise": "pointwise.jsonl", "preferences_pairwise": "preferences_pairwise.jsonl"}


def arrow_type(s: dict):
    """The Arrow type of a JSON Schema declaration (the subset used above); a declaration
    marked ``"x-arrow": "json"`` is stored as its canonical JSON text (``to_arrow``)."""
    import pyarrow as pa
    if s.get("x-arrow") == "json":
        return pa.string()
    kinds = s["type"] if isinstance(s["type"], list) else [s["type"]]
    kind = next(k for k in kinds if k != "null")
    if kind == "object":
        return pa.struct([pa.field(k, arrow_type(v), nullable=_nullable(v) or k not in s["required"])
                          for k, v in s["properties"].items()])
    if kind == "array":
        return pa.list_(arrow_type(s["items"]))
    return {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}[kind]


def _nullable(s: dict) -> bool:
    return isinstance(s.get("type"), list) and "null" in s["type"]


def to_arrow(s: dict, x):
    """A record as its Parquet row: ``JSON_TEXT`` values as canonical JSON text, missing
    optional keys as null (the JSON-lines record itself is left as it is)."""
    if x is None:
        return None
    if s.get("x-arrow") == "json":
        return json.dumps(x, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    kinds = s["type"] if isinstance(s["type"], list) else [s["type"]]
    if "object" in kinds and "properties" in s:
        return {k: to_arrow(v, x.get(k)) for k, v in s["properties"].items()}
    if "array" in kinds:
        return [to_arrow(s["items"], v) for v in x]
    return x


def arrow_schema(s: dict):
    import pyarrow as pa
    return pa.schema([pa.field(k, arrow_type(v), nullable=_nullable(v) or k not in s["required"])
                      for k, v in s["properties"].items()])


def validator(s: dict):
    import jsonschema
    return jsonschema.Draft202012Validator(s)
