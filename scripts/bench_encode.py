#!/usr/bin/env python
"""Encode throughput of a distilled single tower vs. the JTCSE twin vs. the plain sentence-transformers model.

One run, same sentences, batch size, length limit and device for all three; repeats are interleaved
(round-robin, order rotated each round) so drift in a shared machine's load hits every model alike; the
best repeat counts.
Prints JSON (also written to -o/--output) with sentences/s per model and the ratios against the speed targets:
distilled ≥ 0.97 × plain, twin ≥ 0.48 × plain.

Defaults (when a path is not given):
  --plain    the embedded MiniLM exactly as shipped (Transformer + mean Pooling + Normalize);
  --student  the same MiniLM rebuilt as a CLS tower (Transformer + CLS Pooling), i.e. what
             `jtcse distill` saves — distillation changes weights, not cost, so this stands in for it;
  --twin     `jtcse.build_twin(student, student)`.

Example:
  python scripts/bench_encode.py --student runs/distilled --twin runs/twin --sentences 4096 -o bench.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TARGETS = {"student_vs_plain": 0.97, "twin_vs_plain": 0.48}


def _sentences(corpus: str | None, count: int) -> tuple[list[str], str]:
    from jtcse.corpus import read_corpus
    from jtcse.defaults import default_corpus_sentences

    wiki = REPO.parent / "shared" / "data" / "wiki12k.txt"
    if corpus is None and wiki.is_file():
        corpus = str(wiki)
    pool = read_corpus(corpus).sentences if corpus else default_corpus_sentences()
    source = corpus or "<embedded stdlib prose>"
    reps = -(-count // len(pool))
    return (pool * reps)[:count], source


def _load(path: str, device: str):
    from jtcse.modeling.loading import load_model

    return load_model(path, device=device)


def _default_models(workdir: Path, device: str) -> dict[str, object]:
    from jtcse.modeling.build import build_twin
    from jtcse.modeling.loading import load_cls_tower, resolve_source

    plain_path = resolve_source(None)
    student, _ = load_cls_tower(plain_path, role="student")
    student_path = workdir / "student_cls"
    student.save(str(student_path))
    twin_path = workdir / "twin"
    build_twin(str(student_path), str(student_path)).save(str(twin_path))
    return {"plain": plain_path, "student": str(student_path), "twin": str(twin_path)}


def _time_encode(model, sentences: list[str], batch_size: int) -> float:
    start = time.perf_counter()
    model.encode(sentences, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plain", help="plain sentence-transformers model dir (default: embedded MiniLM)")
    parser.add_argument("--student", help="distilled single tower dir (default: MiniLM as a CLS tower)")
    parser.add_argument("--twin", help="JTCSE twin checkpoint dir (default: build_twin(student, student))")
    parser.add_argument("--corpus", help="sentences file (default: ../shared/data/wiki12k.txt, else stdlib prose)")
    parser.add_argument("--sentences", type=int, default=2048, help="sentences encoded per repeat (default 2048)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-seq-length", type=int, default=64, help="token limit applied to every model")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per model (best counts)")
    parser.add_argument("--device", default=None, help="cpu / cuda (default: cuda when available)")
    parser.add_argument("-o", "--output", dest="out", metavar="OUTPUT", help="also write the JSON here")
    parser.add_argument("--out", dest="out", help=argparse.SUPPRESS)  # the old spelling
    args = parser.parse_args()

    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    sentences, source = _sentences(args.corpus, args.sentences)
    with tempfile.TemporaryDirectory(prefix="bench_encode_") as tmp:
        paths: dict[str, object] = {}
        if not (args.plain and args.student and args.twin):
            paths = _default_models(Path(tmp), device)
        for name in ("plain", "student", "twin"):
            if getattr(args, name):
                paths[name] = getattr(args, name)
        models = {}
        for name, path in paths.items():
            model = _load(str(path), device)
            model.max_seq_length = args.max_seq_length
            model.eval()
            model.encode(sentences[: 2 * args.batch_size], batch_size=args.batch_size)  # warm-up
            models[name] = model

        timings: dict[str, list[float]] = {name: [] for name in models}
        names = list(models)
        for repeat in range(args.repeats):
            # rotate the order each repeat so no model always runs first (or right after another)
            for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
                timings[name].append(_time_encode(models[name], sentences, args.batch_size))

    per_model = {
        name: {
            "path": str(paths[name]),
            "sentences_per_s": round(len(sentences) / min(times), 1),
            "median_sentences_per_s": round(len(sentences) / statistics.median(times), 1),
            "seconds": [round(t, 3) for t in times],
            "embedding_dimension": models[name].get_embedding_dimension(),
        }
        for name, times in timings.items()
    }
    ratios, meets = {}, {}
    if "plain" in per_model:
        plain = per_model["plain"]["sentences_per_s"]
        for name, key in (("student", "student_vs_plain"), ("twin", "twin_vs_plain")):
            if name in per_model:
                ratios[key] = round(per_model[name]["sentences_per_s"] / plain, 3)
                meets[key] = ratios[key] >= TARGETS[key]
    report = {
        "benchmark": "encode throughput, best of repeats, interleaved in rotating order",
        "device": device if device == "cpu" else torch.cuda.get_device_name(0),
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "corpus": source,
        "sentences": len(sentences),
        "batch_size": args.batch_size,
        "max_seq_length": args.max_seq_length,
        "repeats": args.repeats,
        "models": per_model,
        "ratios": ratios,
        "targets": TARGETS,
        "meets_target": meets,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
