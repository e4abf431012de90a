"""Cross-rank negatives: a real two-process torchrun (gloo) step equals one process over the global batch."""

from __future__ import annotations

import sys

import pytest
import torch
from helpers import ddp_loss_worker
from helpers.cli import REPO, run_launch
from helpers.shared import built_once

WORKER = REPO / "tests" / "helpers" / "ddp_loss_worker.py"

pytestmark = [pytest.mark.distributed, pytest.mark.slow]


def _run(command, tmp_path):
    result = run_launch(command, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="session")
def runs(tiny_bert, tiny_bert_b, shared_root):
    """The worker's results: a two-process torchrun step and one process over the global batch (made once per run,
    shared by the xdist workers)."""

    def build(folder):
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
        _run([*torchrun, str(WORKER), tiny_bert, tiny_bert_b, str(folder / "two.pt")], folder)
        # the reference needs no process of its own: the worker without torchrun is one process over the whole batch
        threads = torch.get_num_threads()
        try:
            ddp_loss_worker.main(tiny_bert, tiny_bert_b, str(folder / "one.pt"))
        finally:
            torch.set_num_threads(threads)  # (the worker takes one thread)

    folder = built_once(shared_root, "ddp_loss_runs", build)
    return torch.load(folder / "two.pt"), torch.load(folder / "one.pt")


def _max_difference(a, b):
    terms = max(abs(a["terms"][k] - b["terms"][k]) for k in a["terms"])
    grads = max((a["grads"][n] - b["grads"][n]).abs().max().item() for n in a["grads"])
    return terms, grads


@pytest.mark.parametrize("config", ["gather", "gather_cached"])
def test_gathered_two_process_step_equals_one_process_over_the_global_batch(runs, config):
    two, one = runs
    assert two[config]["world_size"] == 2 and one["local"]["world_size"] == 1
    reference = one["local"]  # one process, the whole batch, nothing to gather
    assert set(two[config]["terms"]) == {"nce_1", "nce_2", "icnce", "ictm"}
    assert set(two[config]["grads"]) == set(reference["grads"])
    for key, value in reference["terms"].items():
        assert two[config]["terms"][key] == pytest.approx(value, abs=1e-5), key
    for name, grad in reference["grads"].items():  # float32 sums in another order: errors scale with the largest
        scale = max(1.0, grad.abs().max().item())  # entry (the embedding rows gather every token's gradient)
        torch.testing.assert_close(two[config]["grads"][name], grad, rtol=1e-5, atol=1e-5 * scale, msg=name)


def test_without_gather_the_two_process_step_differs(runs):
    two, one = runs
    terms, grads = _max_difference(two["local"], one["local"])
    assert terms > 1e-3 and grads > 1e-4, (terms, grads)
