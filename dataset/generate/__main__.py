"""``python -m dataset.generate``: the generation job (``driver``)."""
import sys

from engine.leir.cli import run_cli

from .driver import main

sys.exit(run_cli(main))
