"""The ``SentenceTransformerTrainingArguments`` of a training stage: precision, checkpoint and evaluation cadence.

One set of arguments for every stage (:func:`build_training_args`): checkpoints in
``<output_dir>/checkpoints`` (:mod:`jtcse.training.run_dir`), logs reported where ``report_to`` says under the
run's name (:func:`run_name`), the dev file scored when there is one, the best
checkpoint by dev Spearman (:data:`DEV_METRIC`) kept when the stage's ``checkpoint`` is ``best-dev``, mixed
precision by name (:func:`precision_flags`), and the settings that are trainer arguments as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jtcse.devices import check_precision, resolve_device
from jtcse.errors import JTCSEError
from jtcse.training import distributed
from jtcse.training.run_dir import checkpoints_dir
from jtcse.training.settings import REPORT_PACKAGES, TrainingSettings

DEV_EVALUATOR_NAME = "sts-dev"
DEV_METRIC = f"eval_{DEV_EVALUATOR_NAME}_spearman_cosine"
"""The trainer's name for the dev evaluator's score: the metric that picks the best checkpoint."""


def precision_flags(precision: str, device: str | None = None) -> dict[str, bool]:
    """Trainer ``fp16``/``bf16`` flags for ``precision`` (one of :data:`~jtcse.devices.PRECISIONS`) on the
    device the trainer runs on (``None``: the best one here), by the one rule of
    :func:`jtcse.devices.check_precision`: ``auto`` is bf16 mixed precision on a CUDA GPU that supports it
    and on a CPU with native bf16, else fp32; ``fp16`` needs a CUDA GPU; ``bf16`` runs on a GPU that supports it or on the CPU (autocast).
    """
    resolved = check_precision(precision, device)
    return {"fp16": resolved == "fp16", "bf16": resolved == "bf16"}


def run_name(output_dir: str | Path) -> str:
    """The run's name where it reports (``report_to``): its folder and the folder above, ``runs/jtcse`` or, for a
    pipeline stage, ``OUT/warmup_a``."""
    path = Path(output_dir).absolute()
    return f"{path.parent.name}/{path.name}"


def check_report_to(report_to: str) -> None:
    """A ``report_to`` whose package is not installed is a one-line error naming what to install."""
    import importlib.util

    package = REPORT_PACKAGES.get(report_to)
    if package is not None and importlib.util.find_spec(package) is None:
        extra = " (or jtcse[tensorboard])" if report_to == "tensorboard" else ""
        raise JTCSEError(f"--report-to {report_to} needs the {package} package: pip install {package}{extra}.")


def build_training_args(
    output_dir: str | Path,
    settings: TrainingSettings,
    *,
    has_dev: bool,
    logging_steps: int,
    use_no_duplicates_sampler: bool = False,
    device: str | None = None,
    **overrides: Any,
):
    """``SentenceTransformerTrainingArguments`` for a jtcse stage trained with ``settings``.

    The settings that are trainer arguments as they are come from their declarations
    (:meth:`~jtcse.training.settings.TrainingSettings.trainer_arguments`); the rest are rules. With a dev file
    (``has_dev``): evaluate and save every ``eval_steps``; with ``checkpoint`` best-dev (which needs one,
    :meth:`~jtcse.training.settings.TrainingSettings.check_dev_file`) end on the best checkpoint by dev Spearman
    (the trainer keeps at most two: that checkpoint and the last), else on the last step. Without: save every
    ``save_steps`` (default ``eval_steps``) so an interrupted run can resume, keeping the last. The trainer's
    NaN/inf log filter is off (it syncs with the host every step);
    :class:`~jtcse.training.nan_guard.NonFiniteLossGuard` reports a non-finite loss instead. ``precision`` (see
    :func:`precision_flags`) and ``gradient_checkpointing`` are for GPUs. ``logging_steps``: as the stage
    resolved it (:func:`jtcse.training.trainer_run.run_trainer`). ``device``: ``cpu`` trains on the CPU where a GPU is
    visible too; ``None`` (or another device) leaves the choice to the trainer (the first visible GPU, else the
    CPU); see :func:`jtcse.training.trainer_run.training_device`. ``overrides`` are further
    ``SentenceTransformerTrainingArguments`` fields, applied last; under a multi-process launch without CUDA, CPU
    DDP is switched on (:func:`distributed.training_arguments`).
    """
    import torch
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers

    check_report_to(settings.report_to)
    device = resolve_device("cpu" if overrides.get("use_cpu") else device)
    best = settings.kept_by_dev
    save_every = settings.eval_steps if has_dev or settings.save_steps is None else settings.save_steps
    kwargs: dict[str, Any] = dict(
        output_dir=str(checkpoints_dir(output_dir)),
        **settings.trainer_arguments(),
        logging_steps=max(1, min(logging_steps, save_every)),
        logging_nan_inf_filter=False,
        save_strategy="steps",
        save_steps=save_every,
        # with a dev file two, the best and the last: with a limit of 1 transformers deletes every checkpoint but
        # the best once training ends, and a finished run could not be trained further from its last step
        save_total_limit=2 if best else 1,
        run_name=run_name(output_dir),
        **precision_flags(settings.precision, device),
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
    )
    if use_no_duplicates_sampler:
        kwargs["batch_sampler"] = BatchSamplers.NO_DUPLICATES
    kwargs["eval_strategy"] = "steps" if has_dev else "no"
    if has_dev:
        kwargs["eval_steps"] = settings.eval_steps
    if has_dev and best:
        kwargs.update(load_best_model_at_end=True, metric_for_best_model=DEV_METRIC, greater_is_better=True)
    if device == "cpu" and (kwargs["bf16"] or torch.cuda.is_available()):
        kwargs["use_cpu"] = (
            True  # transformers runs bf16 autocast on the CPU, or ignores a visible GPU, only when told so
        )
    kwargs[checkpointing_argument()] = kwargs.pop("gradient_checkpointing")
    kwargs.update(overrides)
    kwargs.update(distributed.training_arguments(use_cpu=kwargs.get("use_cpu", False)))
    return SentenceTransformerTrainingArguments(**kwargs)


def checkpointing_argument() -> str:
    """The installed transformers' name for the training argument that recomputes activations in the backward pass
    (the ``gradient_checkpointing`` setting): ``activation_checkpointing`` where it exists (its old name then warns
    that it is deprecated), else ``gradient_checkpointing``."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    fields = SentenceTransformerTrainingArguments.__dataclass_fields__
    return "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
