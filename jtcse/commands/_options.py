"""Every option that more than one command takes, declared once with one help text.

Each function returns a fresh ``typer.Option`` (a command owns its parameter objects); a default
that differs between commands is an argument, the meaning and the help never differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from jtcse.errors import JTCSEError


# ---------------------------------------------------------------- models and devices
def model_argument(required: bool = False):
    """The model a command reads (encode, index, eval, diagnose): required, or the embedded MiniLM when left out."""
    return typer.Argument(
        ... if required else None,
        help="sentence-transformers checkpoint (a jtcse twin, tower or ensemble works): a local path or a Hub name."
        + ("" if required else " Default: the embedded MiniLM."),
    )


def tower_option(which: str):
    return typer.Option(
        None, f"--tower-{which}",
        help="Tower to start from: a sentence-transformers or transformers model dir, or a hub name. Default: the embedded MiniLM.",
    )  # fmt: skip


def device_option():
    return typer.Option(None, "--device", help="torch device: cpu, cuda, cuda:1, mps. Default: the best available.")


def pooling_option():
    return typer.Option(None, "--pooling", help="Override the checkpoint's pooling: cls or mean.")


def student_pooling_option():
    return typer.Option(
        None, "--student-pooling",
        help="Replace the distillation student's pooling by cls or mean. Default: keep its own (e.g. MiniLM's mean).",
    )  # fmt: skip


def objective_option():
    return typer.Option(
        "similarity", "--objective",
        help="Distillation objective: similarity (match in-batch cosine matrices; any widths), cosine, "
        "mse-normalized or mse (vectors; a training-only projection when widths differ).",
    )  # fmt: skip


def ensemble_weights_option(flag: str = "--weights"):
    return typer.Option(
        None, flag, help="One positive weight per ensemble member, comma-separated (e.g. 1,0.5). Default: all 1."
    )


def parse_weights(text: str | None, flag: str = "--weights") -> list[float] | None:
    """``"1,0.5"`` -> ``[1.0, 0.5]``; None stays None."""
    if text is None:
        return None
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise JTCSEError(f"{flag} must be comma-separated numbers such as 1,0.5; got {text!r}.") from None


def batch_size_option(default: int = 64):
    return typer.Option(default, "--batch-size", help="Sentences per batch (training: in-batch negatives).")


def max_seq_length_option(default: int):
    return typer.Option(default, "--max-seq-length", help="Tokens per sentence during training; longer ones are truncated.")


# ---------------------------------------------------------------- data
def corpus_option():
    return typer.Option(None, "--corpus", help="UTF-8 text file, one sentence per line. Default: the embedded stdlib prose.")


def input_file_option():
    return typer.Option(..., "--input", "-i", help="Text file, one sentence per line; blank lines are skipped.")


def chunk_size_option():
    return typer.Option(8192, "--chunk-size", help="Lines read, encoded and written at a time (bounds memory).")


def dev_file_option():
    return typer.Option(
        None, "--dev-file", help="STS-B-format dev file; the checkpoint with the best dev Spearman is kept."
    )


def progress_option():
    return typer.Option(True, "--progress/--no-progress", help="Show a progress bar.")


# ---------------------------------------------------------------- training schedule
def learning_rate_option(default: float):
    return typer.Option(default, "--learning-rate", help="AdamW learning rate.")


def alias_option(old: str, new: str):
    """A hidden old name of option ``new``; the command resolves the two with :func:`pick_alias`."""
    return typer.Option(None, old, hidden=True, help=f"Old name of {new}.")


def pick_alias(value: Any, alias: Any, *, default: Any = None, what: str, new: str, old: str) -> Any:
    """The value of option ``new``, or of its old name ``old`` (``alias``); both at once is an error."""
    if alias is None:
        return value
    if value != default:
        raise JTCSEError(f"give the {what} once, with {new} ({old} is its old name).")
    return alias


def lr_alias_option():
    return alias_option("--lr", "--learning-rate")


def pick_learning_rate(learning_rate: float, lr_alias: float | None, default: float) -> float:
    """``--learning-rate``, or its old name ``--lr``; both at once is an error."""
    return pick_alias(learning_rate, lr_alias, default=default, what="learning rate", new="--learning-rate", old="--lr")


def epochs_option():
    return typer.Option(1.0, "--epochs", help="Passes over the data (ignored when --max-steps is set).")


def max_steps_option():
    return typer.Option(-1, "--max-steps", help="Stop after this many steps (-1: run the epochs).")


def eval_steps_option(default: int):
    return typer.Option(default, "--eval-steps", help="Evaluate on --dev-file (and checkpoint) every N steps.")


def save_steps_option():
    return typer.Option(None, "--save-steps", help="Checkpoint every N steps without a dev file.")


def logging_steps_option(default: int | None = 50):
    return typer.Option(
        default, "--logging-steps", help="Log the training loss every N steps (unset: about ten times per run)."
    )


def seed_option():
    return typer.Option(42, "--seed", help="Random seed (data order, dropout).")


def temperature_option():
    return typer.Option(0.05, "--temperature", help="InfoNCE temperature τ (scale = 1/τ).")


def regularizer_option():
    from jtcse.losses.registry import REGULARIZER_HELP

    return typer.Option([], "--regularizer", "-r", metavar="SPEC", help=REGULARIZER_HELP)


def precision_option(default: str = "auto"):
    return typer.Option(
        default,
        "--precision",
        help="auto (bf16 mixed precision on a GPU that supports it, else fp32), fp32, fp16 (CUDA only) or bf16.",
    )


def gradient_checkpointing_option():
    return typer.Option(
        False,
        "--gradient-checkpointing",
        help="Recompute layer activations in the backward pass: less GPU memory for ~30% more compute.",
    )


def training_settings(arguments: dict[str, Any], **given: Any):
    """The :class:`~jtcse.training.stage.TrainingSettings` among a training command's arguments (call with
    ``locals()``), with ``given`` on top (e.g. a value picked from an old option name)."""
    from jtcse.training.stage import TrainingSettings

    return TrainingSettings.from_arguments({**arguments, **given})


# ---------------------------------------------------------------- past one device (docs/distributed.md)
def gather_across_devices_option():
    return typer.Option(
        False,
        "--gather-across-devices",
        help="Under torchrun / accelerate launch: score every rank's sentences against the candidates of all "
        "ranks, so the in-batch negatives come from the global batch (world size × --batch-size).",
    )


def mini_batch_size_option():
    return typer.Option(
        None,
        "--mini-batch-size",
        help="GradCache: run the contrastive loss over the whole --batch-size but embed only N sentences at a "
        "time (memory of a batch of N, one extra forward pass; same result). Not with --regularizer.",
    )


# ---------------------------------------------------------------- output
def output_dir_option(what: str, default: Path | None = None):
    """``--output-dir``/``-o``: the folder a command writes ``what`` to (required unless ``default``)."""
    return typer.Option(... if default is None else default, "--output-dir", "-o", help=f"Folder for {what}.")


def resume_option():
    return typer.Option(
        True, "--resume/--no-resume",
        help="Resume from the last checkpoint in --output-dir; the other settings must match (see docs/runs.md).",
    )  # fmt: skip


def overwrite_option():
    return typer.Option(False, "--overwrite", help="Replace a finished output instead of refusing or resuming.")


def keep_checkpoints_option():
    return typer.Option(False, "--keep-checkpoints", help="Keep the trainer checkpoints (best and last) after the final save, e.g. to train a finished run further; by default they are deleted.")


def echo_summary(summary: dict[str, Any], output_dir: Path, what: str) -> None:
    """Print the run summary (without the recorded config) and where the model and summary are (rank 0 only)."""
    from jtcse.processes import is_main_process

    if not is_main_process():
        return
    typer.echo(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=2, default=str))
    typer.echo(f"{what} saved to {output_dir} (summary: {output_dir / 'run_summary.json'})")
