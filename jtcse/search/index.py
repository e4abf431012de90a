"""The on-disk index: a faiss index over an encoded text file, stored in a self-describing directory.

:mod:`jtcse.search.build` writes one (from a text file, or from precomputed embeddings); :class:`SearchIndex`
loads one, checks it against its manifest and searches it, rescoring a binary index's candidates from its int8
vectors on disk. The file on disk is always a CPU index.

Index directory (format version 3; versions 1-2 still load: 1 as float32 without a texts check, and an IVF
index of version 2 holds its lists inside ``index.faiss``)::

    manifest.json   format, format_version, model, dim, normalized, kind, precision, nlist, nprobe, rows,
                    texts_bytes, texts_sha256, source...
    index.faiss     the faiss index (CPU form; a binary index for precision "binary")
    index.ivfdata   kind "ivf": its inverted lists (faiss OnDiskInvertedLists), memory-mapped when loaded
    rescore.npy     precision "binary" only: int8 vectors for rescoring (memory-mapped, read per candidate)
    rescore_ranges.npy  their per-dimension (min, max), the int8 quantization ranges
    texts.txt       a copy of the corpus's non-empty lines, stripped, one per line
    rows.npy        per vector row: source line number ("line") and byte offset into texts.txt ("offset")

Keeping a copy of the texts (rather than a path to the source) makes the directory self-contained:
it can be moved or shared, and results stay right if the source file is edited or deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from jtcse.errors import JTCSEError
from jtcse.search.faiss_index import (
    DEFAULT_RESCORE_MULTIPLIER,
    GPU_MAX_NPROBE,
    check_precision,
    import_faiss,
    int8_ranges,
    search_quantized,
    set_nprobe,
    want_gpu,
)
from jtcse.search.lines import read_line_at
from jtcse.search.model_identity import model_identity, resolve_model

INDEX_FORMAT = "jtcse-index"
INDEX_FORMAT_VERSION = 3
MANIFEST = "manifest.json"
INDEX_FILE = "index.faiss"
IVF_DATA_FILE = "index.ivfdata"
TEXTS_FILE = "texts.txt"
ROWS_FILE = "rows.npy"
RESCORE_FILE = "rescore.npy"
RANGES_FILE = "rescore_ranges.npy"
EMBEDDINGS_FILE = "embeddings.npy"


def write_rescore_vectors(vectors: np.ndarray, codes_path: str | Path, *, chunk_rows: int = 65_536) -> np.ndarray:
    """Write ``vectors`` as int8 (``quantize_embeddings(..., "int8")``) to the ``.npy`` file ``codes_path``.

    The ranges are each dimension's min and max over all rows (:func:`~jtcse.search.faiss_index.int8_ranges`);
    they are returned, and :func:`~jtcse.search.faiss_index.dequantize` needs them to turn codes back into vectors.
    """
    from numpy.lib.format import open_memmap
    from sentence_transformers.util.quantization import quantize_embeddings

    rows, dim = vectors.shape
    ranges = int8_ranges(vectors, chunk_rows=chunk_rows)
    codes = open_memmap(codes_path, mode="w+", dtype=np.int8, shape=(rows, dim))
    for start in range(0, rows, chunk_rows):
        block = np.asarray(vectors[start : start + chunk_rows], dtype=np.float32)
        codes[start : start + len(block)] = quantize_embeddings(block, precision="int8", ranges=ranges)
    codes.flush()
    del codes
    return ranges


def file_digest(path: Path) -> tuple[int, str]:
    """(size in bytes, sha256 hex) of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


@dataclass
class IndexManifest:
    """What ``manifest.json`` records about an index directory."""

    model: str
    dim: int
    normalized: bool
    kind: str
    rows: int
    nlist: int | None = None
    nprobe: int | None = None
    metric: str = "inner_product"
    source: str | None = None
    empty_lines: int = 0
    calibration: dict = field(default_factory=dict)
    precision: str = "float32"
    rescore_multiplier: int | None = None
    rescore_precision: str | None = None  # "int8" for binary indexes (rescore.npy)
    texts_bytes: int | None = None  # size and checksum of texts.txt, checked on load (None: format 1)
    texts_sha256: str | None = None
    format: str = INDEX_FORMAT
    format_version: int = INDEX_FORMAT_VERSION

    def to_dict(self) -> dict:
        return asdict(self)


