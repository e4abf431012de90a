"""Options and output shared by the single-encoder training commands (``jtcse simcse``, ``jtcse distill``).

Each function returns a fresh ``typer.Option`` so every command owns its parameter objects; the
defaults that differ between commands are arguments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer


def dev_file_option():
    return typer.Option(None, "--dev-file", help="STS-B-format dev file for checkpoint choice.")


def epochs_option():
    return typer.Option(1.0, help="Passes over the data.")


def max_steps_option():
    return typer.Option(-1, help="Stop after this many steps (-1: run the epochs).")


def eval_steps_option(default: int):
    return typer.Option(default, help="Evaluate on --dev-file (and checkpoint) every N steps.")


def save_steps_option():
    return typer.Option(None, help="Checkpoint every N steps without a dev file.")


def logging_steps_option():
    return typer.Option(50, help="Log the training loss every N steps.")


def resume_option():
    return typer.Option(
        True, "--resume/--no-resume", help="Resume from the last checkpoint in --output-dir (see docs/runs.md)."
    )


def overwrite_option(note: str = ""):
    return typer.Option(False, "--overwrite", help=f"Replace a finished run in --output-dir{note}.")


def keep_checkpoints_option():
    return typer.Option(False, "--keep-checkpoints", help="Keep trainer checkpoints at the end.")


def precision_option(default: str = "auto"):
    return typer.Option(
        default,
        help="auto (bf16 mixed precision on a GPU that supports it, else fp32), fp32, fp16 (CUDA only) or bf16.",
    )


def gradient_checkpointing_option():
    return typer.Option(
        False,
        "--gradient-checkpointing",
        help="Recompute layer activations in the backward pass: less GPU memory for ~30% more compute.",
    )


def echo_summary(summary: dict[str, Any], output_dir: Path, what: str) -> None:
    """Print the run summary (without the recorded config) and where the model and summary are."""
    typer.echo(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=2, default=str))
    typer.echo(f"{what} saved to {output_dir} (summary: {output_dir / 'run_summary.json'})")
