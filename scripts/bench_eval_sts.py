"""Benchmark: STS evaluation encoding, deduplicated + length-sorted (jtcse) vs SentEval-style vs naive.

* ``jtcse``: each distinct sentence once, sorted by length (``jtcse.evaluation.sts.encode_unique``);
* ``senteval_style``: pairs sorted by length, each batch encodes its s1 and its s2 (duplicates re-encoded);
* ``naive``: every s1 and s2 in file order, duplicates included.

All three must give the same Spearman; the JSON reports wall time, sentences/s and speed-up ratios.
Usage: python scripts/bench_eval_sts.py [--file sts-dev.csv] [--model PATH] [--pairs 600] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def main() -> None:
    from scipy.stats import spearmanr

    from jtcse.evaluation.sts import STSPairs, encode_unique, paired_cosine, read_stsb_file
    from jtcse.modeling.loading import load_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_file = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "stsbenchmark" / "sts-dev.csv"
    parser.add_argument(
        "--file", default=str(default_file), help="STS-B-format file [../shared/data/stsbenchmark/sts-dev.csv]"
    )
    parser.add_argument("--model", default=None, help="sentence-transformers checkpoint [embedded MiniLM]")
    parser.add_argument("--pairs", type=int, default=600, help="use the first N pairs")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    full = read_stsb_file(args.file)
    n = min(args.pairs, len(full))
    pairs = STSPairs(full.sentences1[:n], full.sentences2[:n], full.scores[:n])
    model = load_model(args.model, max_seq_length="max", device="cpu")
    model.encode(pairs.sentences1[:8])  # warm-up
    bs = args.batch_size

    def cos_rows(a, b):
        return (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))

    def run_jtcse():
        table = encode_unique(model, pairs.sentences1 + pairs.sentences2, batch_size=bs)
        return paired_cosine(table, pairs), len(table)

    def run_senteval_style():
        order = sorted(range(n), key=lambda i: (len(pairs.sentences1[i].split()), len(pairs.sentences2[i].split())))
        cos = np.empty(n)
        for start in range(0, n, bs):
            idx = order[start : start + bs]
            a = model.encode([pairs.sentences1[i] for i in idx], batch_size=bs).astype(np.float64)
            b = model.encode([pairs.sentences2[i] for i in idx], batch_size=bs).astype(np.float64)
            cos[idx] = cos_rows(a, b)
        return cos, 2 * n

    def run_naive():
        a = model.encode(pairs.sentences1, batch_size=bs).astype(np.float64)
        b = model.encode(pairs.sentences2, batch_size=bs).astype(np.float64)
        return cos_rows(a, b), 2 * n

    results = {}
    for name, fn in (("jtcse", run_jtcse), ("senteval_style", run_senteval_style), ("naive", run_naive)):
        start = time.perf_counter()
        cos, encoded = fn()
        seconds = time.perf_counter() - start
        results[name] = {
            "seconds": round(seconds, 3),
            "sentences_encoded": encoded,
            "pair_sentences_per_second": round(2 * n / seconds, 1),
            "spearman": round(float(spearmanr(cos, pairs.scores).statistic), 6),
        }
    base = results["jtcse"]["seconds"]
    for name in ("senteval_style", "naive"):
        results[name]["time_ratio_vs_jtcse"] = round(results[name]["seconds"] / base, 2)
    print(
        json.dumps(
            {
                "file": args.file,
                "pairs": n,
                "batch_size": bs,
                "model": args.model or "embedded MiniLM",
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
