"""Teacher embeddings for distillation: computed once, batched, cached on disk, reused on rerun.

The cache file is ``teacher-<key>.npy`` (float32, one row per sentence, corpus order) beside a
``.json`` note. The key hashes the teacher's identity and the exact sentence list, so a changed
teacher or corpus never reuses stale targets:

* a teacher given as a path → the name, size and mtime of every file in it (retraining into the same directory
  changes the key; moving the folder, or copying it with its files' times, does not) — and the teacher is not even
  loaded on a hit;
* a teacher given as a model object → a hash of its weights.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_path, atomic_write_json


@dataclass
class TeacherTargets:
    embeddings: np.ndarray
    cache_path: Path
    cache_hit: bool
    teacher_key: str


def sentences_digest(sentences: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for sentence in sentences:
        digest.update(sentence.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def file_fingerprint(path: str | Path | None) -> str | None:
    """``sha256:<16 hex digits>`` of the bytes of the file ``path`` (a folder written by ``save_to_disk`` or an
    ``hf:`` dataset: of its files, :func:`jtcse.text_inputs.table_files`; ``None`` for ``None``): how a run records a
    file it reads (a dev file, pairs, a selection file), so that one edited in place is another input and one
    moved or copied is the same."""
    if path is None:
        return None
    from jtcse.text_inputs import table_files

    digest = hashlib.sha256()
    files = [Path(path)] if Path(path).is_file() else table_files(path)  # a saved dataset, hf:NAME: its files (#46)
    for file in files:
        if len(files) > 1:
            digest.update(f"{file.relative_to(path) if Path(path).is_dir() else file.name}\0".encode())
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return f"sha256:{digest.hexdigest()[:16]}"


FINGERPRINTS = ("sha256:", "files:", "weights:")
"""How each fingerprint a run records starts (:func:`file_fingerprint`, :func:`model_fingerprint`)."""


def is_fingerprint(value) -> bool:
    """Whether a recorded ``value`` (or a list of them) holds a fingerprint of a file or model: what differs there is
    an input that changed (a file edited, a model trained again), not a setting."""
    return any(
        isinstance(v, str) and v.startswith(FINGERPRINTS) for v in (value if isinstance(value, list) else [value])
    )


def model_fingerprint(teacher, *, missing_ok: bool = False) -> str:
    """A string that changes whenever a model's weights may have changed (see module doc): of a teacher, and of
    the towers a twin starts from. A path that does not exist is an error, or with ``missing_ok`` (a Hub name)
    the name itself."""
    if isinstance(teacher, (str, Path)):
        root = Path(teacher).resolve()
        if not root.exists():
            if missing_ok:
                return str(teacher)
            raise JTCSEError(f"teacher model not found: {teacher}")
        digest = hashlib.sha256()
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            stat = path.stat()
            digest.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
        return f"files:{digest.hexdigest()[:16]}"  # not the folder's path: a folder moved (or copied with its times) is the same model
    import torch

    digest = hashlib.sha256(type(teacher).__name__.encode())
    for name, tensor in teacher.state_dict().items():
        digest.update(name.encode())
        # Raw bytes (viewed as uint8 so bf16 weights hash too).
        digest.update(tensor.detach().to("cpu").contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return f"weights:{digest.hexdigest()[:16]}"


def teacher_targets(
    teacher,
    sentences: Sequence[str],
    cache_dir: str | Path,
    *,
    batch_size: int = 128,
    show_progress_bar: bool = True,
    fingerprint: str | None = None,
    device: str | None = None,
    precision: str = "fp32",
) -> TeacherTargets:
    """Return the teacher's embeddings of ``sentences``, from the cache when it holds them.

    ``teacher`` is a path or a ``SentenceTransformer``; it is loaded only on a cache miss. The file is
    written atomically, so an interrupted encode leaves no half cache behind. ``fingerprint`` is
    `model_fingerprint` of ``teacher`` when the caller already has it. ``device``: where the teacher
    encodes (``None``: the best device here); ``precision``: under which autocast (``auto`` resolved by
    :func:`jtcse.devices.check_precision`; the vectors are float32 either way). Targets encoded at another
    precision than fp32 are cached under their own key (and their note names the precision).
    """
    from jtcse.devices import autocast, check_precision
    from jtcse.modeling.loading import load_model as load_sentence_transformer

    fingerprint = fingerprint or model_fingerprint(teacher)
    precision = check_precision(precision, device)
    keyed = f"{fingerprint}|{sentences_digest(sentences)}" + ("" if precision == "fp32" else f"|{precision}")
    key = hashlib.sha256(keyed.encode()).hexdigest()[:20]
    cache_dir = Path(cache_dir)
    cache_path = cache_dir / f"teacher-{key}.npy"
    if cache_path.is_file():
        embeddings = np.load(cache_path)
        if embeddings.shape[0] == len(sentences):
            return TeacherTargets(embeddings, cache_path, True, fingerprint)
    model = load_sentence_transformer(teacher, role="teacher", device=device)
    with autocast(precision, str(model.device)):
        embeddings = model.encode(
            list(sentences),
            batch_size=batch_size,
            convert_to_numpy=True,
            show_progress_bar=show_progress_bar,
        ).astype(np.float32, copy=False)
    if embeddings.ndim != 2 or embeddings.shape[0] != len(sentences):
        raise JTCSEError(
            f"the teacher returned embeddings of shape {embeddings.shape}; expected one vector per sentence."
        )
    if not np.isfinite(embeddings).all():
        raise JTCSEError("the teacher produced NaN/inf embeddings; check the teacher checkpoint.")
    targets = TeacherTargets(embeddings, cache_path, False, fingerprint)
    _write_cache(targets, precision)
    return targets


def _write_cache(targets: TeacherTargets, precision: str) -> None:
    """Write freshly computed ``targets`` and their note (teacher key, count, width, precision) to the cache."""
    targets.cache_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(targets.cache_path) as tmp:
        with tmp.open("wb") as handle:
            np.save(handle, targets.embeddings)
    note = {
        "teacher": targets.teacher_key,
        "sentences": len(targets.embeddings),
        "dimension": int(targets.embeddings.shape[1]),
        "precision": precision,
    }
    atomic_write_json(targets.cache_path.with_suffix(".json"), note)
