"""The schema of every file a job writes, declared once as JSON Schema.

``jsonschema`` validates each record (``python -m dataset.check``); the same declarations give
the Arrow types of the Parquet copies (``arrow_schema``), so a column has one type in every
row and ``datasets`` loads each config without guessing. Fields whose shape varies from rule to
rule (a step's parameters, a workload's shape parameters) are stored as canonical JSON text,
as chat APIs do for tool arguments.
"""
from __future__ import annotations


def _t(kind, nullable=False):
    return {"type": [kind, "null"] if nullable else kind}


def obj(props: dict, nullable: bool = False) -> dict:
    return {"type": ["object", "null"] if nullable else "object", "properties": props,
            "required": list(props), "additionalProperties": False}


def arr(items: dict) -> dict:
    return {"type": "array", "items": items}


STR, INT, NUM, BOOL = _t("string"), _t("integer"), _t("number"), _t("boolean")
NSTR, NINT, NNUM, NBOOL = _t("string", True), _t("integer", True), _t("number", True), _t("boolean", True)
BUCKET = {"type": "string", "enum": ["easy", "medium", "difficult"]}
SPLIT = {"type": "string", "enum": ["train", "test"]}

DECL = obj({"name": STR, "dtype": STR, "shape": arr(INT)})
PROGRAM = obj({"name": STR, "inputs": arr(DECL), "outputs": arr(DECL), "leir": STR})
ORIGIN = obj({"source": STR, "kind": {"type": "string", "enum": ["program", "workload", "kernelbench"]},
              "workload": NSTR, "shapes": NSTR, "dtype": NSTR, "points": INT,
              "shrunk": obj({"from_points": INT, "points": INT, "granularity": INT, "leir_sha256": STR},
                            nullable=True)})
STEP = obj({"strategy": STR, "category": STR, "rule": STR, "site": arr(INT), "params": STR, "exactness": STR,
            "key": STR, "also": arr(STR)})
COMPARISON = obj({"name": STR, "equal": BOOL, "max_abs_err": NNUM, "max_rel_err": NNUM, "mismatches": INT,
                  "nonfinite_match": BOOL, "dtype": STR, "mode": STR, "reduction_length": INT, "atol": NNUM,
                  "rtol": NNUM, "mse": NNUM})
VERIFICATION = obj({"equal": BOOL, "reason": STR, "target": STR,
                    "tolerance": obj({"mode": STR, "formula": STR, "k": NINT, "reduction_length": NINT}),
                    "max_abs_err": NNUM, "max_rel_err": NNUM,
                    "trials": arr(obj({"trial": INT, "seed": arr(INT), "equal": BOOL, "outputs": arr(COMPARISON)}))})
TIMING = obj({"target": STR, "repeat": INT, "original_ms": NNUM, "original_spread_ms": NNUM, "transformed_ms": NNUM,
              "transformed_spread_ms": NNUM, "speedup": NNUM}, nullable=True)
RULE_FILES = arr(obj({"file": STR, "sha256": STR}))      # the rule files that made a row (names, content hashes)
DIFFICULTY = obj({"K": INT, "P": INT, "S": INT, "score": NUM, "bucket": BUCKET, "computed_bucket": BUCKET})

ROW = obj({"id": STR, "program": PROGRAM, "origin": ORIGIN, "step": STEP, "transformed": STR,
           "difficulty": DIFFICULTY, "cot": STR, "benefit": arr(STR), "numerical_risk": BOOL, "verification": VERIFICATION,
           "timing": TIMING, "tir": obj({"target": STR, "original": STR, "transformed": STR}),
           "cuda": obj({"original": STR, "transformed": STR}, nullable=True), "seed": INT, "split": SPLIT,
           "rules": RULE_FILES})

# a candidate that is not a row: a rule bug. Stage "enumerate": the engine refused the program the
# rule built (no site or parameters recorded); "invalid": the step's program does not analyse;
# "duplicate": an earlier step of the same program gave the same program (listed twice);
# "replay": Engine.apply does not find the step again by its rule, site and parameters;
# "verify": it does not compute what the original computes; "cot": no trace fits it; "lower":
# its TIR (or CUDA source) could not be made.
FAILURE = obj({"id": STR, "program": STR, "source": STR,
               "step": obj({"strategy": NSTR, "category": STR, "rule": STR, "site": arr(INT), "params": STR,
                            "exactness": STR, "key": STR, "also": arr(STR)}),
               "transformed": NSTR,
               "stage": {"type": "string", "enum": ["enumerate", "invalid", "duplicate", "replay", "verify",
                                                            "cot", "lower"]},
               "verdict": {**VERIFICATION, "type": ["object", "null"]}, "message": STR})

