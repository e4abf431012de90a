"""A faiss index over an encoded corpus, stored in a self-describing directory.

Scores are inner products; with normalisation on (the default) that is cosine similarity.
Small corpora (``rows <= ivf_threshold``) get an exact ``IndexFlatIP``; larger ones an
``IndexIVFFlat`` with ``nlist ≈ 4·√rows`` lists, its k-means trained on a random sample, and
``nprobe`` calibrated at build time as the smallest value whose recall@k against exact search
reaches ``target_recall`` on corpus rows left out of the k-means sample where possible (their own hit excluded).
faiss-gpu is used when it is installed and sees a GPU; the file on disk is always a CPU index.

Precision: ``float32``; ``binary`` is sentence-transformers' embedding quantization
(``sentence_transformers.util.quantization``) in the layout its embedding-quantization guide recommends,
binary search with int8 rescoring: ``quantize_embeddings(..., "ubinary")`` packs the sign bits into a
faiss ``IndexBinaryFlat`` held in memory (1/32 of float32, exact Hamming search), and
``quantize_embeddings(..., "int8", ranges=...)`` writes one int8 vector per row to ``rescore.npy``
(1/4 of float32) that stays on disk and is memory-mapped at search time. A query fetches
``rescore_multiplier × k`` candidates by Hamming distance, and only those rows are read and rescored as
float query · dequantized int8 vector. (Rescoring against the stored bits, as ``semantic_search_faiss``
does with a binary index alone, plateaus at recall@10 ≈ 0.57 of float search on MiniLM embeddings of
wiki12k however many candidates are fetched: the bits cannot order the candidates.)
``int8`` is faiss's 8-bit scalar quantizer (``IndexScalarQuantizer``, QT_8bit: 256 steps between each
dimension's min and max; 1/4 of float32, all in memory), whose inner products use the decoded vectors, so
no rescoring is needed. (sentence-transformers' own faiss int8 path keeps uint8 codes in a float
``IndexFlatIP`` and ranks candidates by the inner product of offset codes; measured recall@10 of 0.01 at
4× over-fetch on random unit vectors, so it is not used.) Quantized indexes are exact (flat).

Index directory (format version 2; version 1 directories still load as float32 without a texts check)::

    manifest.json   format, format_version, model, dim, normalized, kind, precision, nlist, nprobe, rows,
                    texts_bytes, texts_sha256, source...
    index.faiss     the faiss index (CPU form; a binary index for precision "binary")
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
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_write_text, locks_output
from jtcse.search.encode import (
    encode_file,
    meta_path_for,
    model_identity,
    read_meta,
    resolve_model,
    result_from_meta,
    rows_path_for,
    run_settings,
    same_settings,
)
from jtcse.search.lines import ROW_DTYPE, count_rows, iter_chunks, read_line_at

INDEX_FORMAT = "jtcse-index"
INDEX_FORMAT_VERSION = 2
PRECISIONS = ("float32", "int8", "binary")
# Binary: candidates fetched per hit before int8 rescoring. Chosen by scripts/bench_search.py --quantized
# (docs/search.md): the smallest tried value with recall@10 >= 0.95 of float search, with a margin, on real embeddings.
DEFAULT_RESCORE_MULTIPLIER = 50
MANIFEST = "manifest.json"
INDEX_FILE = "index.faiss"
TEXTS_FILE = "texts.txt"
ROWS_FILE = "rows.npy"
RESCORE_FILE = "rescore.npy"
RANGES_FILE = "rescore_ranges.npy"
EMBEDDINGS_FILE = "embeddings.npy"
# encode_file's outputs for EMBEDDINGS_FILE: vectors, progress/meta, row table.
_EMBEDDING_FILES = (EMBEDDINGS_FILE, meta_path_for(EMBEDDINGS_FILE).name, rows_path_for(EMBEDDINGS_FILE).name)

DEFAULT_IVF_THRESHOLD = 50_000
GPU_MAX_NPROBE = 2048  # faiss-gpu limit on lists visited (and results) per query
DEFAULT_TARGET_RECALL = 0.95


def _faiss():
    try:
        import faiss
    except ImportError:  # pragma: no cover - faiss-cpu is a dependency
        raise JTCSEError("Search needs faiss: pip install faiss-cpu (or faiss-gpu-cu12 for GPUs).") from None
    return faiss


def gpu_available() -> bool:
    """True when the installed faiss has GPU support and sees at least one GPU."""
    faiss = _faiss()
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def _want_gpu(use_gpu: bool | None) -> bool:
    if use_gpu is None:
        return gpu_available()
    if use_gpu and not gpu_available():
        raise JTCSEError("A GPU index was asked for, but faiss has no GPU support here (install faiss-gpu-cu12).")
    return bool(use_gpu)


# ---------------------------------------------------------------- vectors → faiss index


@dataclass
class BuiltIndex:
    """A trained and filled faiss index with how it was made."""

    index: Any
    kind: str  # "flat" or "ivf"
    nlist: int | None = None
    nprobe: int | None = None
    calibration: dict = field(default_factory=dict)


def default_nlist(rows: int) -> int:
    """Number of IVF lists: about 4·√rows, and at most rows/39 so k-means has ≥39 points per list."""
    return max(1, min(int(round(4 * math.sqrt(rows))), rows // 39))


def set_nprobe(index: Any, nprobe: int) -> None:
    """Set how many inverted lists an IVF search visits (no-op for a flat index)."""
    faiss = _faiss()
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        ivf.nprobe = int(nprobe)
    elif hasattr(index, "nprobe"):  # GPU IVF indexes
        index.nprobe = int(nprobe)


def exact_search(queries: np.ndarray, vectors: np.ndarray, k: int, chunk_rows: int = 65_536):
    """Exact top-k inner-product search over (possibly memory-mapped) ``vectors``, chunk by chunk."""
    faiss = _faiss()
    heap = faiss.ResultHeap(len(queries), k, keep_max=True)
    for start in range(0, len(vectors), chunk_rows):
        block = np.ascontiguousarray(vectors[start : start + chunk_rows], dtype=np.float32)
        scores, ids = faiss.knn(queries, block, min(k, len(block)), metric=faiss.METRIC_INNER_PRODUCT)
        heap.add_result(scores, ids + start)
    heap.finalize()
    return heap.D, heap.I


def recall_at_k(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean over queries of |found ∩ truth| / |truth|, ids of -1 (no result) never matching."""
    valid = truth >= 0
    matched = ((found[:, :, None] == truth[:, None, :]) & valid[:, None, :]).any(axis=1)
    return float(np.mean(matched.sum(axis=1) / np.maximum(valid.sum(axis=1), 1)))


