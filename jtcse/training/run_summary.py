"""The run summary (``<output_dir>/run_summary.json``): what ran, on what, and how it went.

The stage runner (:func:`jtcse.training.stage.run_stage`) builds it (:func:`run_summary`) and writes it last
(:func:`write_run_summary`): its presence marks a finished run. The keys are listed in ``docs/runs.md``;
``schema_version`` (:data:`SCHEMA_VERSION`) changes whenever one is renamed, moved or removed.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from jtcse.locking import atomic_write_json
from jtcse.processes import world_size
from jtcse.training.arguments import DEV_METRIC
from jtcse.training.curves import logged_terms
from jtcse.training.run_dir import RUN_SUMMARY_NAME, checkpoints_dir

SCHEMA_VERSION = 1
"""The summary layout of ``docs/runs.md`` (summaries written before the version was recorded have the same one)."""


def run_summary(
    stage, trainer, progress, *, final_dev: float | None, training_length: int, training_curves: str | None
) -> dict[str, Any]:
    """The run summary of ``stage`` (a :class:`~jtcse.training.stage.Stage`) trained by ``trainer``; loss and
    time (``progress``, a :class:`~jtcse.training.progress.RunProgress`) cover the whole run, resumes included.
    ``training_length``: the length the model trained with; ``training_curves``: the plot's path, if any."""
    s = stage.settings
    history = trainer.state.log_history
    last_logged = next((entry for entry in reversed(history) if "loss" in entry), {})
    return {
        "schema_version": SCHEMA_VERSION,
        "stage": stage.name,
        "output_dir": str(Path(stage.output_dir).resolve()),
        "saved_model": "best checkpoint by dev Spearman" if stage.evaluator is not None else "last step",
        "model": stage.model_info,
        "data": stage.data,
        "loss": {"name": type(stage.loss).__name__, **_config_of(stage.loss)},
        "settings": {
            **asdict(s),
            "max_seq_length": training_length,
            "world_size": world_size(),
            "global_batch_size": world_size() * s.batch_size,
        },
        "resumed_from": stage.resume_from,
        "steps": trainer.state.global_step,
        "seconds": round(progress.seconds, 2),
        "train_loss": progress.train_loss,
        **loss_history(history),
        "loss_terms": logged_terms(last_logged),
        "dev_file": stage.evaluator.path if stage.evaluator is not None else None,
        "final_dev_spearman": final_dev,
        "checkpoints": str(checkpoints_dir(stage.output_dir)) if s.keep_checkpoints else None,
        "training_curves": training_curves,
        "versions": versions(),
        "config": stage.config,
    }


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
