"""CLI sub-commands. Each module defines ``register(app: typer.Typer)``; shared options live in ``_options``."""
