"""The worker process of ``Engine.enumerate_many`` (``python -m engine.rewrite.enumerate_worker
CONFIG``): it loads the rules once, then answers each request (a program record and a strategy
selection) with the program's step records. A module of its own so that the client side (engine.rewrite.parallel,
imported by the engine) and the server side (which builds an engine) do not import each other."""
from __future__ import annotations

import json
import sys


def _serve(argv: list[str]) -> None:
    from engine.leir.files import program_from_json
    from engine.plumbing.procs import serve
    from engine.rewrite.engine import Engine
    from engine.rewrite.rule_sources import RuleSources, check_same_rules
    config = json.loads(argv[1])
    engine = Engine(RuleSources.from_json(config["rules"]), config["strategies"])
    check_same_rules(config["manifest"], engine.rule_manifest, "the worker's rule set")      # changed since the parent loaded them

    def handle(request):
        record, strategies = request
        steps, invalid = engine._list(program_from_json(record), strategies, True)
        return ("ok", ([s.to_json() for s in steps], invalid))
    serve(handle, argv[:1])


if __name__ == "__main__":
    _serve(sys.argv[1:])
