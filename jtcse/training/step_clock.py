"""How long a training run will take, measured on its own first steps: :class:`StepClock`.

No table of speeds: the run's first optimizer step pays one-off costs (the first batches, memory growing,
kernels chosen), so the clock starts when it ends and times the next ``steps`` steps; their mean is this
machine's speed for this run, and the steps left at that speed are the estimate. Evaluations are timed apart
from the steps (the trainer calls the callback before it evaluates), so a dev score on the way does not count as
a slow step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from transformers import TrainerCallback


@dataclass(frozen=True)
class StepEstimate:
    """A run's speed measured on its first steps: ``steps`` in all (``max_steps``), ``batch_size`` sentences a
    step (all processes), ``done`` when measured, ``seconds_per_step`` (the mean over ``measured`` steps) and
    ``seconds_left`` for the steps left at that speed."""

    steps: int
    batch_size: int
    done: int
    measured: int
    seconds_per_step: float

    @property
    def seconds_left(self) -> float:
        return self.seconds_per_step * max(0, self.steps - self.done)

    @property
    def seconds(self) -> float:
        """The whole run's steps at the measured speed."""
        return self.seconds_per_step * self.steps


class StepClock(TrainerCallback):
    """Times the steps after a run's first (``steps`` of them, fewer when the run is shorter) and calls
    ``report`` once with a :class:`StepEstimate`. A resumed run measures its own first steps after the resume; a
    run of one step is measured on that step."""

    def __init__(self, report: Callable[[StepEstimate], None], steps: int = 3) -> None:
        if steps < 1:
            raise ValueError(f"steps must be at least 1, not {steps}")
        self.report = report
        self.steps = steps
        self._origin: int | None = None
        self._begun = self._started = self._mark = 0.0
        self._paused = 0.0
        self._reported = False

    def on_train_begin(self, args, state, control, **kwargs):
        self._origin, self._reported, self._paused = state.global_step, False, 0.0
        self._begun = time.perf_counter()
        self._started = 0.0

    def on_step_end(self, args, state, control, **kwargs):
        if self._reported or self._origin is None:
            return
        now = time.perf_counter()
        wanted = min(self.steps, state.max_steps - self._origin - 1)
        if not self._started:  # the first step of this run ends: the clock starts
            self._started = self._mark = now
            if wanted < 1:  # nothing after it to time: the first step is the measure
                self._estimate(args, state, now - self._begun, 1)
            return
        self._mark = now
        timed = state.global_step - self._origin - 1
        if timed >= wanted:
            self._estimate(args, state, now - self._started - self._paused, timed)

    def on_evaluate(self, args, state, control, **kwargs):
        self._pause()

    def on_save(self, args, state, control, **kwargs):
        self._pause()

    def _pause(self) -> None:
        """An evaluation or a checkpoint between two steps is not a step: the trainer calls these when it is done,
        before the next step begins, so the time since the last mark is taken out."""
        if self._started and not self._reported:
            now = time.perf_counter()
            self._paused += now - self._mark
            self._mark = now

    def _estimate(self, args, state, seconds: float, measured: int) -> None:
        self._reported = True
        self.report(
            StepEstimate(
                steps=state.max_steps,
                batch_size=args.per_device_train_batch_size * max(1, args.world_size),
                done=state.global_step,
                measured=measured,
                seconds_per_step=max(seconds, 0.0) / measured,
            )
        )
