"""``python -m dataset.train DATASET... -o OUT``: a model tuned on generated datasets (``trainer``)."""
import sys

from .trainer import main

sys.exit(main())