SKIPPED = obj({"source": STR, "reason": STR, "message": STR})

MESSAGE = obj({"role": {"type": "string", "enum": ["user", "assistant"]}, "content": STR})
MESSAGES = {"type": "array", "items": MESSAGE, "minItems": 1}
CHAT = obj({"id": STR, "messages": {**MESSAGES, "minItems": 2, "maxItems": 2}, "split": SPLIT})
TRL = obj({"id": STR, "prompt": {**MESSAGES, "maxItems": 1}, "completion": {**MESSAGES, "maxItems": 1},
           "split": SPLIT})
# a timing record of dataset.timing: a candidate against its parent, interleaved rounds
MEASURED = obj({"target": STR, "machine": obj({"cpu": STR, "gpu": NSTR, "cores": INT}), "method": STR,
                "rounds": INT, "parent_ms": NUM, "candidate_ms": NUM, "speedup": NUM, "ci": arr(NUM),
                "confidence": NUM, "noise_floor": NUM, "verdict": {"type": "string", "enum": ["faster", "slower", "tie"]},
                "samples": obj({"parent": arr(NUM), "candidate": arr(NUM)})}, nullable=True)
VERDICT = {"type": ["string", "null"], "enum": ["faster", "slower", "tie", None]}
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
MENU_STEP = obj({"strategy": STR, "rule": STR, "site": arr(INT), "params": STR, "exactness": STR, "key": STR})
MENU_ENTRY = obj({"number": INT, "key": STR, "strategy": STR, "step": MENU_STEP, "verified": BOOL,
                  "speedup": NNUM, "verdict": VERDICT, "timing": MEASURED, "reason": NSTR})
MENU = obj({"id": STR, "program": PROGRAM, "depth": INT,
            "messages": {"type": "array", "minItems": 3, "maxItems": 3,
                         "items": obj({"role": {"type": "string", "enum": ["system", "user", "assistant"]},
                                       "content": STR})},
            "menu": {**arr(MENU_ENTRY), "minItems": 1}, "answer": INT, "strategy": STR, "split": SPLIT})

STATS = {"type": "object", "required": ["job", "sources", "candidates", "rows_per_strategy", "failures_per_rule",
                                        "difficulty", "filter", "bucket_mix", "splits", "files", "throughput"]}

FILES = {"rows.jsonl": ROW, "failures.jsonl": FAILURE, "skipped.jsonl": SKIPPED,
         "single.jsonl": CHAT, "multi.jsonl": CHAT, "single_trl.jsonl": TRL, "multi_trl.jsonl": TRL,
         "preferences.jsonl": PREFERENCE, "preferences_menu.jsonl": PREFERENCE, "menu.jsonl": MENU}
# the dataset card's configs: name -> the JSON-lines file its Parquet copies are made from
CONFIGS = {"single": "single.jsonl", "multi": "multi.jsonl", "single_trl": "single_trl.jsonl",
           "multi_trl": "multi_trl.jsonl", "rows": "rows.jsonl", "preferences": "preferences.jsonl",
           "menu": "menu.jsonl", "preferences_menu": "preferences_menu.jsonl"}
# files written in split folders (OUT/train/NAME, OUT/test/NAME), never one file holding both splits
SPLIT_FOLDERS = ("menu.jsonl", "preferences.jsonl", "preferences_menu.jsonl")


def arrow_type(s: dict):
    """The Arrow type of a JSON Schema declaration (the subset used above)."""
    import pyarrow as pa
    kinds = s["type"] if isinstance(s["type"], list) else [s["type"]]
    kind = next(k for k in kinds if k != "null")
    if kind == "object":
        return pa.struct([pa.field(k, arrow_type(v), nullable=_nullable(v)) for k, v in s["properties"].items()])
    if kind == "array":
        return pa.list_(arrow_type(s["items"]))
    return {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}[kind]


def _nullable(s: dict) -> bool:
    return isinstance(s.get("type"), list) and "null" in s["type"]


def arrow_schema(s: dict):
    import pyarrow as pa
    return pa.schema([pa.field(k, arrow_type(v), nullable=_nullable(v)) for k, v in s["properties"].items()])


def validator(s: dict):
    import jsonschema
    return jsonschema.Draft202012Validator(s)
