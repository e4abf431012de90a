"""Build a JTCSE twin ``SentenceTransformer`` from two tower checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

from jtcse.errors import JTCSEError


def _transformer_subfolder(path: Path) -> str | None:
    """For a local sentence-transformers directory: the folder of its Transformer module ("" = root).

    None when ``path`` is not a sentence-transformers directory (a plain HF model dir or a hub name).
    """
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return None
    try:
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise JTCSEError(f"{modules_file} is not readable JSON: {err}") from None
    for entry in modules:
        if str(entry.get("type", "")).endswith(".Transformer"):
            return str(entry.get("path", ""))
    types = ", ".join(str(entry.get("type")) for entry in modules)
    raise JTCSEError(f"{path} has no Transformer module (modules: {types}); a tower must be a transformers encoder.")


def load_tower(name_or_path: str | Path, max_seq_length: int | None = None):
    """Load one tower as a sentence-transformers ``Transformer`` module.

    Accepts a sentence-transformers directory (only its Transformer module is used: the twin
    always pools CLS), a ``transformers`` model directory, or a hub model name.
    """
    from sentence_transformers.base.modules import Transformer

    from jtcse.modeling.twin import TOWER_DIRS, TWIN_CONFIG_FILE

    path = Path(name_or_path)
    if (path / TWIN_CONFIG_FILE).is_file():
        raise JTCSEError(
            f"{path} is a JTCSE twin checkpoint, not a single tower. Use one of its tower folders "
            f"({path / TOWER_DIRS[0]}, {path / TOWER_DIRS[1]}) or export them with TwinTowers.export_towers."
        )
    if not path.exists() and (path.is_absolute() or str(name_or_path).startswith((".", "~"))):
        raise JTCSEError(f"Tower not found: {path}")
    try:
        subfolder = _transformer_subfolder(path) if path.is_dir() else None
        if subfolder is None:
            tower = Transformer(str(name_or_path))
        else:
            tower = Transformer.load(str(path), subfolder=subfolder)
    except JTCSEError:
        raise
    except (OSError, ValueError, KeyError) as err:
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise JTCSEError(f"Cannot load tower {str(name_or_path)!r}: {first_line}") from None
    if max_seq_length is not None:
        tower.max_seq_length = max_seq_length
    return tower


def build_twin(tower_a=None, tower_b=None, *, cael_every: int | None = 2, max_seq_length: int | None = 64, device=None):
    """A ``SentenceTransformer`` whose only module is a :class:`~jtcse.modeling.twin.TwinTowers`.

    ``tower_a`` / ``tower_b``: sentence-transformers directories, ``transformers`` model directories
    or hub names; None means the embedded MiniLM (:func:`jtcse.defaults.default_tower_path`).
    ``cael_every``: CAEL spacing (a divisor of the layer count) or None for no cross-attention.
    ``encode`` returns the sum of the two towers' last-layer CLS vectors.
    """
    from sentence_transformers import SentenceTransformer

    from jtcse.defaults import default_tower_path
    from jtcse.modeling.twin import TwinTowers

    towers = [load_tower(t if t is not None else default_tower_path()) for t in (tower_a, tower_b)]
    try:
        twin = TwinTowers(towers[0], towers[1], cael_every=cael_every, max_seq_length=max_seq_length)
    except ValueError as err:  # the twin's module raises plain ValueError (it ships inside checkpoints)
        raise JTCSEError(str(err)) from None
    return SentenceTransformer(modules=[twin], device=device)
