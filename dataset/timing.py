"""Speed labels of dataset rows: each row's program timed against its parent (``lowering.measure``:
interleaved rounds, the sign-test interval, the noise floor, the sequential rule, the timing cache),
and the dataset-level checks of those labels (``dataset.check``): every record re-derived from its
samples, the job's protocol, one machine per dataset.
"""
from __future__ import annotations

from collections import Counter

from lowering.builds import DEFAULT_TIMED
from lowering.measure import VERDICTS, Protocol, machine_key, record_problems
from lowering.measure.stats import FIXED
from lowering.measure.summodel import STATEMENTS

# --------------------------------------------------------------------------- dataset figures


class TimingTally:
    """stats.json's timing section, counted row by row: verdicts, methods (whole programs paired,
    or slot kernels: ``statements``), the machines and targets."""

    def __init__(self):
        self.rows = 0
        self.verdicts = Counter()
        self.methods = Counter()
        self.machines = Counter()
        self.labels: dict[str, dict] = {}

    def add(self, record: dict) -> None:
        k = machine_key(record)
        self.rows += 1
        self.verdicts[record["verdict"]] += 1
        self.methods[record.get("method")] += 1
        self.machines[k] += 1
        self.labels.setdefault(k, {"target": record["target"], "machine": record["machine"]})

    def summary(self) -> dict:
        return {"verdicts": {v: self.verdicts[v] for v in VERDICTS}, "methods": dict(sorted(self.methods.items())),
                "machines": [{**self.labels[k], "rows": n} for k, n in sorted(self.machines.items())]}


def dataset_problems(rows: list[dict], options) -> tuple[list[tuple[str, str]], int]:
    """(where, what) for every timing claim of ``rows`` that its samples or the job do not back,
    and timings of several machines or targets in one dataset; and how many records agree.
    ``options``: the job's ``time`` option (False without --time)."""
    problems, ok = [], 0
    machines = Counter()
    for no, r in enumerate(rows, 1):
        t = r.get("timing") if isinstance(r, dict) else None
        if not t:
            continue
        where = f"rows.jsonl:{no} ({r.get('id')}, {r.get('step', {}).get('strategy')})"
        if not options:
            problems.append((where, "a timing record in a job run without --time"))
            continue
        found = record_problems(t)
        if t.get("method") == STATEMENTS and not options.get("statements"):
            found.append("a statement-level timing in a job run without --statement-builds")
        # the job's protocol: a sequential record names its most rounds and looks; an older
        # fixed-rounds record took exactly --rounds
        fields = {"rounds": "rounds" if t.get("method") == FIXED else "max_rounds", "noise_floor": "noise_floor",
                  "confidence": "confidence"}
        if t.get("method") != FIXED:
            fields["look_every"] = "look_every"
        for k, field in fields.items():
            if t.get(field) != options.get(k, Protocol.look_every if k == "look_every" else None):
                found.append(f"timing {field} is {t.get(field)}, the job's --{k.replace('_', '-')} is {options.get(k)}")
        if (t.get("build") or DEFAULT_TIMED) != timed_build_of(options):
            found.append(f"timing build is {t.get('build') or DEFAULT_TIMED}, the job's --build is "
                         f"{timed_build_of(options)}")
        if t["target"] != r["verification"]["target"]:
            found.append(f"timed on {t['target']}, verified on {r['verification']['target']}")
        problems += [(where, p) for p in found]
        ok += not found
        machines[machine_key(t)] += 1
    if len(machines) > 1:
        listed = "; ".join(f"{k} ({n} rows)" for k, n in sorted(machines.items()))
        problems.append(("rows.jsonl", f"timings of {len(machines)} machines or targets in one dataset: {listed}"))
    return problems, ok


def timed_build_of(options) -> str:
    """The build a job's ``time`` option times (``lowering.builds``; named there only when not the
    default, so that older jobs keep their fingerprints)."""
    return (options or {}).get("build") or DEFAULT_TIMED


def protocol_of_options(options: dict) -> Protocol:
    """The measurement protocol of a job's ``time`` option."""
    return Protocol(rounds=int(options["rounds"]), confidence=float(options["confidence"]),
                    noise_floor=float(options["noise_floor"]),
                    look_every=int(options.get("look_every", Protocol.look_every)))
