"""The ``jtcse`` command line: one sub-command per stage, each defined in ``jtcse.commands``.

Every command module exposes ``register(app)``; heavy imports (torch, transformers) happen
inside the command bodies so that ``jtcse --help`` answers instantly.
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="jtcse",
    help="Contrastive sentence encoders: train JTCSE twins, warm up and distil towers, "
    "make RTT paraphrases, evaluate on STS/MTEB, encode and search.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



@app.callback()
def _group() -> None:
    """Keep `jtcse <command>` a command group even while only one command is registered."""


# Order here is the order in `jtcse --help`.
COMMAND_MODULES = ["train", "simcse", "distill", "ensemble", "pipeline", "rtt", "eval", "diagnose", "encode", "index"]

for _name in COMMAND_MODULES:
    try:
        _module = importlib.import_module(f"jtcse.commands.{_name}")
    except ModuleNotFoundError as _err:
        if _err.name != f"jtcse.commands.{_name}":
            raise
        continue
    _module.register(app)


def main() -> None:
    """Run the CLI; a :class:`JTCSEError` (a user mistake) is printed as one line, not a traceback."""
    from jtcse.errors import JTCSEError

    try:
        app()
    except JTCSEError as err:
        typer.secho(f"Error: {err}", fg=typer.colors.RED, err=True)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
