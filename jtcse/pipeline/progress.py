"""What a pipeline run says while it runs: :class:`RunProgress` prints one line as each stage starts, one when a
training stage has timed its first steps (its length at this machine's measured speed), and one as it ends (its
time and dev score), each with the time the run's training has left.

No table of speeds. A training stage times its own first steps (:class:`~jtcse.training.step_clock.StepClock`), and
the time left in the stages after it is their work at the speed measured last: a stage's work is its steps ×
sentences a step × forward-and-backward passes of a sentence through a tower
(:meth:`~jtcse.training.settings.WarmupSettings.sentence_passes` and its kind), so the speed is seconds a pass. The
stages that only encode (an ensemble, the evaluation) are not counted. The trainers' own progress bars stay; the
lines are written above them (``tqdm.write``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jtcse.pipeline.stages import EVAL, Stage


@dataclass(frozen=True)
class Work:
    """A training stage's work as planned: ``steps`` of ``batch_size`` sentences, ``passes`` a sentence."""

    steps: int
    batch_size: int
    passes: float

    @property
    def units(self) -> float:
        return self.steps * self.batch_size * self.passes


def planned_work(stages: Sequence[Stage], config, rows: int, layers: int | None) -> dict[str, Work]:
    """``{stage name: Work}`` of each of ``stages`` that trains with its own settings, over ``rows`` training rows
    (the corpus's sentences) on towers of ``layers`` layers."""
    work = {}
    for stage in stages:
        settings = stage.settings(config)
        if settings is None or stage.trains_with != stage.metadata.table:  # not a training stage of its own settings
            continue
        training = settings.training
        work[stage.metadata.name] = Work(
            training.total_steps(rows), training.batch_size, settings.sentence_passes(layers)
        )
    return work


def duration(seconds: float) -> str:
    """``seconds`` as a person says it: 45 s, 9 min 12 s, 1 h 5 min."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if minutes < 10 and seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _about(seconds: float) -> str:
    """An estimate, rounded as one: ~45 s, ~9 min, ~1 h 5 min."""
    seconds = max(0, seconds)
    return "~" + duration(round(seconds / 60) * 60 if seconds >= 90 else seconds)


class RunProgress:
    """The lines of one run (see the module docstring). ``stages``: the plan's, in order; ``work``: the training
    stages' (:func:`planned_work`); ``say``: where a line goes (default ``tqdm.write``: above the trainers' bars)."""

    def __init__(self, stages: Sequence[Stage], work: dict[str, Work], say: Callable[[str], None] | None = None):
        if say is None:
            from tqdm.auto import tqdm

            say = tqdm.write
        self.stages, self.work, self.say = list(stages), work, say
        self.seconds_per_pass: float | None = None
        self._stage: Stage | None = None
        self._left_in_stage: tuple[float, float] | None = None  # (seconds left when measured, when)
        self._ended: Stage | None = None  # the last stage that ended
        self._started = 0.0

    def _tag(self, stage: Stage) -> str:
        return f"[{self.stages.index(stage) + 1}/{len(self.stages)}] {stage.metadata.name}"

    def started(self, stage: Stage, folder: Path) -> None:
        """``stage`` starts (writing ``folder``)."""
        self._stage, self._left_in_stage, self._started = stage, None, time.perf_counter()
        planned = self.work.get(stage.metadata.name)
        detail = f" ({planned.steps} steps of {planned.batch_size})" if planned else ""
        self.say(f"{self._tag(stage)} → {folder}{detail}{self._time_left(', the run has ')}")

    def measured(self, estimate) -> None:
        """The current stage timed its first steps (a :class:`~jtcse.training.step_clock.StepEstimate`)."""
        stage = self._stage
        if stage is None:
            return
        planned = self.work.get(stage.metadata.name)
        if planned is not None and planned.passes > 0:
            self.seconds_per_pass = estimate.seconds_per_step / (estimate.batch_size * planned.passes)
        self._left_in_stage = (estimate.seconds_left, time.perf_counter())
        self.say(
            f"{self._tag(stage)}: {estimate.steps} steps of {estimate.batch_size}; {_about(estimate.seconds)} at this "
            f"machine's measured speed ({estimate.seconds_per_step:.2f} s a step over {estimate.measured})"
            f"{self._time_left('; the run has ')}"
        )

    def ended(self, stage: Stage, row: dict[str, Any]) -> None:
        """``stage`` ended with its summary ``row`` (:meth:`~jtcse.pipeline.run.PipelineRun.execute`)."""
        self._stage, self._left_in_stage, self._ended = None, None, stage
        if row["status"] != "ran":
            self.say(f"{self._tag(stage)}: done before, skipped{self._time_left('; the run has ')}")
            return
        seconds = time.perf_counter() - self._started
        dev = dev_line(row["summary"], scored_later=EVAL in self._later(stage))
        self.say(f"{self._tag(stage)} done in {duration(seconds)}; {dev}{self._time_left('; ')}")

    def _later(self, stage: Stage | None) -> list[Stage]:
        """The stages after ``stage`` (``None``: every stage)."""
        return self.stages[self.stages.index(stage) + 1 :] if stage is not None else self.stages

    def _time_left(self, lead: str) -> str:
        """``lead`` + "~N min of training left" (at least ~1 s while any is left), or "" before any speed is
        measured and once no training is left."""
        left = self.seconds_left()
        return f"{lead}{_about(max(left, 1))} of training left" if left else ""

    def seconds_left(self) -> float | None:
        """The training left in the run: the current stage's rest at its measured speed (its planned work at the
        last measured speed until it has measured its own), then the later stages' planned work at the last
        measured speed; ``None`` before any stage measured one."""
        if self.seconds_per_pass is None:
            return None
        current = self._stage
        later = self._later(current or self._ended)
        left = sum(
            self.work[s.metadata.name].units * self.seconds_per_pass for s in later if s.metadata.name in self.work
        )
        if current is not None and current.metadata.name in self.work:
            if self._left_in_stage is not None:
                measured, when = self._left_in_stage
                left += max(0.0, measured - (time.perf_counter() - when))
            else:
                left += self.work[current.metadata.name].units * self.seconds_per_pass
        return left


def dev_line(summary: dict[str, Any], scored_later: bool) -> str:
    """A stage's dev score as its end line says it: the evaluation's score of every model, the trained model's own
    final dev Spearman (a stage that kept its best checkpoint by the dev file), else where it will be scored
    (``scored_later``: the run's evaluation stage is still to come)."""
    scores = summary.get("dev_spearman")
    if isinstance(scores, dict) and scores:
        shown = ", ".join(f"{label} {100 * value:.2f}" for label, value in scores.items() if value is not None)
        return f"dev Spearman ×100: {shown}"
    final = summary.get("final_dev_spearman")
    if isinstance(final, (int, float)):
        return f"dev Spearman ×100 {100 * final:.2f}"
    return f"dev score: {EVAL.metadata.name} stage" if scored_later else "no dev score in this run"