def _drop_self(ids: np.ndarray, own: np.ndarray, k: int) -> np.ndarray:
    """From top-(k+1) lists, remove each query's own id (or the last one if absent); keep k."""
    keep = ids != own[:, None]
    keep[keep.all(axis=1), -1] = False
    return ids[keep].reshape(len(ids), k)


def calibrate_nprobe(
    index: Any,
    vectors: np.ndarray,
    max_nprobe: int,
    *,
    k: int = 10,
    target_recall: float = DEFAULT_TARGET_RECALL,
    queries: int = 512,
    seed: int = 0,
    trained_on: np.ndarray | None = None,
) -> tuple[int, dict]:
    """Smallest nprobe whose recall@k (vs. exact search) reaches ``target_recall`` with a safety margin.

    Queries are ``queries`` random corpus rows, taken from rows outside ``trained_on`` (the k-means
    sample) when there are enough, so they stand for unseen queries; each row's own hit is removed
    from both result lists, so the rest measures how well the IVF finds true neighbours.
    The measured recall is an estimate from ``queries·k`` neighbours, so it must reach
    ``target + 2·sqrt(target·(1 − target) / (queries·k))`` (two binomial standard errors): the
    nprobe found then meets the target on unseen queries, not just on this sample.
    Doubling, then bisection, up to ``max_nprobe`` (normally nlist, where IVF-Flat is exhaustive).
    """
    rng = np.random.default_rng(seed)
    pool = np.arange(len(vectors))
    if trained_on is not None and len(vectors) - len(trained_on) >= queries:
        pool = np.setdiff1d(pool, trained_on, assume_unique=True)
    own = np.sort(rng.choice(pool, size=min(queries, len(pool)), replace=False))
    xq = np.ascontiguousarray(vectors[own], dtype=np.float32)
    k = min(k, len(vectors) - 1)
    if k < 1:
        return 1, {"nprobe": 1, "recall": 1.0, "tried": {}}
    _, truth = exact_search(xq, vectors, k + 1)
    truth = _drop_self(truth, own, k)
    margin = 2 * math.sqrt(max(target_recall * (1 - target_recall), 0.0) / (len(own) * k))
    needed = target_recall + margin
    tried: dict[int, float] = {}

    def recall(nprobe: int) -> float:
        if nprobe not in tried:
            set_nprobe(index, nprobe)
            _, found = index.search(xq, k + 1)
            tried[nprobe] = recall_at_k(_drop_self(found, own, k), truth)
        return tried[nprobe]

    low, high = 0, 1
    while high < max_nprobe and recall(high) < needed:
        low, high = high, min(2 * high, max_nprobe)
    while high - low > 1:  # recall(low) < needed <= recall(high), or high == max_nprobe
        middle = (low + high) // 2
        if recall(middle) >= needed:
            high = middle
        else:
            low = middle
    set_nprobe(index, high)
    info = {
        "nprobe": high,
        "recall": recall(high),
        "target": target_recall,
        "required": round(needed, 4),
        "k": k,
        "queries": len(own),
        "held_out": len(pool) < len(vectors),
    }
    return high, {**info, "tried": dict(sorted(tried.items()))}


