#!/usr/bin/env python
"""``jtcse eval mteb --local-task`` on a BEIR folder against a plain encode of its corpus and queries plus an exact
search (issue 46: the first must take at most 1.2x the second).

One process, one model (the embedded MiniLM unless --model), one BEIR folder built from an STS file with long
documents (:func:`jtcse.testing.beir.write_beir_folder`: STS-B train-selection pairs, every 4th document a
wiki12k paragraph before its sentence). Each round times, in a rotated order so that a shared machine's drift hits
all alike:

* ``plain``: ``SentenceTransformer.encode`` of the documents (title + " " + text) and of the queries, one matrix
  product and ``torch.topk`` (:func:`jtcse.testing.beir.encode_and_search`);
* ``eval_mteb``: :func:`jtcse.evaluation.mteb_runner.run_mteb` on ``--local-task FOLDER`` as ``jtcse eval mteb``
  runs it (the checkpoint's own length; a fresh result cache and output folder each round), reading the files,
  mteb's evaluation and writing the results included;
* ``eval_mteb_whole``: the same at 512 tokens, as ``eval mteb`` loaded models before (the time the fix saved).

The best round of each counts. Prints JSON (also written to -o), with ``eval_mteb / plain`` against 1.2.

Example: python scripts/bench_local_retrieval.py --rounds 2 -o docs/bench_local_retrieval.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO.parent / "shared" / "data"
TARGET = 1.2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model path (default: the embedded MiniLM)")
    parser.add_argument("--sts-file", default=str(DATA / "stsbenchmark" / "sts-train-selection.csv"))
    parser.add_argument("--filler", default=str(DATA / "wiki12k.txt"))
    parser.add_argument("--limit", type=int, default=None, help="first N pairs of the STS file (default: all)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("-o", "--output", default=None)
    args = parser.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    from jtcse.defaults import default_tower_path
    from jtcse.evaluation.mteb_runner import run_mteb
    from jtcse.modeling.loading import load_model
    from jtcse.testing.beir import encode_and_search, read_beir_folder, write_beir_folder

    torch.set_num_threads(args.threads)
    model_path = args.model or default_tower_path()
    work = Path(tempfile.mkdtemp(prefix="bench_local_retrieval_"))
    folder = work / "beir"
    counts = write_beir_folder(args.sts_file, folder, filler=args.filler, limit=args.limit)
    documents, queries, _ = read_beir_folder(folder)
    plain_model = SentenceTransformer(model_path)
    models = {"eval_mteb": load_model(model_path), "eval_mteb_whole": load_model(model_path, max_seq_length=512)}

    def plain() -> dict:
        return {"seconds": encode_and_search(plain_model, documents, queries, batch_size=args.batch_size)[1]}

    def through_mteb(variant: str, round_no: int) -> dict:
        start = time.perf_counter()
        summary = run_mteb(models[variant], (), work / f"{variant}{round_no}", local_tasks=[folder],
                           batch_size=args.batch_size, cache_dir=work / f"cache-{variant}{round_no}")  # fmt: skip
        (entry,) = summary["tasks"].values()
        return {"seconds": time.perf_counter() - start, "ndcg_at_10": entry["main_score"]}

    runs = {"plain": plain, "eval_mteb": lambda r: through_mteb("eval_mteb", r)}
    runs["eval_mteb_whole"] = lambda r: through_mteb("eval_mteb_whole", r)
    order = list(runs)
    results: dict[str, list[dict]] = {name: [] for name in order}
    for round_no in range(args.rounds):
        for name in order[round_no % len(order) :] + order[: round_no % len(order)]:
            result = runs[name]() if name == "plain" else runs[name](round_no)
            results[name].append(result)
            print(f"round {round_no + 1} {name}: {result}", file=sys.stderr, flush=True)
    best = {name: min(r["seconds"] for r in rounds) for name, rounds in results.items()}
    report = {
        "what": "jtcse eval mteb --local-task BEIR_FOLDER vs encode + exact search of the same folder",
        "model": model_path,
        "max_seq_length": plain_model.max_seq_length,
        "folder": {**counts, "from": args.sts_file, "filler": args.filler, "long_documents": "every 4th"},
        "batch_size": args.batch_size,
        "threads": args.threads,
        "rounds": results,
        "best_seconds": best,
        "eval_mteb_vs_plain": best["eval_mteb"] / best["plain"],
        "eval_mteb_whole_vs_plain": best["eval_mteb_whole"] / best["plain"],
        "target": f"eval_mteb_vs_plain <= {TARGET}",
        "met": best["eval_mteb"] / best["plain"] <= TARGET,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch": torch.__version__},
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
