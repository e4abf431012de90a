#!/usr/bin/env python
"""Training past one device: GradCache memory and time, and two-process vs one-process throughput.

One run; every configuration runs one after another in its own fresh subprocess (peak memory is
per process), on the same tower, sentences and sequence length:

* ``plain_<B>``       ``JTCSELoss`` at batch B;
* ``cached_<B>_<m>``  ``CachedJTCSELoss`` at batch B, mini-batch m;
* ``ddp2_<B>``        ``torchrun --nproc_per_node 2`` (gloo), B/2 sentences per rank, gather_across_devices,
                      one torch thread per rank, against ``plain_<B>`` run with two threads.

A step is forward + backward of one batch (two dropout views, so 2B rows through the twin); the
first step is a warm-up, the best of ``--steps`` timed steps counts. Peak memory: ``ru_maxrss`` of the
child on the CPU (``torch.cuda.max_memory_allocated`` on a GPU); ``step_peak_mb`` subtracts the RSS
reached before the first step (imports, model), so it is the memory the step itself added.

Targets: cached-256 peak <= 1.5 x plain-16 peak; cached step time <= 1.5 x plain at the same batch.

Example:
  python scripts/bench_scale.py -o bench_scale.json              # tiny 4-layer/128 towers, a few minutes
  python scripts/bench_scale.py --tower minilm --batch 64 --mini-batch 8
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TARGETS = {"cached_peak_vs_plain_small": 1.5, "cached_time_vs_plain": 1.5}


def _rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(args: argparse.Namespace) -> None:
    import torch

    from jtcse.defaults import default_corpus_sentences
    from jtcse.losses import CachedJTCSELoss, JTCSELoss
    from jtcse.modeling.build import build_twin

    distributed = "RANK" in os.environ
    if distributed:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    twin = build_twin(
        args.tower, args.tower, cael_every=args.cael_every, max_seq_length=args.max_seq_length, device=device
    )
    twin.train()
    model = torch.nn.parallel.DistributedDataParallel(twin) if distributed else twin
    local = args.batch // world
    pool = default_corpus_sentences()
    batches = [
        [pool[(step * args.batch + rank * local + i) % len(pool)] for i in range(local)]
        for step in range(args.steps + 1)
    ]
    features = [{k: v.to(device) if hasattr(v, "to") else v for k, v in twin.preprocess(b).items()} for b in batches]
    if args.mini_batch:
        loss = CachedJTCSELoss(twin, mini_batch_size=args.mini_batch, gather_across_devices=distributed)
    else:
        loss = JTCSELoss(twin, gather_across_devices=distributed)
    loss.model = model
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.max_memory_allocated() / 2**20
    else:
        before = _rss_mb()
    times = []
    for step, batch in enumerate(features):
        if distributed:
            dist.barrier()
        start = time.perf_counter()
        terms = loss([dict(batch)], None)
        torch.stack(list(terms.values())).sum().backward()
        if device == "cuda":
            torch.cuda.synchronize()
        if step:
            times.append(time.perf_counter() - start)
        twin.zero_grad(set_to_none=True)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else _rss_mb()
    if distributed:
        best = torch.tensor(min(times))
        dist.all_reduce(best, op=dist.ReduceOp.MAX)  # a DDP step ends when the slowest rank ends
        step_s = best.item()
        dist.destroy_process_group()
    else:
        step_s = min(times)
    if rank == 0:
        print(
            json.dumps(
                {
                    "device": device,
                    "world_size": world,
                    "threads_per_process": args.threads,
                    "peak_mb": round(peak, 1),
                    "step_peak_mb": round(peak - before, 1),
                    "step_s": round(step_s, 4),
                    "sentences_per_s": round(args.batch / step_s, 1),
                }
            )
        )


def _run(
    name: str, args: argparse.Namespace, *, batch: int, mini_batch: int = 0, ddp: bool = False, threads: int = 1
) -> dict:
    launcher = (
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
        if ddp
        else [sys.executable]
    )
    command = [
        *launcher,
        str(Path(__file__).resolve()),
        "--child",
        "--tower",
        args.tower,
        "--batch",
        str(batch),
        "--mini-batch",
        str(mini_batch),
        "--steps",
        str(args.steps),
        "--threads",
        str(threads),
        "--max-seq-length",
        str(args.max_seq_length),
        "--cael-every",
        str(args.cael_every),
    ]
    env = dict(
        os.environ,
        OMP_NUM_THREADS=str(threads),
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
    )
    print(f"[bench_scale] {name} ...", file=sys.stderr, flush=True)
    try:
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired as error:
        raise SystemExit(f"{name} did not finish in {args.timeout} s:\n{(error.stderr or b'')[-3000:]!r}") from None
    if result.returncode:
        raise SystemExit(f"{name} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _tower(args: argparse.Namespace, workdir: Path) -> str:
    if args.tower == "minilm":
        from jtcse.modeling.loading import resolve_source

        return resolve_source(None)
    if args.tower == "tiny":
        from jtcse.testing import make_tiny_tower

        return make_tiny_tower(
            workdir / "tower", num_layers=args.layers, hidden=args.hidden, heads=4, max_seq_length=args.max_seq_length
        )
    return args.tower


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tower", default="tiny", help="'tiny' (random, --layers/--hidden), 'minilm', or a path")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--mini-batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=2, help="timed steps after one warm-up step")
    parser.add_argument("--max-seq-length", type=int, default=32)
    parser.add_argument("--cael-every", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per configuration")
    parser.add_argument("-o", "--output", dest="out", metavar="OUTPUT", type=Path, help="also write the JSON here")
    parser.add_argument("--out", dest="out", type=Path, help=argparse.SUPPRESS)  # the old spelling
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return

    with tempfile.TemporaryDirectory() as tmp:
        args.tower = _tower(args, Path(tmp))
        big, small = args.batch, args.mini_batch
        runs = {
            f"plain_{small}": _run("plain small", args, batch=small),
            f"plain_{big}": _run("plain big", args, batch=big),
            f"cached_{big}_{small}": _run("cached big", args, batch=big, mini_batch=small),
            f"plain_{big}_2threads": _run("one process, 2 threads", args, batch=big, threads=2),
            f"ddp2_{big}": _run("two processes", args, batch=big, ddp=True),
        }
    plain_small, plain_big = runs[f"plain_{small}"], runs[f"plain_{big}"]
    cached, one, two = runs[f"cached_{big}_{small}"], runs[f"plain_{big}_2threads"], runs[f"ddp2_{big}"]
    ratios = {
        "cached_peak_vs_plain_small": round(cached["peak_mb"] / plain_small["peak_mb"], 3),
        "cached_step_peak_vs_plain_small_step_peak": round(
            cached["step_peak_mb"] / max(plain_small["step_peak_mb"], 1e-9), 3
        ),
        "cached_peak_vs_plain_big": round(cached["peak_mb"] / plain_big["peak_mb"], 3),
        "cached_time_vs_plain": round(cached["step_s"] / plain_big["step_s"], 3),
        "two_process_vs_one_process_throughput": round(two["sentences_per_s"] / one["sentences_per_s"], 3),
    }
    report = {
        "benchmark": "bench_scale",
        "tower": args.tower
        if not args.tower.startswith(tempfile.gettempdir())
        else f"tiny random BERT ({args.layers} layers, hidden {args.hidden})",
        "batch": big,
        "mini_batch": small,
        "max_seq_length": args.max_seq_length,
        "cael_every": args.cael_every,
        "timed_steps": args.steps,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "runs": runs,
        "ratios": ratios,
        "targets": TARGETS,
        "meets_targets": {key: ratios[key] <= limit for key, limit in TARGETS.items()},
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
