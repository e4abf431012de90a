"""Which model an index or an embedding file was made with: its name as recorded (:func:`model_identity`, an
absolute path for a local folder, a hub id as given) and the model from a name or a loaded one
(:func:`resolve_model`), shared by ``jtcse encode``, ``index build``/``search`` and ``index mine``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError


def model_identity(model: str) -> str:
    """How an index or embedding file names its model: an absolute path for a local directory,
    the name as given otherwise (a hub id)."""
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else model


def model_name_of(model: Any, model_name: str | None = None) -> str:
    """The identity to record for ``model``: ``model_name`` if given, else that of a name/path.

    A loaded SentenceTransformer does not know where it came from, so it needs ``model_name``.
    """
    if model_name:
        return model_name
    if isinstance(model, (str, os.PathLike)):
        return model_identity(str(model))
    raise JTCSEError(
        "A loaded SentenceTransformer was given without model_name=...: pass the name or path it "
        "was loaded from, so the output records which model made it."
    )


def resolve_model(model: Any, model_name: str | None = None, device: str | None = None) -> tuple[Any, str]:
    """Accept a model name/path or a loaded SentenceTransformer; return (model, identity)."""
    from jtcse.modeling.loading import load_model

    name = model_name_of(model, model_name)
    if isinstance(model, (str, os.PathLike)):
        return load_model(str(model), device=device), name
    return model, name
