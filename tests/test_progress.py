"""What a run says about its time: a stage's first steps timed (StepClock, on a clock the test turns by hand) and
the time left in the run's training (RunProgress: the stage's rest at its measured speed, the later stages' work
at the speed measured last)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from jtcse.pipeline.progress import RunProgress, Work, duration, planned_work
from jtcse.training import step_clock
from jtcse.training.step_clock import StepClock, StepEstimate


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture()
def clock(monkeypatch):
    turned = Clock()
    monkeypatch.setattr(step_clock.time, "perf_counter", turned)
    return turned


def _run(clock, seconds_per_step, steps, *, evaluate_after=None, origin=0):
    """A trainer's callbacks for a run of ``steps`` steps of 2 s each (the first 10 s: its one-off costs)."""
    reports = []
    timer = StepClock(reports.append, steps=3)
    args = SimpleNamespace(per_device_train_batch_size=16, world_size=1)
    state = SimpleNamespace(global_step=origin, max_steps=steps)
    timer.on_train_begin(args, state, None)
    for step in range(origin + 1, steps + 1):
        clock.now += 10.0 if step == origin + 1 else seconds_per_step
        state.global_step = step
        timer.on_step_end(args, state, None)
        if step == evaluate_after:
            clock.now += 30.0  # a dev evaluation and a checkpoint: not steps
            timer.on_evaluate(args, state, None)
            clock.now += 5.0
            timer.on_save(args, state, None)
    return reports


def test_a_run_is_timed_on_the_steps_after_its_first_without_evaluations(clock):
    [estimate] = _run(clock, 2.0, 25, evaluate_after=2)
    assert estimate == StepEstimate(steps=25, batch_size=16, done=4, measured=3, seconds_per_step=2.0)
    assert estimate.seconds_left == 42.0 and estimate.seconds == 50.0
    [short] = _run(clock, 2.0, 2)  # fewer steps than asked for: the one after the first
    assert (short.measured, short.seconds_per_step, short.done) == (1, 2.0, 2)
    [single] = _run(clock, 2.0, 1)  # a one-step run: measured on that step
    assert (single.measured, single.seconds_per_step) == (1, 10.0)
    [resumed] = _run(clock, 2.0, 25, origin=20)  # a resumed run times its own steps
    assert (resumed.done, resumed.measured, resumed.seconds_left) == (24, 3, 2.0)


def test_durations_read_as_a_person_says_them():
    assert [duration(s) for s in (0, 45, 61, 552, 600, 3900, 7200)] == [
        "0 s", "45 s", "1 min 1 s", "9 min 12 s", "10 min", "1 h 5 min", "2 h"
    ]  # fmt: skip


def test_the_time_left_is_the_measured_rest_and_the_later_stages_work_at_the_last_speed(monkeypatch):
    from jtcse.pipeline import progress
    from jtcse.pipeline.stages import DISTILL, EVAL, TWIN, WARMUP_A, WARMUP_B

    now = Clock()
    monkeypatch.setattr(progress.time, "perf_counter", now)
    stages = [WARMUP_A, WARMUP_B, TWIN, DISTILL, EVAL]
    work = {
        WARMUP_A.metadata.name: Work(100, 32, 2.0),  # 6,400 sentence passes each
        WARMUP_B.metadata.name: Work(100, 32, 2.0),
        TWIN.metadata.name: Work(25, 128, 8.0),  # 25,600
        DISTILL.metadata.name: Work(50, 64, 1.0),  # 3,200
    }
    said = []
    run = RunProgress(stages, work, say=said.append)
    run.started(WARMUP_A, "out/tower_a")
    assert said == ["[1/5] warmup_a → out/tower_a (100 steps of 32)"] and run.seconds_left() is None
    run.measured(StepEstimate(steps=100, batch_size=32, done=4, measured=3, seconds_per_step=0.64))  # 0.01 s a pass
    assert run.seconds_left() == pytest.approx(96 * 0.64 + (6400 + 25600 + 3200) * 0.01)
    assert said[-1] == (
        "[1/5] warmup_a: 100 steps of 32; ~1 min 4 s at this machine's measured speed (0.64 s a step over 3); "
        "the run has ~7 min of training left"
    )
    now.now += 61.44  # the rest of the stage, as measured
    run.ended(WARMUP_A, {"status": "ran", "output": "out/tower_a", "summary": {"final_dev_spearman": None}})
    assert said[-1] == "[1/5] warmup_a done in 1 min 1 s; dev score: eval stage; ~6 min of training left"
    assert run.seconds_left() == pytest.approx(352.0)
    run.started(WARMUP_B, "out/tower_b")
    run.ended(WARMUP_B, {"status": "skipped (done)", "output": "out/tower_b", "summary": {}})
    assert said[-1] == "[2/5] warmup_b: done before, skipped; the run has ~5 min of training left"
    run.started(EVAL, "out/eval")
    run.ended(
        EVAL, {"status": "ran", "output": "out/eval", "summary": {"dev_spearman": {"start": 0.8, "distill": 0.81}}}
    )
    assert said[-1].endswith("; dev Spearman ×100: start 80.00, distill 81.00")  # nothing left to train: no estimate


def test_the_planned_work_counts_the_stages_that_train_with_their_own_settings():
    from jtcse.pipeline.settings import PipelineConfig
    from jtcse.pipeline.stages import DISTILL, EVAL, PROBE, TWIN, WARMUP_A

    config = PipelineConfig()
    work = planned_work([WARMUP_A, PROBE, TWIN, DISTILL, EVAL], config, rows=1000, layers=6)
    assert set(work) == {
        WARMUP_A.metadata.name,
        TWIN.metadata.name,
        DISTILL.metadata.name,
    }  # the probe's twins and the eval: not counted
    assert work[WARMUP_A.metadata.name] == Work(32, 32, 2.0)  # one epoch of 1,000 rows, two views
    assert work[TWIN.metadata.name] == Work(
        25, 128, pytest.approx(4 * (1 + 5 / 6) * 4 / 3)
    )  # CAELs from layer 2, GradCache
    assert work[DISTILL.metadata.name] == Work(32, 64, 1.0)  # two epochs of 16 batches
