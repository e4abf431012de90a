"""Benchmark `jtcse export`: torch vs OpenVINO fp32 / int8 (and ONNX fp32 / int8) for one single-tower model.

All variants run side by side in one process on the same sentences (CPU, --batch-size 32, max length
--max-length 64, every backend pinned to --threads threads: torch.set_num_threads, OpenVINO's
INFERENCE_NUM_THREADS, ONNX Runtime's intra-op threads): encode throughput (best of --repeats), STS-B
dev Spearman (x100) of cosine scores, and the mean / minimum cosine between each variant's and torch's
embeddings. Ratios are throughput over torch's. Targets: ONNX fp32 >= 1.2x torch, ONNX int8 >= 1.8x,
Spearman drop <= 0.3 (fp32) and <= 1.0 (int8) points, cosine(torch, fp32 export) >= 0.9999; OpenVINO
is reported against the same numbers. OpenVINO int8 calibrates on --calibration (default: wiki12k.txt
beside the repository, not the STS-B sentences it is scored on).

    PYTHONPATH=. HF_HUB_OFFLINE=1 python scripts/bench_export.py MODEL [--formats openvino,openvino-int8]

Needs the export extra (pip install jtcse[openvino]; jtcse[onnx] cannot install today, docs/export.md);
exits with one message naming it when missing. MODEL defaults to the embedded MiniLM. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VARIANTS = {
    "onnx": ("onnx", "none"),
    "onnx-int8": ("onnx", "int8"),
    "openvino": ("openvino", "none"),
    "openvino-int8": ("openvino", "int8"),
}


def sts_dev(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    left, right, gold = [], [], []
    with path.open(encoding="utf-8") as handle:
        for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(row) >= 7:
                gold.append(float(row[4]))
                left.append(row[5])
                right.append(row[6])
    return left, right, np.asarray(gold)


def backend_options(fmt: str, threads: int) -> dict:
    """SentenceTransformer keyword arguments that pin the backend to ``threads`` threads."""
    if fmt == "openvino":
        return {"model_kwargs": {"ov_config": {"INFERENCE_NUM_THREADS": threads}}}
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return {"model_kwargs": {"session_options": options}}


def measure(models: dict, left: list[str], right: list[str], gold: np.ndarray, batch_size: int, repeats: int) -> dict:
    """Per model: best-of-``repeats`` encode throughput (rounds alternate between the models, so load on a
    shared machine hits them alike), STS-B Spearman (x100) of cosines, and the normalised vectors."""
    from scipy.stats import spearmanr

    texts = left + right
    results = {name: {"best": float("inf")} for name in models}
    for model in models.values():
        model.encode(texts[:batch_size], batch_size=batch_size)  # warm-up
    for _ in range(repeats):
        for name, model in models.items():
            start = time.perf_counter()
            vectors = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)
            results[name]["best"] = min(results[name]["best"], time.perf_counter() - start)
            results[name]["vectors"] = vectors
    for result in results.values():
        a, b = result["vectors"][: len(left)], result["vectors"][len(left) :]
        result["spearman"] = float(100 * spearmanr((a * b).sum(axis=1), gold).statistic)
        result["sent_per_s"] = len(texts) / result.pop("best")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default=None, help="single-tower checkpoint (default: embedded MiniLM)")
    parser.add_argument("--formats", default="openvino,openvino-int8", help=f"comma list from {', '.join(VARIANTS)}")
    parser.add_argument(
        "--sts-dev",
        default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "stsbenchmark" / "sts-dev.csv"),
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for every backend alike")
    parser.add_argument(
        "--calibration",
        default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "wiki12k.txt"),
        help="OpenVINO int8: sentences to calibrate on, one a line",
    )
    parser.add_argument("-o", "--output", default=None, help="also write the JSON here")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from jtcse.backend_export import check_backend, export_model
    from jtcse.errors import JTCSEError

    variants = [v.strip() for v in args.formats.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        sys.exit(f"bench_export: unknown variant(s) {unknown}; valid ones: {', '.join(VARIANTS)}")
    try:
        for fmt in sorted({VARIANTS[v][0] for v in variants}):
            check_backend(fmt)
    except JTCSEError as err:
        sys.exit(f"bench_export: {err} (see docs/export.md)")

    import torch
    from sentence_transformers import SentenceTransformer

    from jtcse.defaults import default_tower_path

    model_path = args.model or default_tower_path()
    left, right, gold = sts_dev(Path(args.sts_dev))
    torch.set_num_threads(args.threads)
    torch_model = SentenceTransformer(model_path, device="cpu")
    torch_model.max_seq_length = args.max_length
    models = {"torch": torch_model}
    with tempfile.TemporaryDirectory() as tmp:
        for name in variants:
            fmt, quantize = VARIANTS[name]
            calibration = args.calibration if (fmt, quantize) == ("openvino", "int8") else None
            out = export_model(model_path, Path(tmp) / name, format=fmt, quantize=quantize, calibration=calibration)
            models[name] = SentenceTransformer(
                str(out), backend=fmt, device="cpu", **backend_options(fmt, args.threads)
            )
            models[name].max_seq_length = args.max_length
        results = measure(models, left, right, gold, args.batch_size, args.repeats)
    base = results["torch"]
    report: dict = {
        "model": str(model_path),
        "sentences": 2 * len(left),
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "repeats": args.repeats,
        "threads_per_backend": args.threads,
        "torch_threads": torch.get_num_threads(),
        "torch": {"sent_per_s": round(base["sent_per_s"], 1), "spearman": round(base["spearman"], 2)},
    }
    for name in variants:
        result = results[name]
        cosine = (result["vectors"] * base["vectors"]).sum(axis=1)
        report[name] = {
            "sent_per_s": round(result["sent_per_s"], 1),
            "throughput_over_torch": round(result["sent_per_s"] / base["sent_per_s"], 3),
            "spearman": round(result["spearman"], 2),
            "spearman_drop": round(base["spearman"] - result["spearman"], 2),
            "cosine_to_torch_mean": round(float(cosine.mean()), 6),
            "cosine_to_torch_min": round(float(cosine.min()), 6),
        }
    targets = {"onnx": (1.2, 0.3), "onnx-int8": (1.8, 1.0), "openvino": (1.2, 0.3), "openvino-int8": (1.8, 1.0)}
    report["meets_targets"] = {
        name: report[name]["throughput_over_torch"] >= speed
        and report[name]["spearman_drop"] <= drop
        and (name not in ("onnx", "openvino") or report[name]["cosine_to_torch_min"] >= 0.9999)
        for name, (speed, drop) in targets.items()
        if name in report
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
