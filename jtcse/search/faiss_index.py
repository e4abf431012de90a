"""Arrays → faiss index, in memory: build, calibrate and search; no files are read or written here.

Scores are inner products; with normalisation on (the default) that is cosine similarity.
Small corpora (``rows <= ivf_threshold``) get an exact ``IndexFlatIP``; larger ones an
``IndexIVFFlat`` with ``nlist ≈ 4·√rows`` lists, its k-means trained on a random sample, and
``nprobe`` calibrated at build time as the smallest value whose recall@k against exact search
reaches ``target_recall`` on corpus rows left out of the k-means sample where possible (their own hit excluded).
faiss-gpu is used when it is installed and sees a GPU.

Precision (:data:`INDEX_PRECISIONS`): ``float32``; ``binary`` is sentence-transformers' embedding quantization
(``sentence_transformers.util.quantization``) in the layout its embedding-quantization guide recommends,
binary search with int8 rescoring: ``quantize_embeddings(..., "ubinary")`` packs the sign bits into a
faiss ``IndexBinaryFlat`` held in memory (1/32 of float32, exact Hamming search), and
``quantize_embeddings(..., "int8", ranges=...)`` gives one int8 vector per row (1/4 of float32; an index
directory keeps them on disk, memory-mapped, see :mod:`jtcse.search.index`). A query fetches
``rescore_multiplier × k`` candidates by Hamming distance, and only those rows are read and rescored as
float query · dequantized int8 vector. (Rescoring against the stored bits, as ``semantic_search_faiss``
does with a binary index alone, plateaus at recall@10 ≈ 0.57 of float search on MiniLM embeddings of
wiki12k however many candidates are fetched: the bits cannot order the candidates.)
``int8`` is faiss's 8-bit scalar quantizer (``IndexScalarQuantizer``, QT_8bit: 256 steps between each
dimension's min and max; 1/4 of float32, all in memory), whose inner products use the decoded vectors, so
no rescoring is needed. (sentence-transformers' own faiss int8 path keeps uint8 codes in a float
``IndexFlatIP`` and ranks candidates by the inner product of offset codes; measured recall@10 of 0.01 at
4× over-fetch on random unit vectors, so it is not used.) Quantized indexes are exact (flat).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jtcse.errors import JTCSEError

INDEX_PRECISIONS = ("float32", "int8", "binary")
"""What an index stores per vector (not training's ``auto``/``fp32``/``fp16``/``bf16``)."""
# Binary: candidates fetched per hit before int8 rescoring. Chosen by scripts/bench_search.py --quantized
# (docs/search.md): the smallest tried value with recall@10 >= 0.95 of float search, with a margin, on real embeddings.
DEFAULT_RESCORE_MULTIPLIER = 50
DEFAULT_IVF_THRESHOLD = 50_000
GPU_MAX_NPROBE = 2048  # faiss-gpu limit on lists visited (and results) per query
DEFAULT_TARGET_RECALL = 0.95


def import_faiss():
    """The ``faiss`` module, or a clear error naming the package to install."""
    try:
        import faiss
    except ImportError:  # pragma: no cover - faiss-cpu is a dependency
        raise JTCSEError("Search needs faiss: pip install faiss-cpu (or faiss-gpu-cu12 for GPUs).") from None
    return faiss


def gpu_available() -> bool:
    """True when the installed faiss has GPU support and sees at least one GPU."""
    faiss = import_faiss()
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def want_gpu(use_gpu: bool | None) -> bool:
    """Whether to use a GPU: ``None`` means when there is one; ``True`` without one is an error."""
    if use_gpu is None:
        return gpu_available()
    if use_gpu and not gpu_available():
        raise JTCSEError("A GPU index was asked for, but faiss has no GPU support here (install faiss-gpu-cu12).")
    return bool(use_gpu)


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
    faiss = import_faiss()
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        ivf.nprobe = int(nprobe)
    elif hasattr(index, "nprobe"):  # GPU IVF indexes
        index.nprobe = int(nprobe)


def exact_search(queries: np.ndarray, vectors: np.ndarray, k: int, chunk_rows: int = 65_536):
    """Exact top-k inner-product search over (possibly memory-mapped) ``vectors``, chunk by chunk."""
    faiss = import_faiss()
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
    faiss = import_faiss()
    rows, dim = vectors.shape
    if rows == 0:
        raise JTCSEError("Nothing to index: no vectors.")
    gpu = want_gpu(use_gpu)
    if rows <= ivf_threshold:
        index, kind = faiss.IndexFlatIP(dim), "flat"
        nlist = None
    else:
        kind = "ivf"
        nlist = check_nlist(nlist, rows)
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
    if gpu:  # pragma: no cover - no GPU in CI
        index = faiss.index_cpu_to_all_gpus(index)
    sample = train_ivf(index, vectors, nlist, train_size=train_size, seed=seed) if kind == "ivf" else None
    for start in range(0, rows, add_chunk_rows):
        index.add(np.ascontiguousarray(vectors[start : start + add_chunk_rows], dtype=np.float32))
    calibration: dict = {}
    if kind == "ivf":
        nprobe, calibration = choose_nprobe(
            index, vectors, nlist, nprobe, target_recall=target_recall, seed=seed, sample=sample, gpu=gpu
        )
    if gpu:  # pragma: no cover
        index = faiss.index_gpu_to_cpu(index)
    return BuiltIndex(index=index, kind=kind, nlist=nlist, nprobe=nprobe, calibration=calibration)


def check_nlist(nlist: int | None, rows: int) -> int:
    """``nlist`` (default :func:`default_nlist`), checked to lie between 1 and ``rows``."""
    nlist = nlist or default_nlist(rows)
    if not 1 <= nlist <= rows:
        raise JTCSEError(f"nlist must be between 1 and the number of vectors ({rows}), not {nlist}")
    return nlist


def train_ivf(
    index: Any, vectors: np.ndarray, nlist: int, *, train_size: int | None = None, seed: int = 0
) -> np.ndarray:
    """Train an IVF ``index``'s k-means on ``train_size`` random rows of ``vectors`` (default ``64·nlist``);
    returns the (sorted) rows sampled, which calibration keeps its queries out of."""
    rows = len(vectors)
    sample = np.sort(np.random.default_rng(seed).choice(rows, size=min(rows, train_size or 64 * nlist), replace=False))
    index.train(np.ascontiguousarray(vectors[sample], dtype=np.float32))
    return sample


def choose_nprobe(
    index: Any,
    vectors: np.ndarray,
    nlist: int,
    nprobe: int | None,
    *,
    target_recall: float = DEFAULT_TARGET_RECALL,
    seed: int = 0,
    sample: np.ndarray | None = None,
    gpu: bool = False,
) -> tuple[int, dict]:
    """``nprobe`` as given, or calibrated (:func:`calibrate_nprobe`), capped to ``nlist`` (and 2048 on a GPU);
    set on ``index``. Returns it with the calibration record (empty when given)."""
    calibration: dict = {}
    if nprobe is None:
        # GPU IVF searches visit at most 2048 lists.
        max_nprobe = min(nlist, GPU_MAX_NPROBE) if gpu else nlist
        nprobe, calibration = calibrate_nprobe(
            index, vectors, max_nprobe, target_recall=target_recall, seed=seed, trained_on=sample
        )
    nprobe = max(1, min(int(nprobe), nlist, GPU_MAX_NPROBE if gpu else nlist))
    set_nprobe(index, nprobe)
    return nprobe, calibration


def check_precision(precision: str) -> str:
    """``precision`` if it is one of :data:`INDEX_PRECISIONS`; a clear error naming them otherwise."""
    if precision not in INDEX_PRECISIONS:
        raise JTCSEError(f"Unknown precision {precision!r}; valid ones: {', '.join(INDEX_PRECISIONS)}.")
    return precision


def build_quantized_index(vectors: np.ndarray, precision: str, *, chunk_rows: int = 65_536, seed: int = 0) -> Any:
    """An exact faiss index over ``vectors`` at ``precision`` "binary" or "int8" (see the module docstring).

    ``binary``: ``quantize_embeddings(block, "ubinary")`` (sign bits, 8 per byte) in an ``IndexBinaryFlat``;
    its rescoring vectors are :func:`int8_ranges` codes (:func:`jtcse.search.index.write_rescore_vectors`).
    ``int8``: ``IndexScalarQuantizer`` QT_8bit, its per-dimension min/max taken from up to 100k random rows.
    """
    from sentence_transformers.util.quantization import quantize_embeddings

    faiss = import_faiss()
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


def int8_ranges(vectors: np.ndarray, *, chunk_rows: int = 65_536) -> np.ndarray:
    """``(2, dim)``: each dimension's min and max over all rows (read in chunks), the ``ranges`` that
    ``quantize_embeddings(..., "int8", ranges=...)`` and :func:`dequantize` take."""
    rows, dim = vectors.shape
    low = np.full(dim, np.inf, dtype=np.float32)
    high = np.full(dim, -np.inf, dtype=np.float32)
    for start in range(0, rows, chunk_rows):
        block = np.asarray(vectors[start : start + chunk_rows], dtype=np.float32)
        low, high = np.minimum(low, block.min(axis=0)), np.maximum(high, block.max(axis=0))
    return np.vstack([low, high])


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
    rows of ``rescore`` = (int8 codes, ranges) (:func:`int8_ranges`; a memmap such as an index directory's
    ``rescore.npy`` works: only the candidates are read) are dequantized and rescored as float query · vector, queries in blocks of at most
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
