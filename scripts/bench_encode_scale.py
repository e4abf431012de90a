#!/usr/bin/env python
"""Encoding past one process (issue 23): throughput by process layout, the Ray path, and how time and memory
grow with the corpus for `jtcse encode` and `jtcse index build --embeddings`.

Every measurement runs `encode_file` / `build_index_from_embeddings` in a fresh child process (``--child``), so
threads and memory are its own; the parent reads the child's peak RSS (``ru_maxrss`` from ``wait4``: every page
it had mapped, memory-mapped files included) and samples its anonymous memory (``RssAnon`` in
``/proc/PID/status``, every 20 ms: what it allocated, not file pages the kernel can drop). Seconds are the
library call's own (model load, pool start or ``ray.init`` included: what a command pays), and ``steady`` is
the rate between the first and the last chunk landing (start-up excluded).

Sections (``--only``):

* ``throughput``: the same sentences through 1 process x 1 thread, 1 process x 2 threads, 2 processes x 1
  thread (``--processes 2``) and Ray (local, 2 CPUs, 2 actors x 1 CPU); repeats interleaved, order rotated.
* ``ray``: the plain one-process command (its default threads) vs Ray local (2 CPUs) at ``--ray-sentences``.
* ``growth``: a synthetic corpus of 10^4 .. 10^6 sentences (``--growth``) through one process into a shards
  folder, with the tiny random tower of the tests (MiniLM would take hours at 10^6 on 2 cores; ``--growth-model``).
* ``index``: ``index build --embeddings`` over synthetic 384-d shards of 10^5 and 10^6 rows (``--index-rows``):
  IVF, default nlist (4·sqrt(rows)) and training sample (64·nlist).

Example (the figures in docs/search.md):
  python scripts/bench_encode_scale.py --corpus ../shared/data/wiki12k.txt -o bench_encode_scale.json
  python scripts/bench_encode_scale.py --quick      # every section, small sizes, a few minutes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- child side
def _child(spec: dict) -> dict:
    """Run one measurement in this (fresh) process; returns what to report."""
    if spec["kind"] == "index":
        from jtcse.search.build import build_index_from_embeddings

        started = time.perf_counter()
        index = build_index_from_embeddings(spec["embeddings"], spec["output"], overwrite=True)
        manifest = index.manifest
        return {"seconds": round(time.perf_counter() - started, 2), "kind": manifest.kind, "nlist": manifest.nlist,
                "nprobe": manifest.nprobe, "recall": manifest.calibration.get("recall")}  # fmt: skip
    import torch

    from jtcse.search.encode import RayEngine, encode_file

    torch.set_num_threads(spec["threads"])
    landed: list[tuple[float, int]] = []
    engine = None
    if spec.get("ray"):
        import ray

        started = time.perf_counter()
        ray.init(num_cpus=spec["ray"], include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        ray_init = time.perf_counter() - started
        engine = RayEngine(actors=spec["ray"], cpus_per_actor=1)
    started = time.perf_counter()
    result = encode_file(
        spec["model"], spec["input"], spec["output"], chunk_size=spec["chunk_size"], batch_size=spec["batch_size"],
        processes=spec.get("processes"), engine=engine, overwrite=True, show_progress=False,
        on_chunk=lambda done, total: landed.append((time.perf_counter(), done)),
    )  # fmt: skip
    seconds = time.perf_counter() - started
    (t0, r0), (t1, r1) = landed[0], landed[-1]
    out = {"rows": result.rows, "seconds": round(seconds, 2), "sentences_per_s": round(result.rows / seconds, 1),
           # (Ray hands finished parts back in batches: no steady rate from their landing times)
           "steady_sentences_per_s": round((r1 - r0) / (t1 - t0), 1) if t1 > t0 and not spec.get("ray") else None}  # fmt: skip
    if spec.get("ray"):
        out["ray_init_seconds"] = round(ray_init, 2)  # paid before the timed call (ray.init by the caller)
        ray.shutdown()
    return out


# ---------------------------------------------------------------- parent side
def measure(spec: dict, threads: int) -> dict:
    """Run ``spec`` in a child with ``threads`` OpenMP threads; add its own peak RSS (``wait4``) and its sampled
    peak RssAnon, in MB."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))  # fmt: skip
    out_file = Path(tempfile.mkstemp(suffix=".json")[1])
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", json.dumps(spec), "--child-output", str(out_file)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    peak = {"anon_kb": 0}
    done = threading.Event()

    def sample() -> None:
        status = Path(f"/proc/{child.pid}/status")
        while not done.is_set():
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("RssAnon:"):
                        peak["anon_kb"] = max(peak["anon_kb"], int(line.split()[1]))
            except OSError:
                break
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stderr_lines: list[str] = []
    reader = threading.Thread(target=lambda: stderr_lines.extend(child.stderr), daemon=True)
    reader.start()
    _, status, usage = os.wait4(child.pid, 0)  # the child stays a zombie (its /proc entry readable) until here
    done.set()
    sampler.join()
    reader.join()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"child failed ({spec}):\n{''.join(stderr_lines)[-3000:]}")
    result = json.loads(out_file.read_text())
    out_file.unlink()
    result["load_average_1min_after"] = round(os.getloadavg()[0], 2)  # other work on the machine meanwhile
    result["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)
    result["peak_anon_mb"] = round(peak["anon_kb"] / 1024, 1)
    return result


def synthetic_corpus(path: Path, rows: int, seed: int = 0) -> Path:
    """``rows`` sentences of 6..30 words drawn from the embedded prose's vocabulary (deterministic)."""
    import numpy as np

    from jtcse.defaults import default_corpus_sentences

    if path.is_file():
        return path
    words = sorted({w for s in default_corpus_sentences() for w in s.split()})
    rng = np.random.default_rng(seed)
    with path.open("w", encoding="utf-8") as out:
        for start in range(0, rows, 100_000):
            n = min(100_000, rows - start)
            lengths = rng.integers(6, 31, size=n)
            picks = rng.integers(0, len(words), size=int(lengths.sum()))
            cuts = np.cumsum(lengths)[:-1]
            out.write("".join(" ".join(words[i] for i in sentence) + "\n" for sentence in np.split(picks, cuts)))
    return path


def cycled_corpus(source: Path, path: Path, rows: int) -> Path:
    """The non-empty lines of ``source``, repeated until there are ``rows``."""
    lines = [line.strip() for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    path.write_text("".join(lines[i % len(lines)] + "\n" for i in range(rows)), encoding="utf-8")
    return path


def synthetic_shards(folder: Path, rows: int, dim: int = 384, block: int = 8192, seed: int = 0) -> Path:
    """A finished shards folder of ``rows`` unit vectors around 1,000 random centres (some cluster structure), in
    parts of ``block`` rows (what `jtcse encode` writes with its default --chunk-size)."""
    import numpy as np

    from jtcse.locking import atomic_write_json
    from jtcse.search.lines import ROW_DTYPE, LineChunk
    from jtcse.search.sinks import SHARD_META_FILE, PartWriter

    if (folder / SHARD_META_FILE).is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((1000, dim), dtype=np.float32)
    writer = PartWriter(folder, dim, "float32", {"model": "synthetic", "normalized": True, "input": "synthetic"})
    for start in range(0, rows, block):
        n = min(block, rows - start)
        vectors = centres[rng.integers(0, 1000, size=n)] + 0.5 * rng.standard_normal((n, dim), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        table = np.empty(n, dtype=ROW_DTYPE)
        table["line"] = np.arange(start + 1, start + n + 1)
        table["offset"] = 0
        writer.write(start, LineChunk([f"synthetic row {start + i}" for i in range(n)], table, 0, 0), vectors)
    atomic_write_json(folder / SHARD_META_FILE, {"rows": rows, "empty_lines": 0, "complete": True})
    return folder


def interleaved(configs: dict, repeats: int, run) -> dict:
    """``run(name)`` for every config, ``repeats`` rounds, the order rotated each round; every result kept."""
    names = list(configs)
    results: dict = {name: [] for name in names}
    for round_ in range(repeats):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            results[name].append(run(name))
            print(f"  {name} round {round_ + 1}: {results[name][-1]}", file=sys.stderr, flush=True)
    return results


def best(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return max(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-output", help=argparse.SUPPRESS)
    parser.add_argument("--only", default="throughput,ray,growth,index")
    parser.add_argument("--model", default=None, help="Throughput/ray model. Default: the embedded MiniLM.")
    parser.add_argument(
        "--corpus", type=Path, default=None, help="Sentences for throughput/ray (cycled). Default: synthetic."
    )
    parser.add_argument("--sentences", type=int, default=6000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ray-sentences", type=int, default=100_000)
    parser.add_argument(
        "--ray-model", default=None, help="Model of the ray section: tiny, a path, or (default) --model."
    )
    parser.add_argument("--growth", default="10000,100000,1000000")
    parser.add_argument("--growth-model", default="tiny", help="tiny (the tests' random 4-layer/32 BERT) or a path.")
    parser.add_argument("--index-rows", default="100000,1000000")
    parser.add_argument("--chunk-size", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--workdir", type=Path, default=None, help="Where corpora and outputs go (default: a temp dir)."
    )
    parser.add_argument("--quick", action="store_true", help="Small sizes, one repeat.")
    parser.add_argument("-o", "--output", type=Path, default=None)
    args = parser.parse_args()
    if args.child:
        result = _child(json.loads(args.child))
        Path(args.child_output).write_text(json.dumps(result))
        return
    if args.quick:
        args.sentences, args.repeats, args.ray_sentences = 1500, 1, 3000
        args.growth, args.index_rows = "2000,20000", "60000,120000"
    sys.path.insert(0, str(REPO))
    from jtcse.defaults import default_tower_path
    from jtcse.search.pool import available_cores

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_encode_scale_"))
    work.mkdir(parents=True, exist_ok=True)
    model = args.model or default_tower_path()
    report: dict = {
        "machine": {
            "cpu_cores": available_cores(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "gpu": "none lent to this run (CPU only)",
        },  # fmt: skip
        "settings": {
            "model": "embedded MiniLM" if args.model is None else args.model,
            "chunk_size": args.chunk_size,
            "batch_size": args.batch_size,
            "corpus": str(args.corpus) if args.corpus else "synthetic",
        },  # fmt: skip
    }
    sections = set(args.only.split(","))

    def corpus(rows: int) -> Path:
        name = f"corpus_{rows}.txt"
        if args.corpus:
            return cycled_corpus(args.corpus, work / name, rows)
        return synthetic_corpus(work / name, rows)

    def tiny_tower() -> str:
        from jtcse.testing import make_tiny_tower

        return (
            str(work / "tiny_bert")
            if (work / "tiny_bert").is_dir()
            else make_tiny_tower(work / "tiny_bert", "bert", seed=0)
        )

    def encode_spec(path: Path, out: str, **extra) -> dict:
        return {"kind": "encode", "model": model, "input": str(path), "output": str(work / out),
                "chunk_size": args.chunk_size, "batch_size": args.batch_size, "threads": 1, **extra}  # fmt: skip

    if "throughput" in sections:
        text = corpus(args.sentences)
        configs = {
            "1proc_1thread": (encode_spec(text, "t11", threads=1), 1),
            "1proc_2threads": (encode_spec(text, "t12", threads=2), 2),
            "2procs_1thread": (encode_spec(text, "t21", processes=2), 1),
            "ray_local_2actors_1cpu": (encode_spec(text, "tray", ray=2), 1),
        }
        runs = interleaved(configs, args.repeats, lambda name: measure(*configs[name]))
        rates = {name: best(r, "sentences_per_s") for name, r in runs.items()}
        steady = {name: best(r, "steady_sentences_per_s") for name, r in runs.items()}
        base = "1proc_1thread"
        report["throughput"] = {
            "sentences": args.sentences, "repeats": args.repeats, "runs": runs,
            "best_sentences_per_s": rates, "best_steady_sentences_per_s": steady,
            "ratio_vs_1proc_1thread": {n: round(v / rates[base], 2) for n, v in rates.items()},
            "steady_ratio_vs_1proc_1thread": {n: round(v / steady[base], 2) for n, v in steady.items() if v},
            "target_2procs_vs_1proc": "2procs_1thread >= 1.6 x 1proc_1thread",
        }  # fmt: skip

    if "ray" in sections:
        text = corpus(args.ray_sentences)
        ray_model = {"tiny": tiny_tower(), None: model}.get(args.ray_model, args.ray_model)
        configs = {
            "plain_1proc_1thread": ({**encode_spec(text, "r11", threads=1), "model": ray_model}, 1),
            "plain_1proc_2threads": ({**encode_spec(text, "r12", threads=2), "model": ray_model}, 2),
            "ray_local_2actors_1cpu": ({**encode_spec(text, "rray", ray=2), "model": ray_model}, 1),
            "pool_2procs_1thread": ({**encode_spec(text, "r21", processes=2), "model": ray_model}, 1),
        }
        runs = interleaved(configs, 1, lambda name: measure(*configs[name]))
        seconds = {name: r[0]["seconds"] for name, r in runs.items()}
        ray_run = runs["ray_local_2actors_1cpu"][0]
        plain = min(seconds["plain_1proc_1thread"], seconds["plain_1proc_2threads"])
        report["ray_overhead"] = {
            "sentences": args.ray_sentences, "model": args.ray_model or report["settings"]["model"], "runs": runs,
            "seconds": seconds,
            "ray_time_over_best_plain": round(seconds["ray_local_2actors_1cpu"] / plain, 3),
            "ray_time_with_init_over_best_plain": round((ray_run["seconds"] + ray_run["ray_init_seconds"]) / plain, 3),
            "ray_time_over_pool_2procs": round(seconds["ray_local_2actors_1cpu"] / seconds["pool_2procs_1thread"], 3),
            "target": "ray_time_over_best_plain <= 1.3",
        }  # fmt: skip

    if "growth" in sections:
        tower = tiny_tower() if args.growth_model == "tiny" else args.growth_model
        points = {}
        for rows in map(int, args.growth.split(",")):
            spec = {**encode_spec(synthetic_corpus(work / f"synthetic_{rows}.txt", rows), f"g{rows}", threads=1),
                    "model": tower, "chunk_size": 8192}  # fmt: skip
            points[rows] = measure(spec, 1)
            print(f"  growth {rows}: {points[rows]}", file=sys.stderr, flush=True)
        sizes = sorted(points)
        first, last = points[sizes[0]], points[sizes[-1]]
        report["growth"] = {
            "model": "the tests' random 4-layer, hidden-32 BERT (MiniLM at 10^6 would take hours on 2 cores)"
            if args.growth_model == "tiny" else tower,
            "output": "shards folder, chunk 8192, one process x 1 thread", "points": points,
            "rows_ratio": sizes[-1] / sizes[0],
            "time_ratio": round(last["seconds"] / first["seconds"], 2),
            "peak_rss_ratio": round(last["peak_rss_mb"] / first["peak_rss_mb"], 2),
            "peak_anon_ratio": round(last["peak_anon_mb"] / first["peak_anon_mb"], 2),
        }  # fmt: skip

    if "index" in sections:
        points = {}
        for rows in map(int, args.index_rows.split(",")):
            shards = synthetic_shards(work / f"shards_{rows}", rows)
            points[rows] = measure({"kind": "index", "embeddings": str(shards), "output": str(work / f"idx_{rows}")}, 1)
            print(f"  index {rows}: {points[rows]}", file=sys.stderr, flush=True)
        sizes = sorted(points)
        first, last = points[sizes[0]], points[sizes[-1]]
        report["index_from_embeddings"] = {
            "vectors": "synthetic unit vectors, d=384, around 1,000 random centres, parts of 8192 rows; float32, IVF on "
            "disk; one faiss thread",
            "points": points, "rows_ratio": sizes[-1] / sizes[0],
            "corpus_mb": {rows: round(rows * 384 * 4 / 2**20, 1) for rows in sizes},
            "peak_rss_ratio": round(last["peak_rss_mb"] / first["peak_rss_mb"], 2),
            "peak_anon_ratio": round(last["peak_anon_mb"] / first["peak_anon_mb"], 2),
            "time_ratio": round(last["seconds"] / first["seconds"], 2),
            "target": "peak memory sub-linear in rows (ratio well below rows_ratio)",
        }  # fmt: skip

    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
