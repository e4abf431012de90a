"""Benchmark: one JTCSE training step vs two plain SimCSE steps on the same towers, batch and length.

Each step is forward + backward + AdamW step in training mode (dropout on), on one batch tokenised once. Besides
the wall-clock medians the JSON gives the process's CPU seconds (``cpu_median_s``, ``cpu_ratios``): the work a step
does, which other jobs on a shared machine barely move (with ``--threads 1``; more threads count their waits too).
SimCSE = one tower (Transformer + CLS pooling) with the NT-Xent loss over the 2B views in one pass; JTCSE = the
twin with JTCSELoss, without CAELs (TNCSE) and with cael_every=2 (the steps and their timing:
``jtcse.testing.train_steps``, shared with ``scripts/bench_gpu.py``). Variants are interleaved per repeat so machine
noise hits all of them alike; the JSON reports medians and the ratios against two SimCSE steps (targets: <= 1.15
without CAEL, <= 2.2 with k=2).

    python scripts/bench_train.py                      # MiniLM, batch 16, length 32, CPU
    python scripts/bench_train.py --threads 1 --repeats 10 -o bench_train.json
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tower", default=None, help="tower for all variants (default: the embedded MiniLM)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-seq-length", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds (median reported)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("-o", "--output", dest="out", metavar="OUTPUT", default=None, help="also write the JSON here")
    parser.add_argument("--out", dest="out", help=argparse.SUPPRESS)  # the old spelling
    args = parser.parse_args()

    import torch

    from jtcse.defaults import default_corpus_sentences
    from jtcse.modeling.loading import resolve_source
    from jtcse.testing.train_steps import make_steps, step_ratios, time_rounds

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tower_path = resolve_source(args.tower)
    sentences = [s for s in default_corpus_sentences() if len(s.split()) >= 20][: args.batch_size]
    steps, simcse_model = make_steps(tower_path, sentences, max_seq_length=args.max_seq_length, device=args.device)

    cpu: dict[str, list[float]] = {}
    times = time_rounds(steps, args.device, warmup=args.warmup, repeats=args.repeats, cpu=cpu)
    median, ratios = step_ratios(times)
    cpu_median, cpu_ratios = step_ratios(cpu)
    targets = {"jtcse_no_cael / two_simcse_steps": 1.15, "jtcse_k2 / two_simcse_steps": 2.2}
    report = {
        "benchmark": "one JTCSE step vs two SimCSE steps (forward + backward + AdamW, train mode)",
        "tower": tower_path,
        "device": args.device,
        "threads": torch.get_num_threads(),
        "batch_size": args.batch_size,
        "max_seq_length": args.max_seq_length,
        "tokens_per_view": int(simcse_model.preprocess(sentences)["input_ids"].shape[1]),
        "warmup": args.warmup,
        "repeats": args.repeats,
        "median_s": {k: round(v, 4) for k, v in median.items()},
        "all_s": {k: [round(x, 4) for x in v] for k, v in times.items()},
        "ratios": {k: round(v, 3) for k, v in ratios.items()},
        "cpu_median_s": {k: round(v, 4) for k, v in cpu_median.items()},
        "cpu_ratios": {k: round(v, 3) for k, v in cpu_ratios.items()},
        "targets": targets,
        "within_target": {k: ratios[k] <= targets[k] for k in ratios},
        "versions": {"torch": torch.__version__},
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
