"""The worker process that holds TVM and serves the requests of the ``Verifier`` (``lowering.isolated``)
and of ``lowering.crosscheck``: ``python -m lowering.tvm_worker FD MEMORY_MIB CACHE_SIZE [BUILD_CACHE MAX_MB]``
(``BUILD_CACHE``: the on-disk cache's folder or ``off``, ``lowering.build_cache``; default: the environment's)."""
from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    from engine.plumbing.procs import serve

    from .crosscheck import HANDLERS as CROSS
    from .run import set_build_cache_size
    from .isolated import HANDLERS
    handlers = {**HANDLERS, **CROSS}
    memory_mib, cache_size = int(argv[1]), int(argv[2])
    if memory_mib:
        import resource
        limit = memory_mib * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    set_build_cache_size(cache_size)
    if len(argv) >= 5:
        from .build_cache import configure
        configure(argv[3], float(argv[4]))
    serve(lambda req: ("ok", handlers[req[0]](*req[1])), argv[:1], prepare=_import_tvm)


def _import_tvm() -> None:
    import tvm  # noqa: F401  (seconds: paid at start-up, outside any request's timeout)


if __name__ == "__main__":
    main(sys.argv[1:])
