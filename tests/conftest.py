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


@pytest.fixture(scope="module")
def engine():
    """The paper's strategies (what a search loads by default), once per module; a module that
    needs other strategies defines its own ``engine``."""
    from engine import Engine
    return Engine(strategies="paper")


@pytest.fixture(scope="module")
def verifier():
    """An llvm Verifier with few trials and repeats (tests assert verdicts, never timings)."""
    from lowering import Verifier
    v = Verifier("llvm", trials=2, timeout=120, repeat=3)
    yield v
    v.close()


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
