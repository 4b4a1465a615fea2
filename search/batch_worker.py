"""One run of a batch (``search.batch``): the batch's task module (``engine.plumbing.jobs``),
``run_task(None, spec)`` in a local worker process or a Ray task alike.

A run writes its trajectory to ``spec["out"]`` atomically after every sample (so a killed
batch resumes it from there) and returns the final record, which the driver writes again,
whole; running a task twice gives the same file. Rule engines and Verifiers (TVM worker
processes) are kept across the runs of a worker, one per strategy set and one per verification
setting (target, trials, timeout, seed, repeats, workers, timed build, threads), so a run verifies exactly as a
``python -m search`` of the same options would.
"""
from __future__ import annotations

_ENGINES: dict = {}
_VERIFIERS: dict = {}
_RULE_DIRS: list = []


def _engine(strategies, bundle=None):
    """One engine per (rule files, strategy set); ``bundle``: the driver's rule files
    (``RuleSources.bundle``), written to a folder of this worker's own."""
    import json

    from engine import Engine
    key = (json.dumps(bundle), repr(strategies))
    if key not in _ENGINES:
        rules = None
        if bundle is not None:
            import tempfile

            from engine.rewrite.rule_sources import unbundle
            _RULE_DIRS.append(tempfile.TemporaryDirectory(prefix="leir-rules-"))
            rules = unbundle(bundle, _RULE_DIRS[-1].name)
        _ENGINES[key] = Engine(rules=rules, strategies=strategies)
    return _ENGINES[key]


def _verifier(o):
    """The Verifier a search of options ``o`` would make for itself (``search.candidate_eval``)."""
    from lowering import Verifier
    key = (o.target, o.trials, o.timeout, o.seed, o.repeat, o.workers, o.build, o.threads)
    if key not in _VERIFIERS:
        _VERIFIERS[key] = Verifier(target=o.target, trials=o.trials, timeout=o.timeout, seed=o.seed,
                                   workers=o.workers, warmup=3, number=1, repeat=o.repeat, timed_build=o.build,
                                   threads=o.threads)
    return _VERIFIERS[key]


def run_task(_options, spec: dict) -> dict:
    """``{"status": "ok", "record": trajectory}`` or ``{"status": "error", "message": ...}``
    for a run that cannot be made (an original that does not build on the target, ...)."""
    from engine.leir.diagnostics import LeirError
    from engine.leir.files import program_from_json

    from .options import SearchOptions
    from .run import run_search
    try:
        program = program_from_json(spec["program"])
        opts = SearchOptions.from_json(spec["options"]).validate()
        traj = run_search(program, opts, engine=_engine(opts.strategies, spec.get("rules")), out=spec.get("out"),
                          progress=lambda msg: None, resume=spec.get("resume"), verifier=_verifier(opts))
    except LeirError as e:
        return {"status": "error", "message": e.format()}
    return {"status": "ok", "record": traj.record}


def close() -> None:
    for v in _VERIFIERS.values():
        v.close()
    _VERIFIERS.clear()
