"""Progress of a training stage on stderr: one line per logged step (loss, learning rate, seconds
per step, time left) and one per checkpoint, readable in a log file as on a terminal."""
from __future__ import annotations

import sys
import time

from transformers import TrainerCallback


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class StepLog(TrainerCallback):
    def __init__(self, stage: str, stream=None):
        self.stage = stage
        self.stream = stream or sys.stderr
        self.seconds: list[float] = []          # per optimiser step, this process only
        self._t = None

    def on_train_begin(self, args, state, control, **kw):
        self._t = time.perf_counter()
        if state.global_step:
            print(f"{self.stage}: from step {state.global_step} of {state.max_steps}", file=self.stream, flush=True)

    def on_step_end(self, args, state, control, **kw):
        now = time.perf_counter()
        self.seconds.append(now - self._t)
        self._t = now

    def on_log(self, args, state, control, logs=None, **kw):
        if not logs or "loss" not in logs or not self.seconds:
            return
        recent = self.seconds[-10:]
        per = sum(recent) / len(recent)
        left = max(0, state.max_steps - state.global_step) * per
        print(f"{self.stage}: step {state.global_step}/{state.max_steps} loss {logs['loss']:.4f} "
              f"lr {logs.get('learning_rate', 0):.2e} {per:.1f} s/step, {_clock(left)} left",
              file=self.stream, flush=True)

    def on_save(self, args, state, control, **kw):
        print(f"{self.stage}: checkpoint at step {state.global_step}", file=self.stream, flush=True)
