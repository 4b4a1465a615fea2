"""A progress bar on stderr with rate and ETA (tqdm), silent when stderr is not a terminal."""
from __future__ import annotations

import sys


class Progress:
    def __init__(self, total: int, done: int = 0, unit: str = "item", desc: str = "generate"):
        from tqdm import tqdm
        self.bar = tqdm(total=total, initial=done, unit=unit, file=sys.stderr, disable=None, dynamic_ncols=True,
                        smoothing=0.1, desc=desc)

    def advance(self, **postfix) -> None:
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
