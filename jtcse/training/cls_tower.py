"""Load an encoder as a *CLS tower*: a plain sentence-transformers ``Transformer`` + CLS ``Pooling``.

Warm-up outputs and distilled students must be exactly that (DESIGN §2, §5), so whatever follows the
``Transformer`` in the source checkpoint (mean pooling, ``Normalize``, ``Dense`` …) is replaced by a CLS
``Pooling``; every such change is reported so the run summary can say what was altered.
"""

from __future__ import annotations

from pathlib import Path

from jtcse.errors import JTCSEError


def describe_source(source, default: str = "<embedded MiniLM>") -> str:
    """How a model argument is named in summaries: its path, ``default`` for ``None``, or a placeholder."""
    if source is None:
        return default
    return str(source) if isinstance(source, (str, Path)) else "<in-memory model>"


def load_sentence_transformer(source, *, role: str):
    """``SentenceTransformer(source)`` with a one-line :class:`JTCSEError` when it cannot be loaded.

    ``source`` is a path, or an already built ``SentenceTransformer`` (returned as is). ``role`` names
    it in messages ("teacher", "student", "tower"). Twin checkpoints (jtcse module classes) open through
    ``jtcse.modeling.loading.load_model``, which allows jtcse's own classes and no foreign code.
    """
    from sentence_transformers import SentenceTransformer

    from jtcse.modeling.loading import load_model

    if isinstance(source, SentenceTransformer):
        return source
    path = Path(str(source))
    if not path.exists():
        raise JTCSEError(f"{role} model not found: {path} (give a sentence-transformers directory).")
    try:
        return load_model(str(path))
    except JTCSEError as err:
        raise JTCSEError(f"cannot load the {role} {path}: {err}") from err
    except Exception as err:  # noqa: BLE001 - any load failure is the user's path problem, said in one line
        raise JTCSEError(f"cannot load the {role} {path} as a sentence-transformers model: {err}") from err


def load_cls_tower(source=None, *, role: str = "tower") -> tuple[object, list[str]]:
    """Return ``(model, changes)``: ``source`` rebuilt as ``Transformer`` + CLS ``Pooling``.

    ``source`` is a path, a ``SentenceTransformer`` or ``None`` (the embedded MiniLM tower). ``changes``
    lists, in words, the modules that were replaced or dropped (empty when it already was a CLS tower).
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    if source is None:
        from jtcse.defaults import default_tower_path

        source = default_tower_path()
    model = load_sentence_transformer(source, role=role)
    modules = list(model)
    if not modules or not isinstance(modules[0], Transformer):
        first = type(modules[0]).__name__ if modules else "nothing"
        raise JTCSEError(
            f"the {role} must start with a sentence-transformers Transformer module (found {first}); "
            "a twin checkpoint cannot be used as a single tower — pass one of its towers or a plain encoder."
        )
    transformer = modules[0]
    rest = modules[1:]
    if len(rest) == 1 and isinstance(rest[0], Pooling) and rest[0].pooling_mode == "cls":
        return model, []
    changes: list[str] = []
    for module in rest:
        if isinstance(module, Pooling):
            changes.append(f"replaced {module.pooling_mode!r} pooling by CLS pooling")
        else:
            changes.append(f"dropped {type(module).__name__}")
    if not any(isinstance(module, Pooling) for module in rest):
        changes.append("added CLS pooling")
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="cls")
    tower = SentenceTransformer(modules=[transformer, pooling], device=str(model.device))
    return tower, changes
