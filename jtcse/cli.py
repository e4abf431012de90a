"""The ``jtcse`` command line: one sub-command per stage, each defined in ``jtcse.commands``.

Every command module exposes ``register(app)`` and is imported here by name (a broken command is an
import error, never a silently missing command). Options shared between commands are declared once,
in ``jtcse.commands._options``. Heavy imports (torch, transformers) happen inside the command bodies
so that ``jtcse --help`` answers instantly. Every command answers Ctrl-C with one line on what was kept
(:func:`_say_what_is_kept`).
"""

from __future__ import annotations

import atexit
import functools
import gc
import os

import typer

from jtcse.commands import data, diagnose, distill, encode, ensemble, export, index, pipeline, rtt, simcse, train
from jtcse.commands import eval as eval_command

app = typer.Typer(
    name="jtcse",
    help="Contrastive sentence encoders: train JTCSE twins, warm up and distil towers, "
    "make RTT paraphrases, evaluate on STS/MTEB, encode and search.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Order here is the order in `jtcse --help`.
COMMANDS = (train, simcse, distill, ensemble, pipeline, rtt, eval_command, diagnose, encode, index, export, data)
for _command in COMMANDS:
    _command.register(app)

USER_ERRORS = (ValueError, FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)

RESUMED_BY_RERUN = {"train", "simcse", "distill", "pipeline", "rtt", "encode", "index build", "data fetch", "eval mteb"}
"""The commands that keep their finished work when interrupted and go on from it when run again (docs/runs.md)."""


def _registered(typer_app: typer.Typer, path: tuple[str, ...] = ()):
    """``(name, CommandInfo)`` of every command of ``typer_app`` and its sub-apps (``"index build"``, ...)."""
    for info in typer_app.registered_commands:
        yield " ".join((*path, info.name or info.callback.__name__)), info
    for group in typer_app.registered_groups:
        yield from _registered(group.typer_instance, (*path, group.name))


def _say_what_is_kept(name: str, callback):
    """``callback`` that answers Ctrl-C (SIGINT) with one line on what was kept and what to do, then exit status 130
    (typer's own answer is the status alone). A command that says it itself (rtt) exits before this sees it."""

    @functools.wraps(callback)
    def run(*args, **kwargs):
        try:
            return callback(*args, **kwargs)
        except KeyboardInterrupt:
            _close_progress_bars()
            output = kwargs.get("output")
            where = f" in {output}" if output is not None else ""
            if name in RESUMED_BY_RERUN:
                said = f"Interrupted: the finished work{where} is kept; run the same command again to resume."
            else:
                said = "Interrupted before it finished; run the same command again to start over."
            typer.secho(said, fg=typer.colors.YELLOW, err=True)
            raise typer.Exit(130) from None

    return run


def _close_progress_bars() -> None:
    """Close the progress bars an interrupted command left open (a trainer's), so the message is the last line and
    no bar is redrawn under it when they are collected."""
    from tqdm import tqdm

    for bar in list(tqdm._instances):  # tqdm's own registry of open bars (what tqdm.write uses)
        bar.close()


for _name, _info in _registered(app):
    _info.callback = _say_what_is_kept(_name, _info.callback)


@functools.cache
def _command():
    """The click command typer builds from :data:`app` (about 30 ms: every option of every command), built once a
    process: the test suite runs ``main`` hundreds of times in one process (``tests/helpers/cli.py``)."""
    return typer.main.get_command(app)


def main() -> None:
    """Run the CLI. A user error (bad value, missing or unreadable path) is printed as one ``Error:``
    line with exit status 2; ``JTCSE_DEBUG=1`` re-raises it for the full traceback.

    Under a multi-process launch (torchrun, accelerate launch) ranks other than 0 print nothing but
    their own errors, labelled with the rank; one that stops because rank 0 failed stays silent.
    """
    from jtcse import processes

    # At exit the interpreter's last collections walk torch's and transformers' heap for about a second and free
    # nothing a process still needs; frozen objects are skipped (atexit handlers, flushes and finalizers still run).
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    processes.quiet_replica()
    try:
        _command()()  # what app() does, with the command built once
    except USER_ERRORS as err:
        if os.environ.get("JTCSE_DEBUG") == "1":
            raise
        if not isinstance(err, processes.MainProcessFailed):
            message = " ".join(str(err).split()) or type(err).__name__
            where = "" if processes.is_main_process() else f" (rank {processes.rank()})"
            typer.secho(f"Error{where}: {message}", fg=typer.colors.RED, err=True)
        raise SystemExit(2) from None
    finally:
        processes.leave_process_group()


if __name__ == "__main__":
    main()
