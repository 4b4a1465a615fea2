"""``python -m dataset.evaluate DATASET --endpoint URL --model NAME``: a served model evaluated on
a generated dataset (``evaluation``)."""
import sys

from .evaluation import main

sys.exit(main())
