"""Open jtcse's own checkpoints with the installed jtcse classes, never with code read from the checkpoint.

A twin (or ensemble) checkpoint carries its modeling source (``twin.py`` and the files it imports) and
names ``twin.TwinTowers`` (``ensemble.Ensemble``) in ``modules.json`` (see :mod:`jtcse.modeling.portable`); older ones name
``jtcse.modeling.twin.TwinTowers`` and carry no code. Both resolve to the installed class. A checkpoint
whose copy of the code differs from the installed files (written by another jtcse version, or edited) or
lacks it still opens with the installed classes, with one warning naming the file: the weights and
settings are jtcse's own format, and the checkpoint's code is never run here
(``SentenceTransformer(path, trust_remote_code=True)`` runs it instead).
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

from jtcse.errors import JTCSEError

logger = logging.getLogger(__name__)


def portable_classes() -> tuple[type, ...]:
    """jtcse's module classes that travel with their source (:func:`jtcse.modeling.portable.portable`)."""
    from jtcse.modeling.ensemble import Ensemble
    from jtcse.modeling.twin import TwinTowers

    return (TwinTowers, Ensemble)


def installed_module_classes(path: str | Path) -> dict[str, type]:
    """``modules.json`` types of the checkpoint at ``path`` that name jtcse classes, mapped to the installed classes."""
    from jtcse.modeling.portable import source_files

    path = Path(path)
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return {}
    try:
        types = {str(entry.get("type", "")) for entry in json.loads(modules_file.read_text(encoding="utf-8"))}
    except (OSError, ValueError, AttributeError) as err:
        raise JTCSEError(f"{modules_file} is not a readable list of modules: {err}") from None
    classes: dict[str, type] = {}
    for cls in portable_classes():
        portable_type, legacy_type = f"{cls.__module__}.{cls.__name__}", f"{cls.source_module}.{cls.__name__}"
        if legacy_type in types:
            classes[legacy_type] = cls
        if portable_type in types:
            for source in source_files(cls):
                copy = path / source.name
                if not copy.is_file() or copy.read_bytes() != source.read_bytes():
                    state = "is missing" if not copy.is_file() else "differs from the installed jtcse's"
                    logger.warning(
                        "%s %s (another jtcse version?); opening %s with the installed jtcse classes. "
                        "SentenceTransformer(path, trust_remote_code=True) would run the checkpoint's own code.",
                        copy,
                        state,
                        path,
                    )
                    break
            classes[portable_type] = cls
    return classes


def sentence_transformer_loader(path: str | Path):
    """``SentenceTransformer``, or its loader that resolves :func:`installed_module_classes` of ``path``."""
    from sentence_transformers import SentenceTransformer

    classes = installed_module_classes(path) if Path(path).is_dir() else {}
    if not classes:
        return SentenceTransformer
    return functools.partial(SentenceTransformer._load_with_module_classes, module_classes=classes)