def read_manifest(index_dir: str | Path) -> IndexManifest:
    """Read and check ``manifest.json``: a clear error for a missing, foreign or newer-format index."""
    index_dir = Path(index_dir)
    path = index_dir / MANIFEST
    if not path.is_file():
        raise JTCSEError(
            f"{index_dir} is not a jtcse index directory (no {MANIFEST}); build one with `jtcse index build`."
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise JTCSEError(f"Cannot read {path}: {err}") from None
    if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
        raise JTCSEError(f"{path} is not a jtcse index manifest.")
    version = data.get("format_version")
    if not isinstance(version, int) or version > INDEX_FORMAT_VERSION:
        raise JTCSEError(
            f"Index {index_dir} has format version {version}; this jtcse reads versions up to "
            f"{INDEX_FORMAT_VERSION}. Upgrade jtcse, or rebuild the index with this version."
        )
    known = set(IndexManifest.__dataclass_fields__)
    try:
        return IndexManifest(**{key: value for key, value in data.items() if key in known})
    except TypeError as err:
        raise JTCSEError(f"{path} is incomplete: {err}") from None


@dataclass
class Hit:
    """One search result."""

    rank: int
    score: float
    row: int
    line: int  # 1-based line number in the source file
    text: str


class SearchIndex:
    """A loaded index directory: search by vectors or by query texts, results with their sentences."""

    def __init__(self, index_dir: str | Path, use_gpu: bool | None = None):
        self.dir = Path(index_dir)
        self.manifest = read_manifest(self.dir)
        faiss = import_faiss()
        on_disk = self.manifest.kind == "ivf" and self.manifest.format_version >= 3
        for name in (INDEX_FILE, TEXTS_FILE, ROWS_FILE) + ((IVF_DATA_FILE,) if on_disk else ()):
            if not (self.dir / name).is_file():
                raise JTCSEError(f"Index {self.dir} is missing {name}; rebuild it with `jtcse index build`.")
        self._check_texts()
        check_precision(self.manifest.precision)
        binary = self.manifest.precision == "binary"
        try:
            if binary:
                self.index = faiss.read_index_binary(str(self.dir / INDEX_FILE))
            else:  # on-disk inverted lists are looked for beside index.faiss, wherever the folder was moved
                self.index = faiss.read_index(str(self.dir / INDEX_FILE), faiss.IO_FLAG_ONDISK_SAME_DIR)
        except RuntimeError as err:
            raise JTCSEError(
                f"Cannot read {self.dir / INDEX_FILE} (corrupt or truncated?): {str(err).splitlines()[0]}"
            ) from None
        index_dim = self.index.d if not binary else self.manifest.dim + (-self.manifest.dim) % 8
        if (
            (binary and self.index.d != index_dim)
            or (not binary and self.index.d != self.manifest.dim)
            or (self.index.ntotal != self.manifest.rows)
        ):
            raise JTCSEError(
                f"Index {self.dir}: index.faiss holds {self.index.ntotal} {self.index.d}-d vectors but the manifest "
                f"says {self.manifest.rows} {self.manifest.dim}-d ones; rebuild it."
            )
        self.rows = np.load(self.dir / ROWS_FILE, mmap_mode="r")
        self.rescore = self._load_rescore() if binary else None
        if self.manifest.nprobe:
            set_nprobe(self.index, self.manifest.nprobe)
        if want_gpu(use_gpu) and self.manifest.precision == "float32":  # pragma: no cover - no GPU in CI
            self.index = faiss.index_cpu_to_all_gpus(self.index)
            if self.manifest.nprobe:
                set_nprobe(self.index, min(self.manifest.nprobe, GPU_MAX_NPROBE))
        self._models: dict[str, Any] = {}  # loaded query encoders by identity

    def __len__(self) -> int:
        return self.manifest.rows

    def _load_rescore(self) -> tuple[np.ndarray, np.ndarray]:
        """A binary index's int8 rescoring vectors (memory-mapped) and their ranges, checked against the manifest."""
        paths = (self.dir / RESCORE_FILE, self.dir / RANGES_FILE)
        if not all(path.is_file() for path in paths):
            raise JTCSEError(
                f"Binary index {self.dir} has no {RESCORE_FILE} (int8 rescoring vectors; indexes built by older jtcse "
                "versions lack them); rebuild it with `jtcse index build --precision binary --overwrite`."
            )
        try:
            codes = np.load(paths[0], mmap_mode="r")
            ranges = np.load(paths[1])
        except (OSError, ValueError) as err:
            raise JTCSEError(
                f"Cannot read the rescoring vectors of {self.dir} (corrupt or truncated?): {err}"
            ) from None
        rows, dim = self.manifest.rows, self.manifest.dim
        if codes.shape != (rows, dim) or codes.dtype != np.int8 or ranges.shape != (2, dim):
            raise JTCSEError(
                f"Index {self.dir}: {RESCORE_FILE} holds {codes.shape} {codes.dtype} values, the manifest says "
                f"({rows}, {dim}) int8; rebuild it with `jtcse index build --overwrite`."
            )
        return codes, ranges.astype(np.float32)

    def _check_texts(self) -> None:
        """texts.txt must be the file written at build time (size and sha256 in the manifest)."""
        expected = self.manifest.texts_bytes
        if expected is None:  # format 1 manifests carry no checksum
            return
        path = self.dir / TEXTS_FILE
        size = path.stat().st_size
        if size != expected:
            raise JTCSEError(
                f"Index {self.dir}: {TEXTS_FILE} is {size} bytes but was {expected} when built (truncated or "
                "edited); hits would show wrong or empty sentences. Rebuild the index with `jtcse index build --overwrite`."
            )
        if self.manifest.texts_sha256 and file_digest(path)[1] != self.manifest.texts_sha256:
            raise JTCSEError(
                f"Index {self.dir}: {TEXTS_FILE} does not match the checksum recorded when it was built (edited or "
                "corrupt); rebuild the index with `jtcse index build --overwrite`."
            )

    def text(self, row: int) -> str:
        with (self.dir / TEXTS_FILE).open("rb") as handle:
            return read_line_at(handle, self.rows[row]["offset"])

    def search_vectors(
        self, queries: np.ndarray, k: int = 10, nprobe: int | None = None, rescore_multiplier: int | None = None
    ):
        """Top-``k`` (scores, rows) for query vectors ``(n, dim)``; rows are -1 past the index size.

        Queries are L2-normalised when the index was built normalised. ``nprobe`` (IVF indexes) and
        ``rescore_multiplier`` (binary indexes) override the index's own for this search.
        """
        queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        if queries.shape[1] != self.manifest.dim:
            raise JTCSEError(
                f"Query vectors are {queries.shape[1]}-d but index {self.dir} holds {self.manifest.dim}-d vectors "
                f"(model {self.manifest.model})."
            )
        if k < 1:
            raise JTCSEError(f"k must be at least 1, not {k}")
        queries = np.ascontiguousarray(queries.copy())
        if self.manifest.normalized:
            import_faiss().normalize_L2(queries)
        if rescore_multiplier is not None:
            if self.manifest.precision != "binary":
                raise JTCSEError(
                    f"--rescore-multiplier applies to binary indexes; {self.dir} is a {self.manifest.precision} index."
                )
            if rescore_multiplier < 1:
                raise JTCSEError(f"--rescore-multiplier must be at least 1, not {rescore_multiplier}")
        if self.manifest.precision != "float32":
            if nprobe is not None:
                raise JTCSEError(
                    f"--nprobe applies to IVF indexes; {self.dir} is an exact {self.manifest.precision} index."
                )
            multiplier = rescore_multiplier or self.manifest.rescore_multiplier or DEFAULT_RESCORE_MULTIPLIER
            return search_quantized(
                self.index, queries, k, self.manifest.precision, rescore=self.rescore, rescore_multiplier=multiplier
            )
        if nprobe is not None:
            if self.manifest.kind != "ivf":
                raise JTCSEError(f"--nprobe applies to IVF indexes; {self.dir} is a flat (exact) index.")
            set_nprobe(self.index, max(1, min(nprobe, self.manifest.nlist or 1)))
        try:
            return self.index.search(queries, k)
        finally:
            if nprobe is not None and self.manifest.nprobe:
                set_nprobe(self.index, self.manifest.nprobe)

    def model(self, model: Any = None, *, model_name: str | None = None, allow_other_model: bool = False, device=None):
        """The SentenceTransformer for queries: the index's own model unless another is given.

        A model other than the one the index was built with is refused (naming both) unless
        ``allow_other_model``; its vectors must have the index's dimension either way.
        """
        wanted = self.manifest.model
        if model is None:
            model = wanted
        if isinstance(model, (str, os.PathLike)):
            model_name = model_name or model_identity(str(model))
        if model_name is not None and model_name != wanted and not allow_other_model:
            raise JTCSEError(
                f"Index {self.dir} was built with model {wanted}, but the queries would be encoded with "
                f"{model_name}. Use the same model (leave the model out to use {wanted})."
            )
        if isinstance(model, (str, os.PathLike)) and model_name in self._models:
            return self._models[model_name]
        loaded, name = resolve_model(model, model_name or "the given model", device)
        dim = loaded.get_embedding_dimension()
        if dim is not None and dim != self.manifest.dim:
            raise JTCSEError(
                f"Model {name} makes {dim}-d vectors but index {self.dir} holds {self.manifest.dim}-d vectors "
                f"(built with {wanted})."
            )
        if isinstance(model, (str, os.PathLike)):
            self._models[name] = loaded
        return loaded

    def search(
        self,
        queries: str | list[str],
        k: int = 10,
        *,
        model: Any = None,
        model_name: str | None = None,
        allow_other_model: bool = False,
        nprobe: int | None = None,
        rescore_multiplier: int | None = None,
        batch_size: int = 64,
    ) -> list[list[Hit]]:
        """Encode ``queries`` with the index's model and return their top-``k`` hits with sentences."""
        if isinstance(queries, str):
            queries = [queries]
        queries = [q.strip() for q in queries]
        if not queries or not all(queries):
            raise JTCSEError("Give at least one non-empty query.")
        encoder = self.model(model, model_name=model_name, allow_other_model=allow_other_model)
        vectors = encoder.encode(queries, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
        scores, ids = self.search_vectors(vectors, k, nprobe=nprobe, rescore_multiplier=rescore_multiplier)
        results: list[list[Hit]] = []
        with (self.dir / TEXTS_FILE).open("rb") as handle:
            for row_scores, row_ids in zip(scores, ids, strict=True):
                hits = []
                for rank, (score, row) in enumerate(zip(row_scores.tolist(), row_ids.tolist(), strict=True), start=1):
                    if row < 0:
                        break
                    record = self.rows[row]
                    hits.append(Hit(rank, score, row, int(record["line"]), read_line_at(handle, record["offset"])))
                results.append(hits)
        return results
