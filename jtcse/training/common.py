"""The building blocks of the stage runner (:mod:`jtcse.training.stage`): output-directory / resume rules,
training arguments, reading the training sentences, the STS dev evaluator wiring, training under the
non-finite-loss guard (:func:`nan_guard`, :func:`train_guarded`) and the ``run_summary.json`` writer.

Trainer checkpoints live in ``<output_dir>/checkpoints`` so that the output directory itself holds only
the final model and its summary (rules in ``docs/runs.md``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError
from jtcse.training import distributed

CHECKPOINTS_SUBDIR = "checkpoints"
RUN_SUMMARY_NAME = "run_summary.json"
RUN_CONFIG_NAME = "jtcse_run_config.json"
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


def prepare_output_dir(output_dir: str | Path, config: dict[str, Any], *, resume: bool, overwrite: bool) -> str | None:
    """Check ``output_dir`` before training; return the trainer checkpoint to resume from, if any.

    The rules, shared by ``jtcse simcse``, ``jtcse distill`` and ``jtcse train``:

    * ``resume`` and a trainer checkpoint in ``<output_dir>/checkpoints``: continue from the last one,
      whether the run was interrupted or finished (a finished run continues when the new run is longer,
      e.g. a larger ``max_steps``). The recorded ``config`` must match this one except for the training
      length (:data:`LENGTH_KEYS`); other changes are an error, because resuming would mix two set-ups.
    * A finished run (model and run summary saved) with nothing to resume from, or with ``resume`` off,
      is refused unless ``overwrite``, so a finished model is never replaced by accident.
    * Otherwise training starts afresh (stale checkpoints are removed) and ``config`` is recorded.
    """
    from transformers.trainer_utils import get_last_checkpoint

    output_dir = Path(output_dir)
    ckpt_dir = checkpoints_dir(output_dir)
    if overwrite:
        for name in (RUN_SUMMARY_NAME, "modules.json"):
            (output_dir / name).unlink(missing_ok=True)
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    last = get_last_checkpoint(str(ckpt_dir)) if resume and ckpt_dir.is_dir() else None
    if is_finished(output_dir) and last is None:
        raise JTCSEError(
            f"{output_dir} already holds a finished run ({RUN_SUMMARY_NAME} is there). "
            "Choose another --output-dir or pass --overwrite."
        )
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    config_path = ckpt_dir / RUN_CONFIG_NAME
    if last is None:
        for stale in ckpt_dir.glob("checkpoint-*"):
            shutil.rmtree(stale, ignore_errors=True)
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")
        return None
    if config_path.is_file():
        previous = json.loads(config_path.read_text(encoding="utf-8"))
        changed = sorted(
            k for k in (set(previous) | set(config)) - set(LENGTH_KEYS) if previous.get(k) != config.get(k)
        )
        if changed:
            raise JTCSEError(
                f"{output_dir} holds a run with other settings ({', '.join(changed)} differ). "
                "Rerun with the same settings to resume, or pass --no-resume to start over."
            )
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")
    return last


PRECISIONS = ("auto", "fp32", "fp16", "bf16")


def precision_flags(precision: str) -> dict[str, bool]:
    """Trainer ``fp16``/``bf16`` flags for ``precision``.

    ``auto``: bf16 mixed precision on a CUDA GPU that supports it, else fp32. ``fp16`` needs a CUDA
    GPU; ``bf16`` runs on a GPU that supports it or on the CPU (autocast).
    """
    import torch

    if precision not in PRECISIONS:
        raise JTCSEError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}.")
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
    callbacks: Sequence[Any] = (),
):
    """Train with ``SentenceTransformerTrainer`` (checkpoints written by rank 0 alone,
    :func:`distributed.trainer_class`) under a :func:`nan_guard` on ``loss``; returns
    ``(trainer, train_output)``. The guard is removed from ``loss`` however training ends."""
    guard = nan_guard(loss, learning_rate, output_dir)
    trainer = distributed.trainer_class()(
        model=model,
        args=args,
        train_dataset=train_dataset,
        loss=loss,
        evaluator=evaluator,
        callbacks=[guard, *callbacks],
    )
    try:
        output = trainer.train(resume_from_checkpoint=resume_from)
    finally:
        guard.remove()
    return trainer, output


def save_final_model(model, output_dir: str | Path, evaluator, *, max_seq_length: int, keep_checkpoints: bool):
    """Score ``model`` on the dev evaluator (``None`` without one), save it to ``output_dir`` with its own
    ``max_seq_length`` restored, and drop the trainer checkpoints unless ``keep_checkpoints``."""
    final_dev = evaluator(model)[evaluator.primary_metric] if evaluator is not None else None
    model.max_seq_length = max_seq_length
    model.save(str(output_dir))
    if not keep_checkpoints:
        remove_checkpoints(output_dir)
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
    """Write ``summary`` as ``<output_dir>/run_summary.json`` (the mark of a finished run)."""
    path = Path(output_dir) / RUN_SUMMARY_NAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    tmp.replace(path)
    return path


def remove_checkpoints(output_dir: str | Path) -> None:
    """Drop trainer checkpoints once the final model is saved (they hold optimizer state, 3× the model)."""
    shutil.rmtree(checkpoints_dir(output_dir), ignore_errors=True)
