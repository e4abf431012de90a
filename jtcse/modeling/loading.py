"""Load any checkpoint jtcse writes (a twin or a single tower) as a ``SentenceTransformer``.

sentence-transformers >= 6 imports a module class from outside its own namespace only with
``trust_remote_code=True``, even for local folders; a twin checkpoint names
``jtcse.modeling.twin.TwinTowers`` in its ``modules.json``. This helper passes that flag only
when every module class is from ``sentence_transformers`` or ``jtcse`` itself and no tower
config asks ``transformers`` for remote code (``auto_map``), so it never trusts foreign code.
"""

from __future__ import annotations

import json
from pathlib import Path

from jtcse.errors import JTCSEError

_TRUSTED_PREFIXES = ("sentence_transformers.", "jtcse.")


def needs_jtcse_classes(path: str | Path) -> bool:
    """True when the checkpoint at ``path`` uses jtcse module classes (and only trusted ones)."""
    path = Path(path)
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return False
    try:
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise JTCSEError(f"{modules_file} is not readable JSON: {err}") from None
    types = [str(entry.get("type", "")) for entry in modules]
    for nested in path.glob("member_*/modules.json"):  # an ensemble's members are checkpoints of their own
        types += [str(entry.get("type", "")) for entry in json.loads(nested.read_text(encoding="utf-8"))]
    from jtcse.modeling.checkpoint_code import portable_classes

    ours = {f"{c.__module__}.{c.__name__}" for c in portable_classes()}
    if not any(t.startswith("jtcse.") or t in ours for t in types):
        return False
    foreign = [t for t in types if not (t.startswith(_TRUSTED_PREFIXES) or t in ours)]
    if foreign:
        raise JTCSEError(f"{path} mixes jtcse modules with foreign module classes {foreign}; refusing to load it.")
    for config_file in path.rglob("config.json"):
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except ValueError:
            raise JTCSEError(f"{config_file} is not readable JSON.") from None
        if "auto_map" in config:
            raise JTCSEError(f"{config_file} asks for remote model code (auto_map); refusing to load it.")
    return True


def load_model(path: str | Path, device: str | None = None, **kwargs):
    """``SentenceTransformer(path)`` that also opens jtcse twin checkpoints (see the module docstring).

    ``path`` may also be a model name, resolved by sentence-transformers (hub or local cache).
    """
    from sentence_transformers import SentenceTransformer

    from jtcse.modeling.checkpoint_code import sentence_transformer_loader

    trust = kwargs.pop("trust_remote_code", False)
    if Path(path).exists():
        trust = needs_jtcse_classes(path) or trust
    try:
        return sentence_transformer_loader(path)(str(path), device=device, trust_remote_code=trust, **kwargs)
    except OSError as err:
        if Path(path).exists():
            raise JTCSEError(f"Cannot load the model at {path}: {err}") from None
        raise JTCSEError(
            f"Model not found: {path!r} is not a local folder and could not be loaded from the Hugging Face "
            "cache or hub (offline machines need a local path)."
        ) from None
