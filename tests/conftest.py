"""Shared test fixtures. TVM is imported once per test run (it costs seconds and imports torch)."""
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = ROOT / "examples" / "corpus"
CORPUS = CORPUS_DIR / "programs.jsonl"
COVERAGE = CORPUS_DIR / "reference_coverage.jsonl"
EXAMPLES = ROOT / "examples"


def corpus_records():
    """The public corpus (examples/corpus/) as JSON records."""
    if not CORPUS.exists():
        return []
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def tvm():
    import tvm as _tvm
    return _tvm


@pytest.fixture(scope="session")
def engine():
    """The paper's strategies (what a search loads by default), once per worker process (loading the
    rules costs seconds; tests only enumerate and apply with it); a module that needs other
    strategies defines its own ``engine``."""
    from engine import Engine
    return Engine(strategies="paper")


@pytest.fixture(scope="session")
def verifier():
    """An llvm Verifier with few trials and repeats (tests assert verdicts, never timings), once per
    worker process (its worker imports TVM: seconds)."""
    from lowering import Verifier
    v = Verifier("llvm", trials=2, timeout=120, repeat=3)
    yield v
    v.close()


_RUN_BUILD_CACHE = []


def pytest_configure(config):
    """The run's llvm builds go to an on-disk cache of its own (lowering.build_cache), empty at the
    start, as on a fresh machine: the tests neither fill the user's cache nor run faster on a second
    run than CI does. Set before the worker processes start, so they share it; a
    ``LEIR_BUILD_CACHE`` the caller set is kept."""
    import os
    import tempfile
    if hasattr(config, "workerinput") or os.environ.get("LEIR_BUILD_CACHE"):
        return
    folder = tempfile.mkdtemp(prefix="leir-test-builds-")
    os.environ["LEIR_BUILD_CACHE"] = folder
    _RUN_BUILD_CACHE.append(folder)


def pytest_unconfigure(config):
    import os
    import shutil
    for folder in _RUN_BUILD_CACHE:
        shutil.rmtree(folder, ignore_errors=True)
        if os.environ.get("LEIR_BUILD_CACHE") == folder:
            del os.environ["LEIR_BUILD_CACHE"]
    _RUN_BUILD_CACHE.clear()


_CUDA_DEVICE = []


def cuda_device_present() -> bool:
    """Whether TVM sees a CUDA device (imports tvm on first use)."""
    if not _CUDA_DEVICE:
        import tvm as _tvm
        _CUDA_DEVICE.append(bool(_tvm.runtime.enabled("cuda") and _tvm.cuda(0).exist))
    return _CUDA_DEVICE[0]


def pytest_runtest_setup(item):
    """Tests marked ``gpu`` need a CUDA device: skipped where there is none."""
    if item.get_closest_marker("gpu") is not None and not cuda_device_present():
        pytest.skip("no CUDA device on this machine")


# The default run hands whole files to two processes (pyproject's addopts: --dist loadfile
# --no-loadscope-reorder). Files are handed out in this order: the longest first (seconds on 2
# cores, measured with --durations), then the others, most tests first, so that the short files
# fill in at the end and neither process waits for the other's last long file. Order only: a file
# missing from the list still runs.
LONGEST_FIRST = (
    "test_dataset_generate.py", "test_quickstart.py", "test_dataset_depth.py", "test_dataset_evaluate.py",
    "test_dataset_menu.py", "test_rules_tensor_split_concat.py", "test_neighbours_lower.py", "test_kernels.py",
    "test_search_batch.py", "test_enumerate.py", "test_search.py", "test_rules_math.py", "test_compose.py",
    "test_rules_graph.py", "test_verifier.py", "test_cuda_static.py", "test_rule_validation.py",
    "test_rules_memory.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    counts: dict = {}
    for item in items:
        counts[item.path.name] = counts.get(item.path.name, 0) + 1
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), -counts[item.path.name], str(item.path)))
