"""Shared trainer glue: output-dir/resume rules, the non-finite-loss guard, loss-history summary."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import pytest
import torch
from transformers import TrainerControl, TrainerState

from jtcse.errors import JTCSEError
from jtcse.training.common import (
    DEV_METRIC,
    discard_failed_start,
    loss_history,
    nan_guard,
    open_output_dir,
    plan_output_dir,
    write_run_summary,
)


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
    with pytest.raises(JTCSEError, match=r"\(batch_size, lr differ\).*--no-resume"):
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
    with pytest.raises(JTCSEError, match=r"already holds a finished run, with other settings \(a differ\)"):
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
    with pytest.raises(JTCSEError, match=r"\(lr differ\).*pass --overwrite"):
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
    (tmp_path / "old" / "notes.txt").write_text("mine")
    old = plan_output_dir(tmp_path / "old", {}, resume=True, overwrite=False)
    open_output_dir(old)
    discard_failed_start(old)
    assert sorted(os.listdir(tmp_path / "old")) == ["notes.txt"]
    # once a checkpoint is complete the run is kept, to resume or inspect
    open_output_dir(old)
    _checkpoint(tmp_path / "old", 2)
    discard_failed_start(old)
    assert (tmp_path / "old" / "checkpoints" / "checkpoint-2").is_dir()


class _ScaledSum(torch.nn.Module):
    """A stand-in loss module: the guard only watches what ``forward`` returns."""

    def forward(self, values):
        return values.sum()


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_loss_stops_training_with_a_clear_error(bad, tmp_path):
    loss = _ScaledSum()
    guard = nan_guard(loss, 1e-3, tmp_path)
    state, control = TrainerState(), TrainerControl()
    for step, value in enumerate([0.5, bad, 0.25], start=0):
        state.global_step = step
        guard.on_step_begin(None, state, control)
        loss(torch.tensor([value, 1.0]))
    assert guard.first_bad_step() == 2
    control.should_log = True
    with pytest.raises(JTCSEError, match=r"NaN or infinite at step 2\. Try a lower learning rate \(now 0\.001\)"):
        guard.on_step_end(None, state, control)
    guard.remove()
    loss(torch.tensor([bad]))  # the hook is gone: nothing is recorded any more
    assert guard.first_bad_step() == 2


def test_loss_history_picks_first_last_and_best_dev():
    history = [
        {"loss": 3.0, "step": 1},
        {DEV_METRIC: 0.5, "step": 2},
        {"loss": 2.0, "step": 3},
        {DEV_METRIC: 0.7, "step": 4},
        {DEV_METRIC: 0.6, "step": 6},
        {"loss": 1.5, "step": 6},
    ]
    out = loss_history(history)
    assert out["first_logged_loss"] == 3.0 and out["last_logged_loss"] == 1.5
    assert out["best_dev_spearman"] == 0.7 and out["best_step"] == 4
    assert out["dev_spearman_by_step"] == {2: 0.5, 4: 0.7, 6: 0.6}


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["simcse", "distill"])
def test_simcse_and_distill_stop_on_a_nan_loss_naming_the_step(stage, tiny_bert, tmp_path):
    from jtcse.defaults import default_corpus_sentences
    from jtcse.training.distill import distill
    from jtcse.training.simcse import train_simcse

    sentences = default_corpus_sentences(limit=16)
    # AdamW moves every weight by about lr in step 1; with lr = 1e30 the step-2 forward overflows
    settings = dict(batch_size=8, max_steps=4, logging_steps=1, learning_rate=1e30, max_seq_length=16)
    with pytest.raises(JTCSEError, match=r"NaN or infinite at step 2\b.*lower learning rate"):
        if stage == "simcse":
            train_simcse(tiny_bert, sentences, tmp_path / "run", **settings)
        else:
            distill(tiny_bert, tiny_bert, sentences, tmp_path / "run", **settings)
    assert not (tmp_path / "run" / "modules.json").exists()


def test_precision_flags():
    import torch

    from jtcse.training.common import precision_flags
    from jtcse.training.stage import TrainingSettings

    assert precision_flags("fp32") == {"fp16": False, "bf16": False}
    assert precision_flags("bf16") == {"fp16": False, "bf16": True}
    with pytest.raises(JTCSEError, match="precision must be one of auto, fp32, fp16, bf16"):
        TrainingSettings(precision="half")  # the one check of a precision name; precision_flags trusts it
    if not torch.cuda.is_available():
        assert precision_flags("auto") == {"fp16": False, "bf16": False}
        with pytest.raises(JTCSEError, match="fp16 needs a CUDA GPU"):
            precision_flags("fp16")


@pytest.mark.slow
def test_twin_trains_in_bf16_with_gradient_checkpointing(tmp_path, tiny_bert, tiny_bert_b):
    """The GPU options reach the trainer and the towers (run here on the CPU: bf16 autocast)."""
    import torch
    from transformers import TrainerCallback

    from jtcse.training.twin import train_twin

    seen = {}

    class Inspect(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            seen["bf16"] = args.bf16
            seen["checkpointing"] = [m.is_gradient_checkpointing for m in model[0].tower_models()]

    torch.set_num_threads(1)
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"sentence number {i} about topic {i % 5}" for i in range(24)) + "\n", encoding="utf-8")
    summary = train_twin(
        tiny_bert, tiny_bert_b, corpus, tmp_path / "run", batch_size=8, max_seq_length=16, max_steps=2,
        learning_rate=5e-5, precision="bf16", gradient_checkpointing=True, show_progress=False, plot=False,
        callbacks=[Inspect()],
    )
    assert summary["steps"] == 2
    assert seen == {"bf16": True, "checkpointing": [True, True]}


# ------------------------------------------------------------------------------ the stage runner's rules

_BAD_SETTINGS = [
    ({"batch_size": 1}, "batch_size must be at least 2 (got 1)"),
    ({"max_seq_length": 3}, "max_seq_length must be at least 4 (got 3)"),
    ({"learning_rate": float("nan")}, "learning_rate must be a positive number"),
    ({"max_steps": 0}, "max_steps must be a positive step count or -1"),
    ({"eval_steps": 0}, "eval_steps must be at least 1"),
    ({"precision": "fp8"}, "precision must be one of auto, fp32, fp16, bf16"),
]


@pytest.mark.parametrize("stage", ["twin", "simcse", "distill"])
@pytest.mark.parametrize("bad, message", _BAD_SETTINGS)
def test_every_stage_refuses_bad_settings_by_the_same_rule(stage, bad, message, tiny_bert, tiny_bert_b, tmp_path):
    """One rule (TrainingSettings) for every stage, checked before anything is loaded or written."""
    from jtcse.training.distill import distill
    from jtcse.training.simcse import train_simcse
    from jtcse.training.stage import TrainingSettings
    from jtcse.training.twin import train_twin

    with pytest.raises(JTCSEError, match=re.escape(message)):
        TrainingSettings(**bad)
    sentences = [f"sentence number {i}" for i in range(8)]
    out = tmp_path / "run"
    with pytest.raises(JTCSEError, match=re.escape(message)):
        if stage == "twin":
            corpus = tmp_path / "c.txt"
            corpus.write_text("\n".join(sentences) + "\n", encoding="utf-8")
            train_twin(tiny_bert, tiny_bert_b, corpus, out, **{"max_steps": 1, **bad})
        elif stage == "simcse":
            train_simcse(tiny_bert, sentences, out, **{"max_steps": 1, **bad})
        else:
            distill(tiny_bert, tiny_bert, sentences, out, **{"max_steps": 1, **bad})
    assert not out.exists()


def test_trainers_take_settings_whole_or_as_keywords_on_their_own_defaults():
    """``settings=`` replaces a trainer's defaults, keywords go on top, a misspelt keyword is a TypeError."""
    from jtcse.training.distill import DISTILL_SETTINGS
    from jtcse.training.simcse import SIMCSE_SETTINGS
    from jtcse.training.stage import TrainingSettings
    from jtcse.training.twin import TWIN_SETTINGS

    assert (SIMCSE_SETTINGS.max_seq_length, SIMCSE_SETTINGS.learning_rate, SIMCSE_SETTINGS.eval_steps) == (32, 3e-5, 125)
    assert (TWIN_SETTINGS.learning_rate, TWIN_SETTINGS.logging_steps, TWIN_SETTINGS.precision) == (1.3e-6, None, "fp32")
    assert DISTILL_SETTINGS.eval_steps == 250
    given = TrainingSettings(batch_size=8, seed=7)
    assert SIMCSE_SETTINGS.given(None, {}, "train_simcse") == SIMCSE_SETTINGS
    assert SIMCSE_SETTINGS.given(given, {}, "train_simcse") == given
    assert SIMCSE_SETTINGS.given(given, {"max_steps": 3}, "train_simcse") == TrainingSettings(batch_size=8, seed=7, max_steps=3)
    assert SIMCSE_SETTINGS.given(None, {"batch_size": 8}, "train_simcse") == TrainingSettings(
        batch_size=8, max_seq_length=32, learning_rate=3e-5, eval_steps=125
    )
    with pytest.raises(TypeError, match="train_simcse\\(\\) got an unexpected keyword argument 'batch_sise'"):
        SIMCSE_SETTINGS.given(None, {"batch_sise": 8}, "train_simcse")
    with pytest.raises(JTCSEError, match="batch_size must be at least 2"):
        TWIN_SETTINGS.given(None, {"batch_size": 1}, "train_twin")


SUMMARY_KEYS = {
    "stage", "output_dir", "saved_model", "model", "data", "loss", "settings", "resumed_from", "steps", "seconds",
    "train_loss", "first_logged_loss", "last_logged_loss", "loss_terms", "dev_file", "dev_spearman_by_step",
    "best_dev_spearman", "best_step", "final_dev_spearman", "checkpoints", "training_curves", "versions", "config",
}


@pytest.mark.slow
def test_checkpoint_policy_best_and_last_while_training_then_deleted_unless_kept(tiny_bert, tmp_path, shared_data):
    """While training the trainer holds the best checkpoint by dev Spearman and the last one; after the
    final save they are deleted, unless ``keep_checkpoints``. Every stage writes one summary schema."""
    from transformers import TrainerCallback

    from jtcse.training.simcse import train_simcse

    dev = tmp_path / "dev.csv"
    lines = (shared_data / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()[:40]
    dev.write_text("\n".join(lines) + "\n", encoding="utf-8")
    seen: list[tuple[int, list[str], str | None]] = []

    class Watch(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            ckpts = sorted(p.name for p in (tmp_path / "kept" / "checkpoints").glob("checkpoint-*"))
            best = state.best_model_checkpoint and state.best_model_checkpoint.rsplit("/", 1)[-1]
            seen.append((state.global_step, ckpts, best))

    sentences = [f"sentence number {i} about topic {i % 5}" for i in range(32)]
    settings = dict(dev_file=dev, batch_size=8, max_steps=8, eval_steps=2, learning_rate=1e-3, max_seq_length=16)
    kept = train_simcse(tiny_bert, sentences, tmp_path / "kept", keep_checkpoints=True, callbacks=[Watch()], **settings)
    for step, ckpts, best in seen:
        assert len(ckpts) <= 2, (step, ckpts)  # never more than the best and the last
        if ckpts:
            assert f"checkpoint-{2 * (step // 2)}" in ckpts and (best is None or best in ckpts), (step, ckpts, best)
    left = sorted(p.name for p in (tmp_path / "kept" / "checkpoints").glob("checkpoint-*"))
    best_name = f"checkpoint-{kept['best_step']}"
    assert left == sorted({best_name, "checkpoint-8"})
    assert kept["checkpoints"] == str(tmp_path / "kept" / "checkpoints")
    assert set(kept) == SUMMARY_KEYS
    assert kept["final_dev_spearman"] == pytest.approx(kept["best_dev_spearman"], abs=1e-6)

    dropped = train_simcse(tiny_bert, sentences, tmp_path / "dropped", **settings)
    assert dropped["checkpoints"] is None and not (tmp_path / "dropped" / "checkpoints").exists()
    assert (tmp_path / "dropped" / "training_curves.png").is_file()
