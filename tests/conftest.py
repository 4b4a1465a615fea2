"""Shared test fixtures. TVM is imported once per test run (it costs seconds and imports torch)."""
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus" / "programs.jsonl"
EXAMPLES = ROOT / "examples"


def corpus_records():
    """The public corpus as JSON records, or [] when ../shared is absent."""
    if not CORPUS.exists():
        return []
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def tvm():
    import tvm as _tvm
    return _tvm
