"""Measurement: the one place any package times a program.

* ``machine``: what a timing was measured on (CPU, GPU, cores, threads);
* ``stats``: paired samples to a speedup, its sign-test interval and a verdict beyond the noise floor,
  and the sequential rule that stops a candidate's timing as soon as its verdict is clear (``Protocol``);
* ``rounds``: interleaved rounds in the Verifier's worker (built once, warm, under the timing lock);
* ``cache`` and ``database``: timings remembered by (parent, candidate, target, machine, build, protocol)
  in the evaluation database shared by jobs;
* ``service``: ``Measurer``, what searches and dataset jobs call.

    from lowering import Verifier
    from lowering.measure import Measurer, Protocol
    with Verifier() as v:
        records = Measurer(v, Protocol(rounds=20)).compare(parent, [candidate, other])
        records[0]["speedup"], records[0]["ci"], records[0]["verdict"]
"""
from __future__ import annotations

from .cache import TimingCache
from .database import EvaluationDatabase
from .machine import cpu_model, gpu_name, machine_key, machine_label
from .service import CHUNK, Measurer, compare_many
from .stats import (
    BEST_OF,
    CONFIDENCE,
    LOOK_EVERY,
    MIN_MS,
    NOISE_FLOOR,
    ROUNDS,
    VERDICTS,
    Protocol,
    derive,
    record_problems,
    verdict_of,
)

__all__ = ["BEST_OF", "CHUNK", "CONFIDENCE", "EvaluationDatabase", "LOOK_EVERY", "MIN_MS", "Measurer", "NOISE_FLOOR",
           "Protocol", "ROUNDS", "TimingCache", "VERDICTS", "compare_many", "cpu_model", "derive", "gpu_name",
           "machine_key", "machine_label", "record_problems", "verdict_of"]
