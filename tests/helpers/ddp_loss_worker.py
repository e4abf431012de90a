"""One DDP step of the JTCSE losses per configuration, for ``torchrun --nproc_per_node N`` (gloo, CPU).

Usage: ``torchrun --nproc_per_node 2 tests/helpers/ddp_loss_worker.py TOWER_A TOWER_B OUT.pt``.
Run without torchrun it is a one-process run over the whole batch (the reference).

Each rank takes its contiguous shard of :data:`SENTENCES`; dropout is 0. For every configuration in
:data:`CONFIGS` the rank runs forward + backward through ``DistributedDataParallel`` (gradients
averaged over ranks); rank 0 writes ``{config: {"terms": ..., "grads": ...}}`` to OUT.pt, the terms
averaged over ranks (each rank's loss is the mean over its own anchors, so the mean of the ranks'
losses is the global mean).
"""

from __future__ import annotations

import gc
import os
import sys

SENTENCES = [
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog.",
    "Python modules are imported once.",
    "Rain is expected tomorrow afternoon in the north.",
    "She plays the violin.",
    "Stock prices fell sharply after the announcement of the new tariffs.",
    "Tea.",
    "The museum opens at nine on weekdays.",
]

CONFIGS = {
    "gather": dict(cached=False, gather_across_devices=True),
    "gather_cached": dict(cached=True, gather_across_devices=True, mini_batch_size=3),
    "local": dict(cached=False, gather_across_devices=False),
}


def main(tower_a: str, tower_b: str, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn

    from jtcse import build_twin
    from jtcse.losses import CachedJTCSELoss, JTCSELoss

    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    torch.set_num_threads(1)
    twin = build_twin(tower_a, tower_b, cael_every=2)
    for module in twin.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    twin.train()
    model = nn.parallel.DistributedDataParallel(twin) if distributed else twin
    shard = len(SENTENCES) // world
    features = twin.preprocess(SENTENCES[rank * shard : (rank + 1) * shard])

    results = {}
    for name, config in CONFIGS.items():
        config = dict(config)
        cls = CachedJTCSELoss if config.pop("cached") else JTCSELoss
        loss = cls(twin, seed=11, **config)
        loss.model = model  # what SentenceTransformerTrainer does once it has wrapped the model
        twin.zero_grad()
        terms = loss([dict(features)], None)
        torch.stack(list(terms.values())).sum().backward()
        values = torch.stack([t.detach() for t in terms.values()])
        if distributed:
            dist.all_reduce(values)
            values /= world
        results[name] = {
            "terms": dict(zip(terms, values.tolist(), strict=True)),
            "grads": {n: p.grad.clone() for n, p in twin.named_parameters() if p.grad is not None},
            "world_size": world,
        }
    # DDP's reducer holds the process group: released after destroy_process_group, its gloo group's destructor
    # could wait forever on threads that talked to a rank already gone. Release it while both ranks are here.
    del model, loss, terms
    gc.collect()
    if rank == 0:
        torch.save(results, out)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    gc.disable()  # a rank of a test: its imports without the collector walking them (tests/conftest.py), ~2 CPU-s
    main(*sys.argv[1:4])
