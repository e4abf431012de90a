#!/usr/bin/env python
"""Benchmark of the GPU path, one JSON: training steps, encoding at each precision, peak memory, and the largest
GradCache batch that fits.

* ``train``: one JTCSE step without CAEL (TNCSE) and with k=2, each against two SimCSE steps on the same
  tower, batch and length (``scripts/bench_train.py``'s steps, ``jtcse.testing.train_steps``: forward under
  autocast, backward, AdamW), at every precision the device runs (fp32, bf16, and fp16 on CUDA). Target on a
  GPU (issue 21): TNCSE step <= 1.1 x two SimCSE steps.
* ``encode``: sentences/s of ``model.encode`` in fp32, under bf16 (and fp16) autocast, and with the weights
  cast to bf16 (and fp16); the lowest cosine to the fp32 embeddings says what the speed costs. Target on a
  GPU: bf16 >= 2 x fp32.
* ``memory``: peak ``torch.cuda.max_memory_allocated`` per variant (MiB); on the CPU the process's peak
  RSS (``ru_maxrss``) once, since one process cannot split it per variant.
* ``gradcache`` (CUDA only): the largest batch for which one ``CachedJTCSELoss`` step (``--mini-batch-size``)
  fits, and the same for plain ``JTCSELoss``: batch doubled until CUDA runs out of memory, then bisected
  to a multiple of the mini-batch.

Examples:
  python scripts/bench_gpu.py --device cuda --out bench_gpu.json      # the embedded MiniLM, paper batch/length
  python scripts/bench_gpu.py --device cuda --tower bert-base-uncased --precisions fp32,bf16
  python scripts/bench_gpu.py --device cpu --batch-size 4 --max-seq-length 16 --repeats 1 --warmup 0 \\
      --encode-sentences 32                                            # a smoke test; CPU numbers mean little
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import platform
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGETS = {"jtcse_no_cael / two_simcse_steps": 1.1, "bf16_autocast / fp32 encode": 2.0}


def _sentences(count: int) -> list[str]:
    from jtcse.defaults import default_corpus_sentences

    pool = [s for s in default_corpus_sentences() if len(s.split()) >= 8]
    return [pool[i % len(pool)] for i in range(count)]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _precisions(wanted: str | None, device: str) -> list[str]:
    from jtcse.devices import check_precision

    if wanted:
        return [check_precision(p, device) for p in wanted.split(",") if p.strip()]
    usable = []
    for precision in ("fp32", "bf16", "fp16"):
        try:
            usable.append(check_precision(precision, device))
        except ValueError:
            pass
    return usable


def bench_train(args, tower: str, precisions: list[str]) -> dict:
    from jtcse.testing.train_steps import make_steps, step_ratios, time_rounds

    sentences = _sentences(args.batch_size)
    out = {}
    for precision in precisions:
        steps, _ = make_steps(tower, sentences, max_seq_length=args.max_seq_length, device=args.device,
                              precision=precision)  # fmt: skip
        peaks: dict[str, float] = {}
        times = time_rounds(steps, args.device, warmup=args.warmup, repeats=args.repeats, peaks=peaks)
        median, ratios = step_ratios(times)
        out[precision] = {
            "median_s": {k: round(v, 4) for k, v in median.items()},
            "ratios": {k: round(v, 3) for k, v in ratios.items()},
            "peak_memory_mb": {k: round(v, 1) for k, v in peaks.items()} or None,
        }
        del steps
        _free(args.device)
    return out


def _free(device: str) -> None:
    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def bench_encode(args, tower: str, precisions: list[str]) -> dict:
    import torch
    import torch.nn.functional as F

    from jtcse.devices import autocast, torch_dtype
    from jtcse.modeling.loading import load_model

    sentences = _sentences(args.encode_sentences)
    model = load_model(tower, device=args.device).float().eval()
    model.max_seq_length = args.max_seq_length
    cuda = args.device.startswith("cuda")
    variants = [("fp32", model, "fp32")]
    for precision in precisions:
        if precision != "fp32":
            variants.append((f"{precision}_autocast", model, precision))
            variants.append((f"{precision}_weights", copy.deepcopy(model).to(torch_dtype(precision)), "fp32"))
    reference = None
    out = {}
    for name, variant, autocast_precision in variants:
        with autocast(autocast_precision, args.device):
            variant.encode(sentences[: args.encode_batch_size], batch_size=args.encode_batch_size)  # warm-up
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats(args.device)
            start = time.perf_counter()
            embeddings = variant.encode(sentences, batch_size=args.encode_batch_size, convert_to_tensor=True)
            if cuda:
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
        embeddings = embeddings.float()
        reference = embeddings if reference is None else reference
        out[name] = {
            "sentences_per_second": round(len(sentences) / seconds, 1),
            "seconds": round(seconds, 4),
            "min_cosine_to_fp32": round(float(F.cosine_similarity(embeddings, reference).min()), 6),
            "peak_memory_mb": round(torch.cuda.max_memory_allocated(args.device) / 2**20, 1) if cuda else None,
        }
    del variants, model
    _free(args.device)
    return out


def _largest_fitting(step, start: int, limit: int, granularity: int) -> dict:
    """The largest batch ``b`` (a multiple of ``granularity``, ``start <= b <= limit``) for which ``step(b)``
    does not run out of CUDA memory: doubling, then bisection."""
    import torch

    def fits(batch: int) -> bool:
        try:
            step(batch)
            return True
        except torch.cuda.OutOfMemoryError:
            return False
        finally:
            _free("cuda")

    good, bad, batch = 0, None, start
    while batch <= limit:
        if not fits(batch):
            bad = batch
            break
        good, batch = batch, batch * 2
    while bad is not None and bad - good > granularity:
        middle = (good + bad) // 2 // granularity * granularity
        if middle in (good, bad):
            break
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return {"largest_batch": good or None, "first_failing_batch": bad, "limit_searched": limit}


def bench_gradcache(args, tower: str) -> dict:
    if not args.device.startswith("cuda"):
        return {"skipped": "CUDA only: the search runs a step until CUDA reports out of memory"}
    import torch

    from jtcse.devices import autocast, check_precision
    from jtcse.losses import CachedJTCSELoss, JTCSELoss
    from jtcse.modeling.build import build_twin

    precision = check_precision(args.gradcache_precision, args.device)
    twin = build_twin(tower, tower, cael_every=2, max_seq_length=args.max_seq_length, device=args.device).float()
    twin.train()
    optimizer = torch.optim.AdamW(twin.parameters(), lr=1e-6)
    pool = _sentences(4096)

    def step_with(loss):
        def step(batch: int) -> None:
            sentences = [pool[i % len(pool)] + f" {i}" for i in range(batch)]
            features = {
                k: v.to(args.device) if torch.is_tensor(v) else v for k, v in twin.preprocess(sentences).items()
            }
            try:
                with autocast(precision, args.device):  # the replays of the backward pass run under it too
                    total = torch.stack(list(loss([features]).values())).sum()
                    total.backward()
                optimizer.step()
            finally:
                optimizer.zero_grad(set_to_none=True)  # a failed try leaves no gradients holding memory

        return step

    m = args.mini_batch_size
    cached = _largest_fitting(step_with(CachedJTCSELoss(twin, mini_batch_size=m)), m, args.gradcache_limit, m)
    plain = _largest_fitting(step_with(JTCSELoss(twin)), m, args.gradcache_limit, m)
    return {"precision": precision, "mini_batch_size": m, "cached": cached, "plain": plain}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tower", default=None, help="tower for every variant (default: the embedded MiniLM)")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: the best available)")
    parser.add_argument("--precisions", default=None, help="comma-separated (default: all the device runs)")
    parser.add_argument("--batch-size", type=int, default=64, help="training batch (the paper's: 64)")
    parser.add_argument("--max-seq-length", type=int, default=64, help="tokens per sentence (the paper's: 64)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed training rounds first")
    parser.add_argument("--repeats", type=int, default=5, help="timed training rounds (median reported)")
    parser.add_argument("--encode-sentences", type=int, default=8192)
    parser.add_argument("--encode-batch-size", type=int, default=256)
    parser.add_argument("--mini-batch-size", type=int, default=64, help="GradCache mini-batch for the search")
    parser.add_argument("--gradcache-limit", type=int, default=65536, help="largest batch the search tries")
    parser.add_argument("--gradcache-precision", default="bf16", help="precision of the GradCache search")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--skip", default="", help="comma-separated parts to leave out: train, encode, gradcache")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args()

    import torch

    from jtcse.devices import resolve_device
    from jtcse.modeling.loading import resolve_source

    args.device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tower = resolve_source(args.tower)
    precisions = _precisions(args.precisions, args.device)
    skip = {part.strip() for part in args.skip.split(",") if part.strip()}
    cuda = args.device.startswith("cuda")

    train = None if "train" in skip else bench_train(args, tower, precisions)
    encode = None if "encode" in skip else bench_encode(args, tower, precisions)
    gradcache = None if "gradcache" in skip else bench_gradcache(args, tower)

    ratios = {}
    if train:
        for precision, result in train.items():
            for key, value in result["ratios"].items():
                ratios[f"{key} ({precision})"] = value
    if encode:
        for name, result in encode.items():
            if name != "fp32":
                ratios[f"{name} / fp32 encode"] = round(
                    result["sentences_per_second"] / encode["fp32"]["sentences_per_second"], 3
                )
    within = {}
    if cuda and train and "fp32" in train:
        within["jtcse_no_cael / two_simcse_steps"] = train["fp32"]["ratios"]["jtcse_no_cael / two_simcse_steps"] <= 1.1
    if cuda and encode and "bf16_autocast" in encode:
        within["bf16_autocast / fp32 encode"] = ratios["bf16_autocast / fp32 encode"] >= 2.0
    report = {
        "benchmark": "GPU path: JTCSE vs SimCSE steps, encode by precision, peak memory, GradCache batch",
        "device": args.device,
        "device_name": torch.cuda.get_device_name(args.device) if cuda else platform.processor() or platform.machine(),
        "tower": tower,
        "settings": {
            "batch_size": args.batch_size,
            "max_seq_length": args.max_seq_length,
            "warmup": args.warmup,
            "repeats": args.repeats,
            "encode_sentences": args.encode_sentences,
            "encode_batch_size": args.encode_batch_size,
            "precisions": precisions,
            "threads": torch.get_num_threads(),
        },  # fmt: skip
        "train": train,
        "encode": encode,
        "gradcache": gradcache,
        "ratios": ratios,
        "peak_rss_mb": None if cuda else round(_peak_rss_mb(), 1),
        "targets": TARGETS,
        "within_target": within or "targets apply on a CUDA device",
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version()},
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
