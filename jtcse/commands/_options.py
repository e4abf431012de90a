"""Every option that more than one command takes, declared once with one help text.

Each function returns a fresh ``typer.Option`` (a command owns its parameter objects); a default
that differs between commands is an argument, the meaning and the help never differ. Defaults are
read, not repeated: a training option's default is its trainer's preset (``TWIN_SETTINGS.learning_rate``
...) or what the trainer declares (:func:`declared_default`), read when the command is defined, so
changing a trainer changes its command. Every command writes to ``-o/--output`` (:func:`output_option`);
an old option name stays accepted, hidden and with a deprecation warning (:func:`alias_option`).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
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


def checked_device(value: str | None) -> str | None:
    """Callback of ``--device``: a device this machine lacks (``cuda`` without CUDA ...) is one line before
    anything loads (:func:`jtcse.devices.resolve_device`, the one check)."""
    if value is not None:
        from jtcse.devices import resolve_device

        resolve_device(value)
    return value


def device_option():
    return typer.Option(
        None,
        "--device",
        callback=checked_device,
        help="torch device: cpu, cuda, cuda:1, mps. Default: the best available.",
    )


def devices_option():
    return typer.Option(
        None, "--devices",
        help="Encode with one worker process per device, e.g. cuda:0,cuda:1 (sentence-transformers' multi-process pool).",
    )  # fmt: skip


def processes_option():
    return typer.Option(
        None,
        "--processes",
        help="Encode with N CPU worker processes (each with cores/N threads). Default: one process.",
    )


def checked_pooling(value: str | None) -> str | None:
    """Callback of ``--pooling``: ``cls`` or ``mean`` (:data:`jtcse.modeling.loading.POOLING_CHOICES`), else one line."""
    from jtcse.modeling.loading import POOLING_CHOICES

    if value is not None and value not in POOLING_CHOICES:
        raise JTCSEError(f"--pooling must be one of {', '.join(POOLING_CHOICES)} (got {value!r}).")
    return value


def pooling_option(training: bool = False):
    """``--pooling cls|mean``: for an evaluation, replaces the checkpoint's pooling; for training (``training=True``:
    train, simcse, pipeline), how the towers pool, by default the starting model's own."""
    what = (
        "How the towers pool: cls or mean. Default: the starting model's own (a plain transformers model: cls; "
        "a model pooling otherwise, e.g. weightedmean, must be given one)."
        if training
        else "Override the checkpoint's pooling: cls or mean."
    )
    return typer.Option(None, "--pooling", callback=checked_pooling, help=what)


def student_pooling_option():
    return typer.Option(
        None, "--student-pooling",
        help="Replace the distillation student's pooling by cls or mean. Default: keep its own (e.g. MiniLM's mean).",
    )  # fmt: skip


