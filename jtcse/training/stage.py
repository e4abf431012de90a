"""One stage runner: every trainer (twin, SimCSE warm-up, distillation) describes its run as a
:class:`Stage` and :func:`run_stage` trains it the same way.

One settings rule (:class:`TrainingSettings`), one set of trainer arguments
(:func:`~jtcse.training.common.build_training_args`), one checkpoint policy (best-by-dev and last
while training; deleted after the final save unless ``keep_checkpoints``), one summary schema (see
``docs/runs.md``) and one curve plot (:mod:`jtcse.training.curves`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError
from jtcse.training import distributed
from jtcse.training.common import (
    DEV_METRIC,
    PRECISIONS,
    build_training_args,
    checkpoints_dir,
    loss_history,
    prepare_output_dir,
    save_final_model,
    train_guarded,
    write_run_summary,
)
from jtcse.model_card import write_run_card
from jtcse.training.curves import CURVES_FILE, logged_terms, plot_training_curves

MIN_BATCH_SIZE = 2
"""In-batch negatives need a second row; the twin's cross-tower terms pair rows across the batch."""
MIN_SEQ_LENGTH = 4
"""Room for the special tokens and at least two word pieces."""


_RECORDED = ("batch_size", "max_seq_length", "learning_rate", "epochs", "max_steps", "seed", "eval_steps", "warmup_ratio")


@dataclass(frozen=True)
class TrainingSettings:
    """How long and how a stage trains; checked once, the same way for every stage, on construction."""

    batch_size: int = 64
    max_seq_length: int = 64
    learning_rate: float = 5e-5
    epochs: float = 1
    max_steps: int = -1
    seed: int = 42
    eval_steps: int = 100
    save_steps: int | None = None
    logging_steps: int | None = 50
    warmup_ratio: float = 0.0
    precision: str = "auto"
    gradient_checkpointing: bool = False
    keep_checkpoints: bool = False

    def __post_init__(self) -> None:
        def whole(name: str, minimum: int) -> None:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise JTCSEError(f"{name} must be at least {minimum} (got {value!r}).")

        whole("batch_size", MIN_BATCH_SIZE)
        whole("max_seq_length", MIN_SEQ_LENGTH)
        whole("eval_steps", 1)
        for name in ("save_steps", "logging_steps"):
            if getattr(self, name) is not None:
                whole(name, 1)
        lr = self.learning_rate
        if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
            raise JTCSEError(f"learning_rate must be a positive number (got {lr!r}).")
        steps = self.max_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or not (steps == -1 or steps >= 1):
            raise JTCSEError(f"max_steps must be a positive step count or -1 (train by epochs), not {steps!r}.")
        if self.max_steps == -1 and not self.epochs > 0:
            raise JTCSEError(f"epochs must be positive (got {self.epochs!r}).")
        if not 0 <= self.warmup_ratio < 1:
            raise JTCSEError(f"warmup_ratio must be in [0, 1) (got {self.warmup_ratio!r}).")
        if self.precision not in PRECISIONS:
            raise JTCSEError(f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}.")

    @classmethod
    def from_arguments(cls, arguments: dict[str, Any]) -> TrainingSettings:
        """The settings among a trainer's arguments (call with ``locals()`` first thing in the trainer)."""
        return cls(**{f.name: arguments[f.name] for f in fields(cls) if f.name in arguments})

    def recorded(self) -> dict[str, Any]:
        """The settings a resumed run must share with the run it continues (lengths may grow)."""
        return {key: getattr(self, key) for key in _RECORDED}


def start_stage(
    name: str,
    output_dir: str | Path,
    settings: TrainingSettings,
    config: dict[str, Any],
    *,
    resume: bool,
    overwrite: bool,
) -> tuple[dict[str, Any], str | None]:
    """Record the run's config (``stage``, ``config``, the settings, the number of processes) and apply the
    output-directory rules (:func:`~jtcse.training.common.prepare_output_dir`, on rank 0 alone under a
    multi-process launch); returns ``(config, checkpoint to resume from)``."""
    config = {"stage": name, **config, **settings.recorded(), "world_size": distributed.world_size()}
    resume_from = distributed.run_on_main(
        lambda: prepare_output_dir(output_dir, config, resume=resume, overwrite=overwrite)
    )
    return config, resume_from


