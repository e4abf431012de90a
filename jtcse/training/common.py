"""The building blocks of the stage runner (:mod:`jtcse.training.stage`): output-directory / resume rules,
training arguments, reading the training sentences, the STS dev evaluator wiring, training under the
non-finite-loss guard (:func:`nan_guard`, :func:`train_guarded`) and the ``run_summary.json`` writer.

Trainer checkpoints live in ``<output_dir>/checkpoints`` so that the output directory itself holds only
the final model and its summary (rules in ``docs/runs.md``).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_write_json, crash_point
from jtcse.training import distributed

logger = logging.getLogger(__name__)

CHECKPOINTS_SUBDIR = "checkpoints"
RUN_SUMMARY_NAME = "run_summary.json"
RUN_CONFIG_NAME = "jtcse_run_config.json"
TRAINER_STATE_FILE = "trainer_state.json"
"""Written last into a trainer checkpoint (``Trainer._save_checkpoint``): its presence marks a complete one."""
DEV_EVALUATOR_NAME = "sts-dev"
DEV_METRIC = f"eval_{DEV_EVALUATOR_NAME}_spearman_cosine"
LENGTH_KEYS = ("max_steps", "epochs")
"""Settings that may change when a run resumes: they only say how long to train."""


def checkpoints_dir(output_dir: str | Path) -> Path:
    return Path(output_dir) / CHECKPOINTS_SUBDIR


def is_finished(output_dir: str | Path) -> bool:
    """True when ``output_dir`` holds a completed run: a saved model and its run summary."""
    output_dir = Path(output_dir)
    return (output_dir / RUN_SUMMARY_NAME).is_file() and (output_dir / "modules.json").is_file()


def finished_summary(output_dir: str | Path) -> dict[str, Any] | None:
    """The run summary of the finished run in ``output_dir`` (:func:`is_finished`), else ``None``."""
    if not is_finished(output_dir):
        return None
    try:
        return json.loads((Path(output_dir) / RUN_SUMMARY_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def checkpoint_state(checkpoint: str | Path) -> dict[str, Any] | None:
    """The trainer state of a checkpoint folder, or ``None`` when the checkpoint is incomplete.

    ``Trainer._save_checkpoint`` writes ``trainer_state.json`` last (after the weights, optimizer,
    scheduler and RNG states), so a folder whose state file is missing or unreadable was cut off
    while being saved.
    """
    try:
        state = json.loads((Path(checkpoint) / TRAINER_STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and isinstance(state.get("global_step"), int) else None


def newest_checkpoint(output_dir: str | Path) -> tuple[Path | None, dict[str, Any] | None, list[Path]]:
    """``(checkpoint, its trainer state, incomplete checkpoints newer than it)`` in ``<output_dir>/checkpoints``;
    ``(None, None, [...])`` when no checkpoint there is complete."""
    def step(path: Path) -> int:
        return int(path.name.rsplit("-", 1)[1])

    folders = [p for p in checkpoints_dir(output_dir).glob("checkpoint-*") if p.is_dir() and p.name.rsplit("-", 1)[1].isdigit()]
    partial: list[Path] = []
    for folder in sorted(folders, key=step, reverse=True):
        state = checkpoint_state(folder)
        if state is not None:
            return folder, state, partial
        partial.append(folder)
    return None, None, partial


FRESH, RESUME, FINISHED = "fresh", "resume", "finished"


@dataclass(frozen=True)
class OutputPlan:
    """What a stage does with its output directory, decided by :func:`plan_output_dir` before anything is
    loaded or written, and carried out by :func:`open_output_dir` once the model and loss are built.

    ``action``: ``fresh`` (train from step 0), ``resume`` (continue from ``resume_from``) or ``finished``
    (the directory already holds this very run: nothing to do; ``summary`` is its run summary).
    ``at_end``: ``resume_from`` already holds the run's last step (a kill came before the final save).
    ``partial``: incomplete checkpoints, removed when the directory is opened. ``existed``: whether the
    directory was there, so a run that fails before its first checkpoint removes only what it created.
    """

    output_dir: Path
    config: dict[str, Any]
    action: str = FRESH
    resume_from: str | None = None
    at_end: bool = False
    partial: tuple[Path, ...] = ()
    existed: bool = True
    summary: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        return self.action == FINISHED


def _as_recorded(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` as it reads back from JSON (tuples become lists), so a recorded config compares equal."""
    return json.loads(json.dumps(config, default=str))


