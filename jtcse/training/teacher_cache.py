"""Teacher embeddings for distillation: computed once, batched, cached on disk, reused on rerun.

The cache file is ``teacher-<key>.npy`` (float32, one row per sentence, corpus order) beside a
``.json`` note. The key hashes the teacher's identity and the exact sentence list, so a changed
teacher or corpus never reuses stale targets:

* a teacher given as a path → the content of every file of the model in it (:func:`jtcse.output_paths.fingerprint`:
  retraining into the same directory, or another model copied there, changes the key; moving or copying the folder
  does not) — and the teacher is not even loaded on a hit;
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
from jtcse.output_paths import WORKING_FOLDERS
from jtcse.output_paths import fingerprint as content_of


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
    :func:`~jtcse.output_paths.fingerprint` of ``teacher`` when the caller already has it. ``device``: where the teacher
    encodes (``None``: the best device here); ``precision``: under which autocast (``auto`` resolved by
    :func:`jtcse.devices.check_precision`; the vectors are float32 either way). Targets encoded at another
    precision than fp32 are cached under their own key (and their note names the precision).
    """
    from jtcse.devices import autocast, check_precision
    from jtcse.modeling.loading import load_model as load_sentence_transformer

    fingerprint = fingerprint or content_of(teacher, ignore=WORKING_FOLDERS, what="teacher model")
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
