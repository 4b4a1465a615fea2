"""``python -m dataset.check OUT``: every claim of a generated dataset re-derived (``checker``)."""
import sys

from engine.leir.cli import run_cli

from .checker import main

sys.exit(run_cli(main))
