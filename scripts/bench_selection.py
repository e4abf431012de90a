"""Benchmark: scoring one model on a selection set (``jtcse.training.selection.selection_scores``) beside a plain
``model.encode`` of the same distinct texts, in one run.

The selection set defaults to the defaults' four inputs (issue 45): STS-B train and SICK train without test pairs,
TREC's train split (a held-out half scored), and STS-B train read as retrieval. The JSON gives the time to read the
inputs, to score them (each text encoded once, then mteb's evaluators), to score them again from the cached vectors
(mteb's evaluators alone: what each weight row of an ensemble's grid costs), to encode the same texts with
``model.encode`` alone, the ratio of scoring to encoding, the number of texts, and the model's scores (the start's
row).
Usage: python scripts/bench_selection.py [--model PATH] [--data ../shared/data] [--selection-file INPUT ...]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    from jtcse.evaluation.selection_scoring import CachedEncoder, score_inputs
    from jtcse.modeling.loading import load_model
    from jtcse.training.selection import overall, selection_sets, total

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    parser.add_argument("--data", default=str(shared), help="the shared data folder [../shared/data]")
    parser.add_argument("--model", default=None, help="sentence-transformers checkpoint [embedded MiniLM]")
    parser.add_argument("--selection-file", action="append", help="a selection input [the defaults' four]")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    data = Path(args.data)
    sts = data / "stsbenchmark" / "sts-train-selection.csv"
    specs = args.selection_file or [
        str(sts),
        str(data / "sick" / "sick-train-selection.csv"),
        str(data / "trec"),
        f"retrieval-pairs:{sts}",
    ]

    started = time.perf_counter()
    sets = selection_sets(specs, data / "stsbenchmark" / "sts-dev.csv")
    read = time.perf_counter() - started
    model = load_model(args.model, device="cpu")
    model.encode(["warm-up"] * 8)
    encoder = CachedEncoder(model, batch_size=args.batch_size)
    started = time.perf_counter()
    scores = score_inputs(encoder, sets)
    scored = time.perf_counter() - started
    started = time.perf_counter()
    again = score_inputs(encoder, sets)  # every vector cached: mteb's evaluators alone, what each weight row costs
    rescored = time.perf_counter() - started
    assert again == scores
    texts = [text for table in encoder.tables.values() for text in table]
    started = time.perf_counter()
    model.encode(texts, batch_size=args.batch_size)
    encoded = time.perf_counter() - started
    main_scores = overall(scores)
    print(
        json.dumps(
            {
                "model": args.model or "embedded MiniLM",
                "inputs": specs,
                "texts": len(texts),
                "read_s": round(read, 1),
                "score_s": round(scored, 1),
                "rescore_cached_s": round(rescored, 1),
                "encode_only_s": round(encoded, 1),
                "score_over_encode": round(scored / encoded, 3),
                "scores": main_scores,
                "total": total(main_scores),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
