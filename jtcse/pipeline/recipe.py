"""Recipe files (``models/*/recipe.toml``): a :class:`~jtcse.pipeline.settings.PipelineConfig` as TOML.

Top-level keys are the config's own (``tower_a``, ``corpus``, ``dev_file``, ``seed`` ...); each stage has a table
of its settings (``[warmup]``, ``[probe]``, ``[twin]``, ``[ensemble]``, ``[distill]``), the keys of
``jtcse pipeline --help`` without the stage's prefix (``--twin-learning-rate`` is ``learning_rate`` under
``[twin]``). A key left out keeps its default. ``extends = "PATH"`` (relative to the file) reads another recipe
first and puts this one's keys on top, so a recipe lists only what differs. Paths inside a recipe are read as on
the command line, relative to the working directory. Every mistake is one line naming the file, the table, the
key and the valid keys (:func:`jtcse.schema.build`).

:func:`dump_recipe` writes a config back, each key under its help: ``jtcse pipeline --dump-recipe``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError
from jtcse.schema import Layer, build

EXTENDS = "extends"
DUMP_HEADER = """A jtcse pipeline recipe: every setting of one run, each under its help (jtcse pipeline --help says more).
A key commented out is unset; its comment says what unset means. Run it with
    jtcse pipeline --recipe FILE -o OUT
(options given on the command line override the file)."""


def read_recipe(path: str | Path, _seen: tuple[Path, ...] = ()) -> list[tuple[Path, dict[str, Any]]]:
    """``[(file, its values)]`` of the recipe at ``path``, the recipes it extends first."""
    from jtcse.toml_file import read_toml

    path = Path(path)
    if path.is_dir():
        raise JTCSEError(f"recipe {path} is a folder; give the recipe file in it (e.g. {path / 'recipe.toml'}).")
    if not path.is_file():
        raise FileNotFoundError(f"recipe not found: {path}")
    if path.resolve() in _seen:
        raise JTCSEError(f"recipe {path} extends itself (through {' -> '.join(map(str, _seen))}).")
    values = read_toml(path)
    base = values.pop(EXTENDS, None)
    if base is not None and not isinstance(base, str):
        raise JTCSEError(f"recipe {path}: {EXTENDS} must be the path of another recipe (a string), not {base!r}.")
    if base is not None and not (path.parent / base).is_file():
        raise FileNotFoundError(
            f"recipe {path}: {EXTENDS} = {base!r} names {path.parent / base}, which is not there (it is read relative "
            f"to {path.parent})."
        )
    files = read_recipe(path.parent / base, (*_seen, path.resolve())) if base is not None else []
    return [*files, (path, values)]


def recipe_layers(files: list[tuple[Path, dict[str, Any]]]) -> list[Layer]:
    return [Layer(values, where=f"recipe {path}") for path, values in files]


def load_recipe(path: str | Path):
    """The :class:`~jtcse.pipeline.settings.PipelineConfig` a recipe file describes."""
    from jtcse.pipeline.settings import PipelineConfig

    return build(PipelineConfig, recipe_layers(read_recipe(path)))


def recipe_record(files: list[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    """What a run records of its recipe: the file, its sha256, and each file it extends with its sha256."""
    digests = {str(path): hashlib.sha256(path.read_bytes()).hexdigest() for path, _ in files}
    path = str(files[-1][0])
    return {"path": path, "sha256": digests.pop(path), "extends": digests}


def dump_recipe(config) -> str:
    """``config`` as a recipe file: :data:`DUMP_HEADER`, then every key under its help."""
    from jtcse.toml_file import settings_toml

    return settings_toml(config, DUMP_HEADER)