def _differences(previous: dict[str, Any], config: dict[str, Any], ignore: Sequence[str] = ()) -> list[str]:
    return sorted(k for k in (set(previous) | set(config)) - set(ignore) if previous.get(k) != config.get(k))


def plan_output_dir(output_dir: str | Path, config: dict[str, Any], *, resume: bool, overwrite: bool) -> OutputPlan:
    """Decide what to do with ``output_dir``; reads only (:func:`open_output_dir` writes).

    The rules, shared by ``jtcse simcse``, ``jtcse distill`` and ``jtcse train`` (``docs/runs.md``):

    * The directory holds a finished run with this very ``config``: nothing to do (``finished``),
      unless ``overwrite``.
    * ``resume`` and a complete trainer checkpoint in ``<output_dir>/checkpoints``: continue from the
      newest complete one (incomplete ones, cut off by a kill while being saved, are reported and
      skipped). The recorded config must match this one except for the training length
      (:data:`LENGTH_KEYS`), which may grow: a finished run whose checkpoints were kept trains further.
    * A finished run otherwise is refused unless ``overwrite``; with it, the old model and summary stay
      until the new model is saved (:func:`save_final_model`).
    * Otherwise training starts from step 0 (stale checkpoints are removed when the directory is opened).
    """
    output_dir = Path(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise JTCSEError(f"{output_dir} is a file; -o/--output names the folder the model is written to.")
    config = _as_recorded(config)
    finished = finished_summary(output_dir)
    if finished is not None and not overwrite and finished.get("config") == config:
        logger.warning(
            "%s already holds this finished run (%s steps, same settings); nothing to do. "
            "Pass --overwrite to train it again.", output_dir, finished.get("steps"),
        )  # fmt: skip
        return OutputPlan(output_dir, config, FINISHED, summary=finished)
    if resume and not overwrite:
        checkpoint, state, partial = newest_checkpoint(output_dir)
        if partial:
            logger.warning(
                "Skipping incomplete checkpoint(s) %s in %s (cut off while being saved); %s.",
                ", ".join(p.name for p in partial), checkpoints_dir(output_dir),
                f"resuming from {checkpoint.name}" if checkpoint else "starting from step 0",
            )  # fmt: skip
        if checkpoint is not None:
            return _resume_plan(output_dir, config, checkpoint, state, tuple(partial), finished)
    if finished is not None and not overwrite:
        changed = _differences(finished.get("config") or {}, config)
        if changed and not set(changed) - set(LENGTH_KEYS):
            why = "its checkpoints were deleted, so it cannot train further (keep them with --keep-checkpoints)"
        else:
            why = f"with other settings ({', '.join(changed)} differ)"
        raise JTCSEError(
            f"{output_dir} already holds a finished run, {why}. Choose another -o/--output, or pass --overwrite "
            "to replace it (the old model stays until the new one is saved)."
        )
    return OutputPlan(output_dir, config, FRESH, existed=output_dir.exists())


def _resume_plan(output_dir, config, checkpoint, state, partial, finished) -> OutputPlan:
    """The plan to continue from ``checkpoint`` (trainer ``state``), after checking the recorded settings."""
    config_path = checkpoints_dir(output_dir) / RUN_CONFIG_NAME
    previous = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else None
    length_changed = False
    if previous is not None:
        changed = _differences(previous, config, ignore=LENGTH_KEYS)
        if changed:
            raise JTCSEError(
                f"{output_dir} holds a run with other settings ({', '.join(changed)} differ). "
                f"Rerun with the same settings to resume, or pass {'--overwrite' if finished else '--no-resume'} "
                "to start over."
            )
        length_changed = any(previous.get(k) != config.get(k) for k in LENGTH_KEYS)
    step, max_steps = state["global_step"], config.get("max_steps", -1)
    if length_changed and isinstance(max_steps, int) and 0 < max_steps <= step:
        raise JTCSEError(
            f"{output_dir} holds a checkpoint at step {step}; --max-steps {max_steps} would train no further. "
            "Give a larger --max-steps, or pass --overwrite to start over."
        )
    if finished is not None:
        logger.warning(
            "Training the finished run in %s further from step %d. Its learning-rate schedule ended with that "
            "step: the first step after the resume runs at the rate it ended with (0 for the default linear "
            "decay), the next ones follow the schedule for the new length.", output_dir, step,
        )  # fmt: skip
    at_end = not length_changed and step >= state.get("max_steps", step + 1)
    return OutputPlan(output_dir, config, RESUME, resume_from=str(checkpoint), at_end=at_end, partial=partial)


def open_output_dir(plan: OutputPlan) -> None:
    """Carry out ``plan`` (not for ``finished``): the stage's first write, once its model and loss are built.

    Creates the directory, removes incomplete checkpoints (resuming) or every old checkpoint (fresh
    start) and records the config in ``checkpoints/jtcse_run_config.json``.
    """
    ckpt_dir = checkpoints_dir(plan.output_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    stale = plan.partial if plan.action == RESUME else ckpt_dir.glob("checkpoint-*")
    for folder in list(stale):
        shutil.rmtree(folder, ignore_errors=True)
    atomic_write_json(ckpt_dir / RUN_CONFIG_NAME, plan.config)


def discard_failed_start(plan: OutputPlan) -> None:
    """After a fresh run failed before its first complete checkpoint, remove what it created: the output
    is as it was (a run with a checkpoint is kept, to resume or inspect)."""
    if plan.action != FRESH or newest_checkpoint(plan.output_dir)[0] is not None:
        return
    shutil.rmtree(plan.output_dir if not plan.existed else checkpoints_dir(plan.output_dir), ignore_errors=True)


PRECISIONS = ("auto", "fp32", "fp16", "bf16")


def precision_flags(precision: str) -> dict[str, bool]:
    """Trainer ``fp16``/``bf16`` flags for ``precision`` (one of :data:`PRECISIONS`: checked by
    :class:`~jtcse.training.stage.TrainingSettings`).

    ``auto``: bf16 mixed precision on a CUDA GPU that supports it, else fp32. ``fp16`` needs a CUDA
    GPU; ``bf16`` runs on a GPU that supports it or on the CPU (autocast).
    """
    import torch

    cuda = torch.cuda.is_available()
    if precision == "auto":
        return {"fp16": False, "bf16": cuda and torch.cuda.is_bf16_supported()}
    if precision == "fp16" and not cuda:
        raise JTCSEError("precision fp16 needs a CUDA GPU and none is available; use bf16 or fp32.")
    if precision == "bf16" and cuda and not torch.cuda.is_bf16_supported():
        raise JTCSEError("this GPU does not support bf16; use fp16 or fp32.")
    return {"fp16": precision == "fp16", "bf16": precision == "bf16"}


def build_training_args(
    output_dir: str | Path,
    *,
    batch_size: int,
    learning_rate: float,
    epochs: float,
    max_steps: int,
    seed: int,
    has_dev: bool,
    eval_steps: int,
    save_steps: int | None = None,
    logging_steps: int = 50,
    warmup_ratio: float = 0.0,
    use_no_duplicates_sampler: bool = False,
    precision: str = "auto",
    gradient_checkpointing: bool = False,
    **overrides: Any,
):
    """``SentenceTransformerTrainingArguments`` for a jtcse stage (values checked by
    :class:`~jtcse.training.stage.TrainingSettings`).

    With a dev file: evaluate and save every ``eval_steps`` and keep the best checkpoint by dev
    Spearman (``load_best_model_at_end``; the trainer keeps that checkpoint and the last). Without: save
    every ``save_steps`` (default ``eval_steps``) so an interrupted run can resume, keeping the last. The trainer's NaN/inf log filter is off (it syncs with the host
    every step); :class:`~jtcse.training.nan_guard.NonFiniteLossGuard` reports a non-finite loss instead.
    ``precision`` (see :func:`precision_flags`) and ``gradient_checkpointing`` (recompute each
    encoder layer's activations in the backward pass: less memory, ~30% more compute) are for GPUs.
    ``overrides`` are further ``SentenceTransformerTrainingArguments`` fields, applied last; under a
    multi-process launch without CUDA, CPU DDP is switched on (:func:`distributed.training_arguments`).
    """
    import torch
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers

    save_every = eval_steps if has_dev or save_steps is None else save_steps
    kwargs: dict[str, Any] = dict(
        output_dir=str(checkpoints_dir(output_dir)),
        per_device_train_batch_size=batch_size,
        per_device_eval_batch_size=batch_size,
        learning_rate=learning_rate,
        num_train_epochs=epochs,
        max_steps=max_steps,
        seed=seed,
        data_seed=seed,
        warmup_steps=warmup_ratio,
        logging_steps=max(1, min(logging_steps, save_every)),
        logging_nan_inf_filter=False,
        save_strategy="steps",
        save_steps=save_every,
        save_total_limit=1,
        report_to="none",
        **precision_flags(precision),
        gradient_checkpointing=gradient_checkpointing,
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
    )
    if use_no_duplicates_sampler:
        kwargs["batch_sampler"] = BatchSamplers.NO_DUPLICATES
    if has_dev:
        kwargs.update(
            eval_strategy="steps",
            eval_steps=eval_steps,
            load_best_model_at_end=True,
            metric_for_best_model=DEV_METRIC,
            greater_is_better=True,
        )
    else:
        kwargs.update(eval_strategy="no")
    kwargs.update(overrides)
    kwargs.update(distributed.training_arguments(use_cpu=kwargs.get("use_cpu", False)))
    if kwargs["bf16"] and not torch.cuda.is_available():
        kwargs["use_cpu"] = True  # transformers runs bf16 autocast on the CPU only when told so
    return SentenceTransformerTrainingArguments(**kwargs)


def dev_evaluator(dev_file: str | Path | None, batch_size: int = 64):
    """An :class:`~jtcse.evaluation.sts.STSDevEvaluator` for ``dev_file`` (``None`` when no file)."""
    if dev_file is None:
        return None
    from jtcse.evaluation.sts import STSDevEvaluator

    return STSDevEvaluator(dev_file, name=DEV_EVALUATOR_NAME, batch_size=batch_size)


def nan_guard(loss, learning_rate: float, output_dir: str | Path):
    """A :class:`~jtcse.training.nan_guard.NonFiniteLossGuard` on ``loss`` whose error tells the user what to try."""
    from jtcse.training.nan_guard import NonFiniteLossGuard

    return NonFiniteLossGuard(
        loss,
        hint=f"Try a lower learning rate (now {learning_rate:g}); the last good checkpoint is kept in "
        f"{checkpoints_dir(output_dir)} for inspection.",
    )


EMBEDDED_CORPUS = "<embedded stdlib prose>"


def read_training_sentences(source: str | Path | Sequence[str] | None, what: str = "corpus") -> tuple[list[str], dict[str, Any]]:
    """Distinct sentences to train on, and their counts for the run summary's ``data``.

    ``source``: a one-sentence-a-line file (missing / empty / non-UTF-8 errors from
    :func:`jtcse.corpus.read_corpus`), a list of sentences (blank entries dropped), or ``None`` (the
    standard library's prose, :func:`jtcse.defaults.default_corpus_sentences`). Repeats are kept once.
    """
    from jtcse.corpus import read_corpus
    from jtcse.defaults import default_corpus_sentences

    if source is None:
        raw, label, skipped = default_corpus_sentences(), EMBEDDED_CORPUS, 0
    elif isinstance(source, (str, Path)):
        read = read_corpus(source)
        raw, label, skipped = read.sentences, str(Path(read.path).resolve()), read.skipped_empty
    else:
        raw = [s.strip() for s in source if s and s.strip()]
        label, skipped = f"<{len(raw)} sentences given in memory>", 0
    if not raw:
        raise JTCSEError(f"the {what} has no sentences.")
    sentences = list(dict.fromkeys(raw))
    counts = {
        "source": label,
        "lines": len(raw),
        "skipped_blank_lines": skipped,
        "duplicates_dropped": len(raw) - len(sentences),
        "sentences": len(sentences),
    }
    return sentences, counts


def train_guarded(
    model,
    args,
    train_dataset,
    loss,
    evaluator,
    *,
    learning_rate: float,
    output_dir: str | Path,
    resume_from: str | None,
    at_end: bool = False,
    callbacks: Sequence[Any] = (),
):
    """Train with ``SentenceTransformerTrainer`` (checkpoints written by rank 0 alone,
    :func:`distributed.trainer_class`) under a :func:`nan_guard` on ``loss``, continuing from
    ``resume_from`` when given; returns ``(trainer, progress)`` (a :class:`~jtcse.training.progress.RunProgress`:
    loss and time over the whole run). ``at_end``: ``resume_from`` already holds the last step, so the
    model and trainer state are taken from it without training (:func:`finish_from_checkpoint`).
    The guard and the progress hook are removed from ``loss`` however training ends."""
    from jtcse.training.progress import RunProgress

    guard = nan_guard(loss, learning_rate, output_dir)
    progress = RunProgress.from_checkpoint(loss, resume_from)
    trainer = distributed.trainer_class()(
        model=model,
        args=args,
        train_dataset=train_dataset,
        loss=loss,
        evaluator=evaluator,
        callbacks=[guard, progress, *callbacks],
    )
    try:
        if at_end and resume_from is not None:
            finish_from_checkpoint(trainer, resume_from)
        else:
            trainer.train(resume_from_checkpoint=resume_from)
    finally:
        guard.remove()
        progress.remove()
    return trainer, progress


def finish_from_checkpoint(trainer, checkpoint: str | Path) -> None:
    """Give ``trainer`` the state and the final model of a run whose last step ``checkpoint`` holds.

    ``Trainer.train`` resumed from such a checkpoint would run one step more; this loads what the end
    of training would have left instead: the best checkpoint by dev score when the trainer keeps it
    (``load_best_model_at_end``), else the checkpoint's own weights.
    """
    from transformers import TrainerState

    trainer.state = TrainerState.load_from_json(str(Path(checkpoint) / TRAINER_STATE_FILE))
    best = trainer.state.best_model_checkpoint
    use_best = trainer.args.load_best_model_at_end and best is not None and Path(best).is_dir()
    trainer._load_from_checkpoint(best if use_best else str(checkpoint))  # sentence-transformers' own loader


def save_final_model(model, output_dir: str | Path, evaluator, *, max_seq_length: int) -> float | None:
    """Score ``model`` on the dev evaluator (``None`` without one) and save it to ``output_dir`` with its own
    ``max_seq_length`` restored and training-only heads (:class:`~jtcse.losses.NITPHead`) removed.

    A finished run's summary there is removed first: from then until the new summary is written, the
    directory is an unfinished run, which a rerun completes from its last checkpoint. Returns the dev score.
    """
    from jtcse.losses.nitp import remove_nitp_head

    final_dev = evaluator(model)[evaluator.primary_metric] if evaluator is not None else None
    model.max_seq_length = max_seq_length
    remove_nitp_head(model)
    (Path(output_dir) / RUN_SUMMARY_NAME).unlink(missing_ok=True)
    model.save(str(output_dir))
    crash_point("final-save")
    return final_dev


def loss_history(log_history: list[dict[str, Any]]) -> dict[str, Any]:
    """First/last logged training loss and the dev scores by step, from ``trainer.state.log_history``."""
    losses = [entry["loss"] for entry in log_history if "loss" in entry]
    devs = dict((entry["step"], entry[DEV_METRIC]) for entry in log_history if DEV_METRIC in entry)
    best_step = max(devs, key=devs.__getitem__) if devs else None
    return {
        "first_logged_loss": losses[0] if losses else None,
        "last_logged_loss": losses[-1] if losses else None,
        "dev_spearman_by_step": devs,
        "best_dev_spearman": devs[best_step] if devs else None,
        "best_step": best_step,
    }


def write_run_summary(output_dir: str | Path, summary: dict[str, Any]) -> Path:
    """Write ``summary`` as ``<output_dir>/run_summary.json`` (the mark of a finished run), atomically."""
    return atomic_write_json(Path(output_dir) / RUN_SUMMARY_NAME, summary)


def remove_checkpoints(output_dir: str | Path) -> None:
    """Drop trainer checkpoints once the final model is saved (they hold optimizer state, 3× the model)."""
    shutil.rmtree(checkpoints_dir(output_dir), ignore_errors=True)
