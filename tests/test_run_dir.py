"""A training run's output directory (jtcse.training.run_dir): fresh, resume, finished, refused, undone."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from jtcse.errors import JTCSEError
from jtcse.training.run_dir import discard_failed_start, open_output_dir, plan_output_dir, stage_output
from jtcse.training.run_summary import write_run_summary


def _checkpoint(output_dir: Path, step: int, *, max_steps: int = 100, state: str | None = None) -> Path:
    """A trainer checkpoint folder; ``state`` replaces its trainer_state.json text ("" leaves it out)."""
    folder = output_dir / "checkpoints" / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    text = json.dumps({"global_step": step, "max_steps": max_steps}) if state is None else state
    if text:
        (folder / "trainer_state.json").write_text(text, encoding="utf-8")
    return folder


def _finish(output_dir: Path, config: dict) -> None:
    stage_output(output_dir, config).add("modules.json", "run_summary.json")  # what a trainer enters before writing
    (output_dir / "modules.json").write_text("[]", encoding="utf-8")
    write_run_summary(output_dir, {"stage": "x", "steps": 2, "config": config})


def test_fresh_dir_records_config_and_resumes_only_with_the_same_config(tmp_path):
    config = {"lr": 1e-3, "batch_size": 8}
    plan = plan_output_dir(tmp_path / "run", config, resume=True, overwrite=False)
    assert plan.action == "fresh" and not plan.existed
    assert not (tmp_path / "run").exists()  # planning writes nothing
    open_output_dir(plan)
    assert json.loads((tmp_path / "run" / "checkpoints" / "jtcse_run_config.json").read_text()) == config
    _checkpoint(tmp_path / "run", 4)
    _checkpoint(tmp_path / "run", 12)
    plan = plan_output_dir(tmp_path / "run", config, resume=True, overwrite=False)
    assert plan.action == "resume" and plan.resume_from.endswith("checkpoint-12") and not plan.at_end
    with pytest.raises(JTCSEError, match=r"\(batch_size 8 -> 16, lr 0.001 -> 0.0001\).*--no-resume"):
        plan_output_dir(tmp_path / "run", {"lr": 1e-4, "batch_size": 16}, resume=True, overwrite=False)
    # --no-resume starts over: stale checkpoints go when the directory is opened, the new config is recorded
    plan = plan_output_dir(tmp_path / "run", {"lr": 1e-4}, resume=False, overwrite=False)
    assert plan.action == "fresh" and (tmp_path / "run" / "checkpoints" / "checkpoint-12").is_dir()
    open_output_dir(plan)
    assert not list((tmp_path / "run" / "checkpoints").glob("checkpoint-*"))
    assert plan_output_dir(tmp_path / "run", {"lr": 1e-4}, resume=True, overwrite=False).action == "fresh"


def test_incomplete_checkpoints_are_skipped_reported_and_removed(tmp_path, caplog):
    """trainer_state.json is the last file Trainer._save_checkpoint writes: without it (or cut off) a
    checkpoint was killed while being saved, and the newest complete one is used."""
    config = {"lr": 1e-3}
    open_output_dir(plan_output_dir(tmp_path, config, resume=True, overwrite=False))
    _checkpoint(tmp_path, 2)
    _checkpoint(tmp_path, 4, state="")
    _checkpoint(tmp_path, 6, state='{"global_st')
    with caplog.at_level(logging.WARNING):
        plan = plan_output_dir(tmp_path, config, resume=True, overwrite=False)
    assert plan.resume_from.endswith("checkpoint-2")
    [line] = [r.getMessage() for r in caplog.records if "incomplete" in r.getMessage()]
    assert "checkpoint-6, checkpoint-4" in line and "resuming from checkpoint-2" in line
    open_output_dir(plan)
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("checkpoint-*")) == ["checkpoint-2"]


def test_finished_run_is_refused_unless_overwrite_and_kept_until_replaced(tmp_path):
    _finish(tmp_path, {"a": 1})
    with pytest.raises(JTCSEError, match=r"already holds a finished run, with other settings \(a 1 -> 2\)"):
        plan_output_dir(tmp_path, {"a": 2}, resume=True, overwrite=False)
    plan = plan_output_dir(tmp_path, {"a": 2}, resume=True, overwrite=True)
    assert plan.action == "fresh"
    open_output_dir(plan)
    # the old model and summary stay until the new model is saved (save_final_model)
    assert (tmp_path / "run_summary.json").is_file() and (tmp_path / "modules.json").is_file()


def test_finished_run_with_the_same_settings_is_a_no_op(tmp_path, caplog):
    config = {"a": 1, "max_steps": 2}
    _finish(tmp_path, config)
    _checkpoint(tmp_path, 2, max_steps=2)  # kept checkpoints do not make it train further
    with caplog.at_level(logging.WARNING):
        plan = plan_output_dir(tmp_path, config, resume=True, overwrite=False)
    assert plan.finished and plan.summary["steps"] == 2
    assert "already holds this finished run (2 steps, same settings); nothing to do" in caplog.text


def test_finished_run_with_checkpoints_continues_only_when_resuming_with_the_same_settings(tmp_path, caplog):
    config = {"lr": 1e-3, "max_steps": 2}
    open_output_dir(plan_output_dir(tmp_path, config, resume=True, overwrite=False))
    _checkpoint(tmp_path, 2, max_steps=2)
    _finish(tmp_path, config)
    # a longer run continues from the finished one; the length is the one setting that may change
    with caplog.at_level(logging.WARNING):
        plan = plan_output_dir(tmp_path, {"lr": 1e-3, "max_steps": 5}, resume=True, overwrite=False)
    assert plan.resume_from.endswith("checkpoint-2") and not plan.at_end
    assert "first step after the resume runs at the rate it ended with" in caplog.text
    with pytest.raises(JTCSEError, match=r"\(lr 0.001 -> 0.01\).*pass --overwrite"):
        plan_output_dir(tmp_path, {"lr": 1e-2, "max_steps": 5}, resume=True, overwrite=False)
    with pytest.raises(JTCSEError, match="already holds a finished run"):
        plan_output_dir(tmp_path, {"lr": 1e-3, "max_steps": 5}, resume=False, overwrite=False)
    with pytest.raises(JTCSEError, match="checkpoint at step 2; --max-steps 1 would train no further"):
        plan_output_dir(tmp_path, {"lr": 1e-3, "max_steps": 1}, resume=True, overwrite=False)


def test_finished_run_without_checkpoints_says_why_it_cannot_train_further(tmp_path):
    _finish(tmp_path, {"lr": 1e-3, "max_steps": 2})
    with pytest.raises(JTCSEError, match="its checkpoints were deleted, so it cannot train further"):
        plan_output_dir(tmp_path, {"lr": 1e-3, "max_steps": 4}, resume=True, overwrite=False)


def test_a_checkpoint_at_the_last_step_finishes_without_training(tmp_path):
    """Killed after its last checkpoint, before the final save: the trainer would run one step more."""
    config = {"lr": 1e-3, "max_steps": 6}
    open_output_dir(plan_output_dir(tmp_path, config, resume=True, overwrite=False))
    _checkpoint(tmp_path, 6, max_steps=6)
    plan = plan_output_dir(tmp_path, config, resume=True, overwrite=False)
    assert plan.resume_from.endswith("checkpoint-6") and plan.at_end


def test_output_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "afile.txt"
    target.write_text("mine")
    with pytest.raises(JTCSEError, match=r"afile\.txt is a file; -o/--output names the folder"):
        plan_output_dir(target, {}, resume=True, overwrite=True)
    assert target.read_text() == "mine"


def test_a_fresh_run_that_fails_before_its_first_checkpoint_leaves_the_output_as_it_was(tmp_path):
    new = plan_output_dir(tmp_path / "new", {}, resume=True, overwrite=False)
    open_output_dir(new)
    discard_failed_start(new)
    assert not (tmp_path / "new").exists()
    (tmp_path / "old").mkdir()
    old = plan_output_dir(tmp_path / "old", {}, resume=True, overwrite=False)
    open_output_dir(old)
    discard_failed_start(old)
    assert os.listdir(tmp_path / "old") == []  # not even the record it made
    # once a checkpoint is complete the run is kept, to resume or inspect
    open_output_dir(old)
    _checkpoint(tmp_path / "old", 2)
    discard_failed_start(old)
    assert (tmp_path / "old" / "checkpoints" / "checkpoint-2").is_dir()
