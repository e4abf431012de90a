"""Encode throughput of a distilled student against the shipped MiniLM: the drivers' ``speed`` rows."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from evaluation.drivers.grid import load_shipped


def encode_rates(
    models: dict[str, Any], sentences: list[str], max_seq_length: int, repeats: int = 3
) -> dict[str, float]:
    """Sentences per second of each model on ``sentences`` (the best of ``repeats`` rounds, the models taking
    turns within a round so a noisy neighbour hits them alike)."""
    times: dict[str, list[float]] = {key: [] for key in models}
    for _ in range(repeats):
        for key, model in models.items():
            model.max_seq_length = max_seq_length
            started = time.perf_counter()
            model.encode(sentences, batch_size=64)
            times[key].append(time.perf_counter() - started)
    return {key: len(sentences) / min(spent) for key, spent in times.items()}


def speed_record(student: Path, label: str, sentences: list[str], max_seq_length: int) -> dict:
    """The ``speed`` row: sentences/s of the shipped MiniLM (``shipped``) and of ``student`` (as ``label``), their
    ratio (``ratio_<label>_to_shipped``) and each model's modules (the same sentences, batch and length, best of 3
    interleaved repeats: ``scripts/bench_encode.py``'s rule)."""
    from sentence_transformers import SentenceTransformer

    models = {
        "shipped": load_shipped(),
        label: SentenceTransformer(str(student), device="cpu"),
    }
    rate = encode_rates(models, sentences, max_seq_length)
    return {
        "group": "speed",
        "sentences": len(sentences),
        "student": student.name,
        "sentences_per_s": rate,
        f"ratio_{label}_to_shipped": rate[label] / rate["shipped"],
        "modules": {k: [type(m).__name__ for m in model] for k, model in models.items()},
    }
