"""Benchmark: what proving content costs (issue 42). On a model folder (default: the embedded MiniLM, whose
``model.safetensors`` is about 90 MB), side by side in one run, each the best of ``--repeats``:

* ``sha256`` / ``blake2b``: ``hashlib.file_digest`` of ``model.safetensors`` (the two digests the issue names;
  jtcse's records use SHA-256, :func:`jtcse.output_record.file_digest`);
* ``fingerprint``: :func:`jtcse.output_paths.fingerprint` of the whole folder (every file of the model);
* ``load``: loading the model (:func:`jtcse.modeling.loading.load_model` on the CPU; safetensors maps the file, so
  this reads little of it), and ``load_encode``: loading it and encoding 64 sentences (every weight read once):
  what a command does with the model next.

Prints JSON: seconds (wall and CPU), MB/s, and each cost as a fraction of loading. CPU seconds are the fairer
number on a shared machine. Usage: python scripts/bench_digest.py [--model PATH] [--repeats 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path


def _timed(run, repeats: int) -> dict:
    """Best wall and CPU seconds of ``repeats`` calls of ``run``."""
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return {"wall_s": round(min(walls), 4), "cpu_s": round(min(cpus), 4)}


def main() -> None:
    from jtcse.defaults import default_tower_path
    from jtcse.modeling.loading import load_model
    from jtcse.output_paths import fingerprint

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a sentence-transformers folder [the embedded MiniLM]")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    folder = Path(args.model or default_tower_path())
    weights = folder / "model.safetensors"
    size_mb = weights.stat().st_size / 1e6
    sentences = [f"Sentence number {i} of the benchmark says something short." for i in range(64)]

    def digest(name: str):
        def run() -> None:
            with weights.open("rb") as handle:
                hashlib.file_digest(handle, name)

        return run

    results = {
        "sha256": _timed(digest("sha256"), args.repeats),
        "blake2b": _timed(digest("blake2b"), args.repeats),
        "fingerprint": _timed(lambda: fingerprint(folder), args.repeats),
        "load": _timed(lambda: load_model(str(folder), device="cpu"), max(1, args.repeats // 2)),
        "load_encode": _timed(
            lambda: load_model(str(folder), device="cpu").encode(sentences), max(1, args.repeats // 2)
        ),
    }
    for name in ("sha256", "blake2b"):
        results[name]["mb_per_s_cpu"] = round(size_mb / max(results[name]["cpu_s"], 1e-9))
    for name in ("sha256", "blake2b", "fingerprint"):
        for base in ("load", "load_encode"):
            results[name][f"of_{base}_cpu"] = round(results[name]["cpu_s"] / results[base]["cpu_s"], 3)
    files = sum(1 for p in folder.rglob("*") if p.is_file())
    print(json.dumps({"model": str(folder), "weights_mb": round(size_mb, 1), "files": files, **results}, indent=2))


if __name__ == "__main__":
    main()
