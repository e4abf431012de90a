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

# Order here is the order in `jtcse --help`.
COMMAND_MODULES = ["train", "simcse", "distill", "pipeline", "rtt", "eval", "diagnose", "encode", "index"]

for _name in COMMAND_MODULES:
    try:
        _module = importlib.import_module(f"jtcse.commands.{_name}")
    except ModuleNotFoundError as _err:
        if _err.name != f"jtcse.commands.{_name}":
            raise
        continue
    _module.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