def objective_option():
    from jtcse.training.distill import DEFAULT_OBJECTIVE

    return typer.Option(
        DEFAULT_OBJECTIVE, "--objective",
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


def batch_size_option(default: int):
    return typer.Option(default, "--batch-size", help="Sentences per batch (training: in-batch negatives).")


def inference_batch_size_option(default: int, what: str = "encoded"):
    """``--batch-size`` of a command that runs a model without training it (encode, index, eval, diagnose, rtt):
    there, a batch is only a unit of work."""
    return typer.Option(default, "--batch-size", help=f"Sentences {what} per batch (more: faster, more memory).")


def max_seq_length_option(default: int):
    return typer.Option(
        default, "--max-seq-length", help="Tokens per sentence during training; longer ones are truncated."
    )


# ---------------------------------------------------------------- data
def corpus_option():
    return typer.Option(
        None,
        "--corpus",
        callback=given_once,
        help="UTF-8 text file, one sentence per line. Default: the embedded stdlib prose.",
    )


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


# ---------------------------------------------------------------- old option names
def alias_option(old: str, new: str):
    """A hidden old name ``old`` of option ``new`` (whose factory gives it the callback :func:`given_once`).

    Given, it prints a deprecation warning once and stands in for ``new``: it is processed first (eager)
    and becomes ``new``'s default for this call, so the command reads ``new`` alone, required or not; the
    command never reads this parameter itself. ``new`` given too is an error (:func:`given_once`).
    """
    name = new.split("/")[-1].lstrip("-").replace("-", "_")  # -o/--output -> output: the command's parameter

    def stand_in(ctx: typer.Context, value: Any) -> Any:
        if value is not None:
            from jtcse.processes import is_main_process

            if is_main_process():
                typer.secho(f"DeprecationWarning: {old} is deprecated; use {new}.", fg=typer.colors.YELLOW, err=True)
            ctx.meta[f"jtcse.old_name.{name}"] = (old, new)
            ctx.default_map = {**(ctx.default_map or {}), name: value}
        return value

    return typer.Option(None, old, hidden=True, is_eager=True, callback=stand_in, help=f"Deprecated name of {new}.")


def given_once(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """Callback of an option that has an old name (:func:`alias_option`): both names at once is an error."""
    names = ctx.meta.get(f"jtcse.old_name.{param.name}")
    # typer's ParameterSource lives in its private copy of click: compared by name
    if names is not None and ctx.get_parameter_source(param.name).name == "COMMANDLINE":
        old, new = names
        raise JTCSEError(f"give {new} once ({old} is its old name).")
    return value


def declared_default(function: Callable[..., Any], name: str) -> Any:
    """The default ``function`` (a trainer) declares for its keyword ``name``: the option passes it on unchanged."""
    return inspect.signature(function).parameters[name].default


# ---------------------------------------------------------------- training schedule: defaults from the trainer's preset
def learning_rate_option(default: float):
    return typer.Option(default, "--learning-rate", callback=given_once, help="AdamW learning rate.")


def lr_alias_option():
    return alias_option("--lr", "--learning-rate")


def epochs_option(default: float):
    return typer.Option(default, "--epochs", help="Passes over the data (ignored when --max-steps is set).")


def max_steps_option(default: int):
    return typer.Option(default, "--max-steps", help="Stop after this many steps (-1: run the epochs).")


def eval_steps_option(default: int):
    return typer.Option(default, "--eval-steps", help="Evaluate on --dev-file (and checkpoint) every N steps.")


def save_steps_option(default: int | None):
    return typer.Option(default, "--save-steps", help="Checkpoint every N steps without a dev file.")


def logging_steps_option(default: int | None):
    return typer.Option(
        default, "--logging-steps", help="Log the training loss every N steps (unset: about ten times per run)."
    )


def seed_option(default: int):
    return typer.Option(default, "--seed", help="Random seed (data order, dropout).")


def temperature_option(default: float):
    return typer.Option(default, "--temperature", help="InfoNCE temperature τ (scale = 1/τ).")


def regularizer_option():
    from jtcse.losses.registry import REGULARIZER_HELP

    return typer.Option([], "--regularizer", "-r", metavar="SPEC", help=REGULARIZER_HELP)


def precision_option(default: str):
    return typer.Option(
        default,
        "--precision",
        help="auto (bf16 mixed precision on a GPU that supports it, else fp32), fp32, fp16 (CUDA only) or bf16.",
    )


def gradient_checkpointing_option(default: bool):
    return typer.Option(
        default,
        "--gradient-checkpointing",
        help="Recompute layer activations in the backward pass: less GPU memory for ~30% more compute.",
    )


def training_settings(arguments: dict[str, Any]):
    """The :class:`~jtcse.training.stage.TrainingSettings` among a training command's arguments (call with
    ``locals()``)."""
    from jtcse.training.stage import TrainingSettings

    return TrainingSettings.from_arguments(arguments)


# ---------------------------------------------------------------- the twin's objective (jtcse train; jtcse pipeline --twin-*)
_TWIN_TERMS = {
    "nce": "InfoNCE inside each tower",
    "icnce": "ICNCE between the towers (on the primitive and the cross-attention stream)",
    "ictm": "the tensor-modulus term ICTM",
}


def _twin_default(name: str) -> Any:
    from jtcse.training.twin import train_twin

    return declared_default(train_twin, name)


def cael_every_option(prefix: str = ""):
    """``--cael-every`` (``--twin-cael-every`` with ``prefix="twin-"``); 0 on the command line is ``cael_every=None``."""
    return typer.Option(
        _twin_default("cael_every") or 0, f"--{prefix}cael-every",
        help="A cross-attention encoder layer (CAEL) every k layers of the twin (k must divide the layer count; "
        "the last layer is always one). 0 = no cross-attention (TNCSE).",
    )  # fmt: skip


def twin_weight_option(term: str, prefix: str = ""):
    """``--nce-weight``, ``--icnce-weight`` or ``--ictm-weight`` (``--twin-...`` with ``prefix="twin-"``)."""
    return typer.Option(
        _twin_default(f"{term}_weight"), f"--{prefix}{term}-weight",
        help=f"Weight of {_TWIN_TERMS[term]} in the twin's loss (0 = off).",
    )  # fmt: skip


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
OUTPUT = "-o/--output"


def output_option(what: str, default: Any = ..., *, folder: bool = True, also: tuple[str, ...] = ()):
    """``-o/--output``, what every writing command writes to: the folder (or, ``folder=False``, the file) for
    ``what``; required unless a ``default`` is given (None: optional). ``also``: further names that are not
    deprecated (e.g. ``data fetch``'s ``--to``)."""
    return typer.Option(
        default, "--output", "-o", *also, callback=given_once, help=f"{'Folder' if folder else 'File'} for {what}."
    )


def old_output_option(old: str):
    """A command's old spelling of ``-o/--output`` (``--output-dir``, ``--out``, ...): hidden, warns, still works."""
    return alias_option(old, OUTPUT)


def resume_option():
    return typer.Option(
        True, "--resume/--no-resume",
        help="Resume from the last checkpoint in -o/--output; the other settings must match (see docs/runs.md).",
    )  # fmt: skip


def overwrite_option():
    return typer.Option(False, "--overwrite", help="Replace a finished output instead of refusing or resuming.")


def keep_checkpoints_option(default: bool):
    return typer.Option(
        default,
        "--keep-checkpoints",
        help="Keep the trainer checkpoints (best and last) after the final save, e.g. to train a finished run further; by default they are deleted.",
    )


def echo_summary(summary: dict[str, Any], output_dir: Path, what: str) -> None:
    """Print the run summary (without the recorded config) and where the model and summary are (rank 0 only)."""
    from jtcse.processes import is_main_process

    if not is_main_process():
        return
    typer.echo(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=2, default=str))
    typer.echo(f"{what} saved to {output_dir} (summary: {output_dir / 'run_summary.json'})")