def build_faiss_index(
    vectors: np.ndarray,
    *,
    ivf_threshold: int = DEFAULT_IVF_THRESHOLD,
    nlist: int | None = None,
    nprobe: int | None = None,
    target_recall: float = DEFAULT_TARGET_RECALL,
    train_size: int | None = None,
    seed: int = 0,
    use_gpu: bool | None = None,
    add_chunk_rows: int = 65_536,
) -> BuiltIndex:
    """Index ``vectors`` (``(rows, dim)``, may be a memmap) for inner-product search.

    ``rows <= ivf_threshold``: exact flat index. Otherwise IVF-Flat with ``nlist`` lists (default
    :func:`default_nlist`) trained on ``train_size`` random rows (default ``64·nlist``), and ``nprobe``
    given or calibrated to ``target_recall``. Vectors are added ``add_chunk_rows`` at a time.
    """
    faiss = _faiss()
    rows, dim = vectors.shape
    if rows == 0:
        raise JTCSEError("Nothing to index: no vectors.")
    gpu = _want_gpu(use_gpu)
    if rows <= ivf_threshold:
        index, kind = faiss.IndexFlatIP(dim), "flat"
        nlist = None
    else:
        kind = "ivf"
        nlist = nlist or default_nlist(rows)
        if not 1 <= nlist <= rows:
            raise JTCSEError(f"nlist must be between 1 and the number of vectors ({rows}), not {nlist}")
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
    if gpu:  # pragma: no cover - no GPU in CI
        index = faiss.index_cpu_to_all_gpus(index)
    if kind == "ivf":
        sample_rows = min(rows, train_size or 64 * nlist)
        sample = np.sort(np.random.default_rng(seed).choice(rows, size=sample_rows, replace=False))
        index.train(np.ascontiguousarray(vectors[sample], dtype=np.float32))
    for start in range(0, rows, add_chunk_rows):
        index.add(np.ascontiguousarray(vectors[start : start + add_chunk_rows], dtype=np.float32))
    calibration: dict = {}
    if kind == "ivf":
        if nprobe is None:
            # GPU IVF searches visit at most 2048 lists.
            max_nprobe = min(nlist, GPU_MAX_NPROBE) if gpu else nlist
            nprobe, calibration = calibrate_nprobe(
                index, vectors, max_nprobe, target_recall=target_recall, seed=seed, trained_on=sample
            )
        nprobe = max(1, min(int(nprobe), nlist, GPU_MAX_NPROBE if gpu else nlist))
        set_nprobe(index, nprobe)
    if gpu:  # pragma: no cover
        index = faiss.index_gpu_to_cpu(index)
    return BuiltIndex(index=index, kind=kind, nlist=nlist, nprobe=nprobe, calibration=calibration)


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise JTCSEError(f"Unknown precision {precision!r}; valid ones: {', '.join(PRECISIONS)}.")
    return precision