@dataclass
class Stage:
    """What one training stage trains, on what, and how; run by :func:`run_stage`.

    ``model_info`` / ``data`` describe the model(s) and the data counts for the summary; ``config`` is the
    recorded config (from :func:`start_stage`). ``restore_max_seq_length``: the model's own length,
    set back before saving (``None`` keeps the training length). ``trainer_overrides`` are further
    ``SentenceTransformerTrainingArguments`` fields.
    """

    name: str
    output_dir: Path
    model: Any
    loss: Any
    train_dataset: Any
    settings: TrainingSettings
    config: dict[str, Any]
    evaluator: Any = None
    resume_from: str | None = None
    model_info: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    restore_max_seq_length: int | None = None
    use_no_duplicates_sampler: bool = False
    trainer_overrides: dict[str, Any] = field(default_factory=dict)
    callbacks: Sequence[Any] = ()
    plot: bool = True


def _logging_steps(stage: Stage) -> int:
    """The given ``logging_steps``, or about ten logs a run (at most every 50 steps, at least every eval)."""
    s = stage.settings
    if s.logging_steps is not None:
        return s.logging_steps
    per_epoch = max(1, len(stage.train_dataset) // s.batch_size)
    total = s.max_steps if s.max_steps > 0 else math.ceil(per_epoch * s.epochs)
    return max(1, min(50, s.eval_steps, total // 10 or 1))


def run_stage(stage: Stage) -> dict[str, Any]:
    """Train ``stage``, save its model in ``stage.output_dir`` and write ``run_summary.json``; return the summary."""
    s = stage.settings
    model = stage.model
    model.max_seq_length = s.max_seq_length
    args = build_training_args(
        stage.output_dir,
        batch_size=s.batch_size,
        learning_rate=s.learning_rate,
        epochs=s.epochs,
        max_steps=s.max_steps,
        seed=s.seed,
        has_dev=stage.evaluator is not None,
        eval_steps=s.eval_steps,
        save_steps=s.save_steps,
        logging_steps=_logging_steps(stage),
        warmup_ratio=s.warmup_ratio,
        use_no_duplicates_sampler=stage.use_no_duplicates_sampler,
        precision=s.precision,
        gradient_checkpointing=s.gradient_checkpointing,
        **stage.trainer_overrides,
    )
    started = time.perf_counter()
    trainer, train_output = train_guarded(
        model, args, stage.train_dataset, stage.loss, stage.evaluator,
        learning_rate=s.learning_rate, output_dir=stage.output_dir, resume_from=stage.resume_from,
        callbacks=stage.callbacks,
    )
    seconds = round(time.perf_counter() - started, 2)
    # rank 0 alone scores and saves the final model and writes the summary; every rank returns it
    return distributed.run_on_main(lambda: _save_and_summarise(stage, trainer, train_output, seconds))


def _save_and_summarise(stage: Stage, trainer, train_output, seconds: float) -> dict[str, Any]:
    s = stage.settings
    model = stage.model
    restore = stage.restore_max_seq_length or s.max_seq_length
    final_dev = save_final_model(
        model, stage.output_dir, stage.evaluator, max_seq_length=restore, keep_checkpoints=s.keep_checkpoints
    )

    history = trainer.state.log_history
    last_logged = next((entry for entry in reversed(history) if "loss" in entry), {})
    curves = Path(stage.output_dir) / CURVES_FILE
    summary = {
        "stage": stage.name,
        "output_dir": str(Path(stage.output_dir).resolve()),
        "saved_model": "best checkpoint by dev Spearman" if stage.evaluator is not None else "last step",
        "model": stage.model_info,
        "data": stage.data,
        "loss": {"name": type(stage.loss).__name__, **_config_of(stage.loss)},
        "settings": {
            **asdict(s),
            "world_size": distributed.world_size(),
            "global_batch_size": distributed.world_size() * s.batch_size,
        },
        "resumed_from": stage.resume_from,
        "steps": trainer.state.global_step,
        "seconds": seconds,
        "train_loss": train_output.training_loss,
        **loss_history(history),
        "loss_terms": logged_terms(last_logged),
        "dev_file": stage.evaluator.path if stage.evaluator is not None else None,
        "final_dev_spearman": final_dev,
        "checkpoints": str(checkpoints_dir(stage.output_dir)) if s.keep_checkpoints else None,
        "training_curves": plot_training_curves(history, DEV_METRIC, curves) if stage.plot else None,
        "versions": versions(),
        "config": stage.config,
    }
    write_run_summary(stage.output_dir, summary)
    write_run_card(stage.output_dir, model)
    return summary


def _config_of(loss) -> dict[str, Any]:
    return loss.get_config_dict() if hasattr(loss, "get_config_dict") else {}


def versions() -> dict[str, str]:
    """Versions of jtcse and the libraries a run depends on, for its summary."""
    import sentence_transformers
    import torch
    import transformers

    import jtcse

    return {
        "jtcse": jtcse.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }
