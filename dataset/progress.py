"""Progress on stderr: a tqdm bar (rate and ETA) on a terminal; elsewhere (a log file, CI, a job run
under nohup) a plain line at most every ``LOG_EVERY_S`` seconds and at the end, so a log shows how far a
long job got and which item it was on."""
from __future__ import annotations

import sys
import time

LOG_EVERY_S = 30.0


class Progress:
    def __init__(self, total: int, done: int = 0, unit: str = "item", desc: str = "generate"):
        self.total, self.done, self.unit, self.desc = total, done, unit, desc
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, initial=done, unit=unit, file=sys.stderr, dynamic_ncols=True,
                            smoothing=0.1, desc=desc)
        self.start = self.last = time.monotonic()
        self.started_at = done

    def advance(self, **postfix) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix(postfix, refresh=False)
            self.bar.update(1)
            return
        now = time.monotonic()
        if now - self.last >= LOG_EVERY_S or self.done >= self.total:
            self.last = now
            print(self._line(now, postfix), file=sys.stderr, flush=True)

    def _line(self, now: float, postfix: dict) -> str:
        spent, here = now - self.start, self.done - self.started_at
        eta = f", about {spent / here * (self.total - self.done):.0f} s left" if here and self.done < self.total else ""
        extra = "".join(f", {k} {v}" for k, v in postfix.items())
        return f"{self.desc}: {self.done}/{self.total} {self.unit}s, {spent:.0f} s{eta}{extra}"

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