def build_quantized_index(vectors: np.ndarray, precision: str, *, chunk_rows: int = 65_536, seed: int = 0) -> Any:
    """An exact faiss index over ``vectors`` at ``precision`` "binary" or "int8" (see the module docstring).

    ``binary``: ``quantize_embeddings(block, "ubinary")`` (sign bits, 8 per byte) in an ``IndexBinaryFlat``;
    its rescoring vectors come from :func:`write_rescore_vectors`.
    ``int8``: ``IndexScalarQuantizer`` QT_8bit, its per-dimension min/max taken from up to 100k random rows.
    """
    from sentence_transformers.util.quantization import quantize_embeddings

    faiss = _faiss()
    rows, dim = vectors.shape
    if rows == 0:
        raise JTCSEError("Nothing to index: no vectors.")
    if precision == "binary":
        index = faiss.IndexBinaryFlat(((dim + 7) // 8) * 8)
    else:
        index = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
        sample = np.sort(np.random.default_rng(seed).choice(rows, size=min(rows, 100_000), replace=False))
        index.train(np.ascontiguousarray(vectors[sample], dtype=np.float32))
    for start in range(0, rows, chunk_rows):
        block = np.ascontiguousarray(vectors[start : start + chunk_rows], dtype=np.float32)
        index.add(quantize_embeddings(block, precision="ubinary") if precision == "binary" else block)
    return index


def write_rescore_vectors(vectors: np.ndarray, codes_path: str | Path, *, chunk_rows: int = 65_536) -> np.ndarray:
    """Write ``vectors`` as int8 (``quantize_embeddings(..., "int8")``) to the ``.npy`` file ``codes_path``.

    The ranges are each dimension's min and max over all rows (read in chunks); they are returned, and
    :func:`dequantize` needs them to turn codes back into vectors.
    """
    from numpy.lib.format import open_memmap
    from sentence_transformers.util.quantization import quantize_embeddings

    rows, dim = vectors.shape
    low = np.full(dim, np.inf, dtype=np.float32)
    high = np.full(dim, -np.inf, dtype=np.float32)
    for start in range(0, rows, chunk_rows):
        block = np.asarray(vectors[start : start + chunk_rows], dtype=np.float32)
        low, high = np.minimum(low, block.min(axis=0)), np.maximum(high, block.max(axis=0))
    ranges = np.vstack([low, high])
    codes = open_memmap(codes_path, mode="w+", dtype=np.int8, shape=(rows, dim))
    for start in range(0, rows, chunk_rows):
        block = np.asarray(vectors[start : start + chunk_rows], dtype=np.float32)
        codes[start : start + len(block)] = quantize_embeddings(block, precision="int8", ranges=ranges)
    codes.flush()
    del codes
    return ranges


def dequantize(codes: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """float32 vectors from ``quantize_embeddings(..., "int8", ranges)`` codes: the middle of each code's step."""
    steps = (ranges[1] - ranges[0]) / 255
    steps = np.where(steps == 0, 1, steps).astype(np.float32)
    return (codes.astype(np.float32) + 128.5) * steps + ranges[0]


def search_quantized(
    index: Any,
    queries: np.ndarray,
    k: int,
    precision: str,
    *,
    rescore: tuple[np.ndarray, np.ndarray] | None = None,
    rescore_multiplier: int = DEFAULT_RESCORE_MULTIPLIER,
    block_floats: int = 1 << 22,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` (scores, rows) from a :func:`build_quantized_index` index for float ``queries``.

    ``binary``: the binary query fetches ``rescore_multiplier × k`` candidates by Hamming distance; those
    rows of ``rescore`` = (int8 codes, ranges) from :func:`write_rescore_vectors` (a memmap: only the
    candidates are read) are dequantized and rescored as float query · vector, queries in blocks of at most
    ``block_floats`` dequantized numbers. ``int8``: inner products with the decoded vectors.
    Rows are -1 (score -inf) past the index size.
    """
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    if precision == "int8":
        return index.search(queries, k)
    if rescore is None:
        raise ValueError("a binary index needs its int8 rescoring vectors (rescore=(codes, ranges))")
    from sentence_transformers.util.quantization import quantize_embeddings

    codes, ranges = rescore
    fetch = max(k, min(k * rescore_multiplier, index.ntotal))
    _, candidates = index.search(quantize_embeddings(queries, precision="ubinary"), fetch)
    scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    ids = np.full((len(queries), k), -1, dtype=np.int64)
    step = max(1, block_floats // (fetch * codes.shape[1]))
    for start in range(0, len(queries), step):
        block = candidates[start : start + step]
        valid = block >= 0
        vectors = dequantize(codes[np.where(valid, block, 0).ravel()], ranges).reshape(*block.shape, -1)
        rescored = np.einsum("qd,qcd->qc", queries[start : start + step], vectors)
        rescored[~valid] = -np.inf
        order = np.argsort(-rescored, axis=1, kind="stable")[:, :k]
        top = np.take_along_axis(rescored, order, axis=1)
        found = np.where(np.isfinite(top), np.take_along_axis(block, order, axis=1), -1)
        scores[start : start + step, : order.shape[1]] = top
        ids[start : start + step, : order.shape[1]] = found
    return scores, ids


def file_digest(path: Path) -> tuple[int, str]:
    """(size in bytes, sha256 hex) of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


# ---------------------------------------------------------------- the index directory


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
        raise JTCSEError(f"{index_dir} is not a jtcse index directory (no {MANIFEST}); build one with `jtcse index build`.")
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
        faiss = _faiss()
        for name in (INDEX_FILE, TEXTS_FILE, ROWS_FILE):
            if not (self.dir / name).is_file():
                raise JTCSEError(f"Index {self.dir} is missing {name}; rebuild it with `jtcse index build`.")
        self._check_texts()
        check_precision(self.manifest.precision)
        binary = self.manifest.precision == "binary"
        try:
            reader = faiss.read_index_binary if binary else faiss.read_index
            self.index = reader(str(self.dir / INDEX_FILE))
        except RuntimeError as err:
            raise JTCSEError(f"Cannot read {self.dir / INDEX_FILE} (corrupt or truncated?): {str(err).splitlines()[0]}") from None
        index_dim = self.index.d if not binary else self.manifest.dim + (-self.manifest.dim) % 8
        if (binary and self.index.d != index_dim) or (not binary and self.index.d != self.manifest.dim) or (
            self.index.ntotal != self.manifest.rows
        ):
            raise JTCSEError(
                f"Index {self.dir}: index.faiss holds {self.index.ntotal} {self.index.d}-d vectors but the manifest "
                f"says {self.manifest.rows} {self.manifest.dim}-d ones; rebuild it."
            )
        self.rows = np.load(self.dir / ROWS_FILE, mmap_mode="r")
        self.rescore = self._load_rescore() if binary else None
        if self.manifest.nprobe:
            set_nprobe(self.index, self.manifest.nprobe)
        if _want_gpu(use_gpu) and self.manifest.precision == "float32":  # pragma: no cover - no GPU in CI
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
            raise JTCSEError(f"Cannot read the rescoring vectors of {self.dir} (corrupt or truncated?): {err}") from None
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
            _faiss().normalize_L2(queries)
        if rescore_multiplier is not None:
            if self.manifest.precision != "binary":
                raise JTCSEError(
                    f"--rescore-multiplier applies to binary indexes; {self.dir} is a {self.manifest.precision} index."
                )
            if rescore_multiplier < 1:
                raise JTCSEError(f"--rescore-multiplier must be at least 1, not {rescore_multiplier}")
        if self.manifest.precision != "float32":
            if nprobe is not None:
                raise JTCSEError(f"--nprobe applies to IVF indexes; {self.dir} is an exact {self.manifest.precision} index.")
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
            for row_scores, row_ids in zip(scores, ids):
                hits = []
                for rank, (score, row) in enumerate(zip(row_scores.tolist(), row_ids.tolist()), start=1):
                    if row < 0:
                        break
                    record = self.rows[row]
                    hits.append(Hit(rank, score, row, int(record["line"]), read_line_at(handle, record["offset"])))
                results.append(hits)
        return results


def _copy_texts(source: Path, index_dir: Path, rows: int, chunk_size: int) -> None:
    """Write the non-empty lines of ``source`` to texts.txt and their (line, offset) to rows.npy."""
    from numpy.lib.format import open_memmap

    table = open_memmap(index_dir / ROWS_FILE, mode="w+", dtype=ROW_DTYPE, shape=(rows,))
    done = 0
    position = 0
    with (index_dir / TEXTS_FILE).open("wb") as out:
        for chunk in iter_chunks(source, chunk_size):
            encoded = [(text + "\n").encode("utf-8") for text in chunk.texts]
            lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
            block = table[done : done + len(encoded)]
            block["line"] = chunk.rows["line"]
            block["offset"] = position + np.concatenate(([0], np.cumsum(lengths)[:-1]))
            out.write(b"".join(encoded))
            position += int(lengths.sum())
            done += len(encoded)
    if done != rows:
        raise JTCSEError(f"{source} changed while the index was being built; build again with --overwrite.")
    table.flush()
    del table


@locks_output("index_dir")  # one build per index folder
def build_index(
    model: Any,
    input_path: str | Path,
    index_dir: str | Path,
    *,
    model_name: str | None = None,
    normalize: bool = True,
    batch_size: int = 64,
    chunk_size: int = 8192,
    ivf_threshold: int = DEFAULT_IVF_THRESHOLD,
    nlist: int | None = None,
    nprobe: int | None = None,
    target_recall: float = DEFAULT_TARGET_RECALL,
    train_size: int | None = None,
    use_gpu: bool | None = None,
    device: str | None = None,
    keep_embeddings: bool = False,
    overwrite: bool = False,
    show_progress: bool = True,
    seed: int = 0,
    precision: str = "float32",
    rescore_multiplier: int = DEFAULT_RESCORE_MULTIPLIER,
) -> SearchIndex:
    """Encode ``input_path`` (one sentence per line) and write a searchable index directory.

    Encoding goes to ``index_dir/embeddings.npy`` through :func:`encode_file`, so an interrupted build
    resumes; that file is removed at the end unless ``keep_embeddings``. The manifest is written last:
    a directory without one is not (yet) an index. ``precision`` "int8"/"binary" quantizes the corpus
    (exact search; binary rescores ``rescore_multiplier × k`` Hamming candidates with the float query
    against their int8 vectors in ``rescore.npy``).
    """
    check_precision(precision)
    if rescore_multiplier < 1:
        raise JTCSEError(f"rescore_multiplier must be at least 1, not {rescore_multiplier}")
    started = time.perf_counter()
    index_dir = Path(index_dir)
    input_path = Path(input_path)
    if not input_path.is_file():
        raise JTCSEError(f"Input file not found: {input_path}")
    model, identity = resolve_model(model, model_name, device)
    if (index_dir / MANIFEST).exists():
        if not overwrite:
            raise JTCSEError(f"{index_dir} already holds an index; pass --overwrite to rebuild it.")
        _require_jtcse_index(index_dir)  # only ever delete what is recognisably a jtcse index
        count_rows(input_path)  # a bad input must not cost the user the old index
    if overwrite:
        for name in (MANIFEST, INDEX_FILE, TEXTS_FILE, ROWS_FILE, RESCORE_FILE, RANGES_FILE, *_EMBEDDING_FILES):
            (index_dir / name).unlink(missing_ok=True)
    index_dir.mkdir(parents=True, exist_ok=True)
    embeddings = index_dir / EMBEDDINGS_FILE
    # An earlier, interrupted build left embeddings: reuse them if finished, resume them if not,
    # and start over only if they were made with other settings.
    wanted = run_settings(identity, input_path, embeddings, fp16=False, normalize=normalize)
    previous = read_meta(meta_path_for(embeddings)) if meta_path_for(embeddings).is_file() else None
    matches = previous is not None and same_settings(previous, wanted)
    if matches and previous.get("complete") and embeddings.is_file():
        encoded = result_from_meta(embeddings, previous)
    else:
        encoded = encode_file(
            model,
            input_path,
            embeddings,
            batch_size=batch_size,
            chunk_size=chunk_size,
            normalize=normalize,
            show_progress=show_progress,
            model_name=identity,
            overwrite=not matches,
        )
    _copy_texts(input_path, index_dir, encoded.rows, chunk_size)
    texts_bytes, texts_sha256 = file_digest(index_dir / TEXTS_FILE)
    vectors = np.load(embeddings, mmap_mode="r")
    if precision == "float32":
        built = build_faiss_index(
            vectors,
            ivf_threshold=ivf_threshold,
            nlist=nlist,
            nprobe=nprobe,
            target_recall=target_recall,
            train_size=train_size,
            seed=seed,
            use_gpu=use_gpu,
        )
        _faiss().write_index(built.index, str(index_dir / INDEX_FILE))
    else:
        quantized = build_quantized_index(vectors, precision, seed=seed)
        built = BuiltIndex(index=quantized, kind="flat")
        if precision == "binary":
            _faiss().write_index_binary(quantized, str(index_dir / INDEX_FILE))
            np.save(index_dir / RANGES_FILE, write_rescore_vectors(vectors, index_dir / RESCORE_FILE))
        else:
            _faiss().write_index(quantized, str(index_dir / INDEX_FILE))
    del vectors
    if not keep_embeddings:
        for name in _EMBEDDING_FILES:
            (index_dir / name).unlink(missing_ok=True)
    manifest = IndexManifest(
        model=identity,
        dim=encoded.dim,
        normalized=normalize,
        kind=built.kind,
        rows=encoded.rows,
        nlist=built.nlist,
        nprobe=built.nprobe,
        source=str(input_path.resolve()),
        empty_lines=encoded.empty_lines,
        precision=precision,
        rescore_multiplier=int(rescore_multiplier) if precision == "binary" else None,
        rescore_precision="int8" if precision == "binary" else None,
        texts_bytes=texts_bytes,
        texts_sha256=texts_sha256,
        calibration={**built.calibration, "build_seconds": round(time.perf_counter() - started, 3)},
    )
    atomic_write_text(index_dir / MANIFEST, json.dumps(manifest.to_dict(), indent=2) + "\n")
    index = SearchIndex(index_dir, use_gpu=use_gpu)
    index._models[identity] = model
    return index


def _require_jtcse_index(index_dir: Path) -> None:
    try:
        data = json.loads((index_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        data = None
    if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
        raise JTCSEError(f"{index_dir} has a {MANIFEST} that is not a jtcse index's; not deleting it.")
