"""Every option that more than one command takes, declared once with one help text.

Each function returns a fresh ``typer.Option`` (a command owns its parameter objects); a default
that differs between commands is an argument, the meaning and the help never differ. The training
commands' settings (``--learning-rate``, ``--twin-max-steps`` ...) are not declared here: their options are
generated from the settings classes (:mod:`jtcse.commands._settings`). Every command writes to ``-o/--output``
(:func:`output_option`); an old option name stays accepted, hidden and with a deprecation warning
(:func:`alias_option`; a generated option's old names are declared on its setting).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from jtcse.errors import JTCSEError
from jtcse.locking import json_text
from jtcse.text_inputs import STS_INPUTS


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
        None,
        f"--tower-{which}",
        help="Tower to start from: a sentence-transformers or transformers model dir, or a hub name. Default: the embedded MiniLM.",
    )


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
        None,
        "--devices",
        help="Encode with one worker process per device, e.g. cuda:0,cuda:1 (sentence-transformers' multi-process pool).",
    )


def processes_option():
    return typer.Option(
        None,
        "--processes",
        help="Encode with N CPU worker processes (each with cores/N threads). Default: one process.",
    )


def checked_pooling(value: str | None) -> str | None:
    """Callback of ``--pooling``: the one check of a pooling name (:func:`jtcse.modeling.loading.check_pooling`)."""
    from jtcse.modeling.loading import check_pooling

    return check_pooling(value, "--pooling")


def pooling_option(training: bool = False):
    """``--pooling cls|mean``: for an evaluation, replaces the checkpoint's pooling; for training (``training=True``:
    train, simcse, pipeline), how the towers pool, by default the starting model's own."""
    from jtcse.modeling.loading import TOWER_POOLING_HELP, TOWER_POOLING_UNSET

    if training:
        return typer.Option(
            None, "--pooling", callback=checked_pooling, help=TOWER_POOLING_HELP, show_default=TOWER_POOLING_UNSET
        )
    return typer.Option(
        None, "--pooling", callback=checked_pooling, help="Override the checkpoint's pooling: cls or mean."
    )


def inference_batch_size_option(default: int, what: str = "encoded"):
    """``--batch-size`` of a command that runs a model without training it (encode, index, eval, diagnose, rtt):
    there, a batch is only a unit of work."""
    return typer.Option(default, "--batch-size", help=f"Sentences {what} per batch (more: faster, more memory).")


# ---------------------------------------------------------------- data
TEXT_INPUTS = "a UTF-8 text file (one sentence a line), .jsonl, .csv/.tsv (a header), .parquet, a save_to_disk folder or hf:NAME[:CONFIG][:SPLIT] (offline: from the cache)"


def corpus_option():
    return typer.Option(
        None,
        "--corpus",
        callback=given_once,
        help=f"The sentences: {TEXT_INPUTS}. Default: the embedded stdlib prose.",
    )


def text_column_option():
    return typer.Option(
        None,
        "--text-column",
        help="The column holding the text, when the input is a table or dataset. Default: the first of text, "
        "sentence, sentence1, anchor, query it has, else its only string column.",
    )


def input_file_option():
    return typer.Option(..., "--input", "-i", help=f"The texts: {TEXT_INPUTS}; blank lines of a text file are skipped.")


def chunk_size_option():
    return typer.Option(8192, "--chunk-size", help="Lines read, encoded and written at a time (bounds memory).")


def dev_file_option():
    return typer.Option(
        None,
        "--dev-file",
        help=f"The dev pairs, scored every --eval-steps: {STS_INPUTS}. With --checkpoint best-dev the best "
        "checkpoint by it is kept, else the last step.",
    )


def progress_option():
    return typer.Option(True, "--progress/--no-progress", help="Show a progress bar.")


# ---------------------------------------------------------------- old option names
def alias_option(old: str, new: str, name: str | None = None):
    """A hidden old name ``old`` of option ``new`` (whose factory gives it the callback :func:`given_once`), the
    command's parameter ``name`` (default: ``new``'s long name, ``-o/--output``: ``output``).

    Given, it prints a deprecation warning once and stands in for ``new``: it is processed first (eager)
    and becomes ``new``'s default for this call, so the command reads ``new`` alone, required or not; the
    command never reads this parameter itself. ``new`` given too is an error (:func:`given_once`). The generated
    settings options get theirs from the old spellings declared on their keys (:mod:`jtcse.commands._settings`).
    """
    name = name or new.split("/")[-1].lstrip("-").replace("-", "_")

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
        True,
        "--resume/--no-resume",
        help="Resume from the last checkpoint in -o/--output; the other settings must match (see docs/runs.md).",
    )


def overwrite_option():
    return typer.Option(
        False,
        "--overwrite",
        help="Replace a finished output instead of refusing or resuming: only the files its record lists (a file "
        "jtcse did not write is never replaced, nor is an input).",
    )


def echo_summary(summary: dict[str, Any], output_dir: Path, what: str) -> None:
    """Print the run summary (without the recorded config) and where the model and summary are (rank 0 only)."""
    from jtcse.processes import is_main_process

    if not is_main_process():
        return
    typer.echo(json_text({k: v for k, v in summary.items() if k != "config"}, where="the summary"), nl=False)
    typer.echo(f"{what} saved to {output_dir} (summary: {output_dir / 'run_summary.json'})")
