"""One JTCSE training step against two plain SimCSE steps, built on one tokenised batch and timed side by side:
what ``scripts/bench_train.py`` and ``scripts/bench_gpu.py`` measure.

Each step is forward + backward + AdamW step in training mode (dropout on). SimCSE = one tower (Transformer + CLS
pooling) with the NT-Xent loss over the 2B views in one pass; JTCSE = the twin with ``JTCSELoss``, without CAELs
(TNCSE) and with ``cael_every=2``. The variants take turns within each round so that machine noise hits them alike.
"""

from __future__ import annotations

import statistics
import time


def make_steps(tower_path, sentences, *, max_seq_length, device, precision="fp32"):
    """The three step functions (``simcse``, ``jtcse_no_cael``, ``jtcse_k2``) on one tokenised batch, the
    forward passes under ``precision`` autocast (:func:`jtcse.devices.autocast`); also the SimCSE model."""
    import torch

    from jtcse.devices import autocast
    from jtcse.losses import JTCSELoss
    from jtcse.losses.functional import info_nce
    from jtcse.losses.jtcse_loss import stack_views
    from jtcse.modeling.build import build_twin
    from jtcse.modeling.loading import load_cls_tower

    def make_step(model, loss_fn):
        model.to(device).float().train()  # fp32 master weights, whatever dtype the checkpoint was saved in
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
        features = {k: v.to(device) if torch.is_tensor(v) else v for k, v in model.preprocess(sentences).items()}

        def step() -> None:
            with autocast(precision, device):
                loss = loss_fn(features)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return step

    simcse_model, _ = load_cls_tower(tower_path, max_seq_length=max_seq_length, device=device)
    pad_id = simcse_model.tokenizer.pad_token_id or 0

    def simcse_loss(features):
        embeddings = simcse_model(stack_views([features], pad_id))["sentence_embedding"]
        half = embeddings.shape[0] // 2
        return info_nce(embeddings[:half], embeddings[half:])

    steps = {"simcse": make_step(simcse_model, simcse_loss)}
    for name, k in (("jtcse_no_cael", None), ("jtcse_k2", 2)):
        twin = build_twin(tower_path, tower_path, cael_every=k, max_seq_length=max_seq_length, device=device)
        loss = JTCSELoss(twin)
        steps[name] = make_step(twin, lambda f, loss=loss: torch.stack(list(loss([f]).values())).sum())
    return steps, simcse_model


def timed(fn, device: str, cpu: list[float] | None = None) -> float:
    """Seconds ``fn()`` takes (CUDA work waited for on both sides); the process's CPU seconds are appended to
    ``cpu`` when given."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start, start_cpu = time.perf_counter(), time.process_time()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    if cpu is not None:
        cpu.append(time.process_time() - start_cpu)
    return time.perf_counter() - start


def time_rounds(
    steps,
    device: str,
    *,
    warmup: int,
    repeats: int,
    peaks: dict | None = None,
    cpu: dict[str, list[float]] | None = None,
) -> dict[str, list[float]]:
    """Seconds per round of two SimCSE steps, one TNCSE step and one k=2 JTCSE step, interleaved per round so
    machine noise hits all alike (the first ``warmup`` rounds untimed). On CUDA, ``peaks`` (if given) gets
    each variant's peak allocated MiB. ``cpu`` (if given) gets the process's CPU seconds of each timed round, by
    variant: on a machine other jobs share, the work a step does, which their load barely moves (with one thread;
    more threads count their waits too)."""
    import torch

    cuda = device.startswith("cuda") and peaks is not None
    spent: list[float] = []

    def run(name: str, fn) -> float:
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
        seconds = timed(fn, device, spent)
        if cuda:
            peaks[name] = max(peaks.get(name, 0.0), torch.cuda.max_memory_allocated(device) / 2**20)
        return seconds

    times: dict[str, list[float]] = {"two_simcse_steps": [], "jtcse_no_cael": [], "jtcse_k2": []}
    for round_ in range(warmup + repeats):
        spent.clear()
        two_simcse = run("simcse", steps["simcse"]) + run("simcse", steps["simcse"])
        no_cael = run("jtcse_no_cael", steps["jtcse_no_cael"])
        k2 = run("jtcse_k2", steps["jtcse_k2"])
        if round_ >= warmup:
            for name, seconds in zip(times, (two_simcse, no_cael, k2), strict=True):
                times[name].append(seconds)
            if cpu is not None:
                for name, seconds in zip(times, (spent[0] + spent[1], spent[2], spent[3]), strict=True):
                    cpu.setdefault(name, []).append(seconds)
    return times


def step_ratios(times: dict[str, list[float]]) -> tuple[dict[str, float], dict[str, float]]:
    """Median seconds per variant, and each JTCSE step's median over that of two SimCSE steps."""
    median = {name: statistics.median(values) for name, values in times.items()}
    ratios = {
        "jtcse_no_cael / two_simcse_steps": median["jtcse_no_cael"] / median["two_simcse_steps"],
        "jtcse_k2 / two_simcse_steps": median["jtcse_k2"] / median["two_simcse_steps"],
    }
    return median, ratios
