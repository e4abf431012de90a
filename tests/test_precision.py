"""bf16 where the CPU has it: ``auto`` asks torch whether this CPU multiplies bfloat16 natively (one place,
``jtcse.devices.native_bf16_cpu``), and every contrastive and distillation loss keeps its similarities, temperature
scaling and log-softmax in float32 under bf16 autocast: the loss equals the float32 loss of the same (bf16-rounded)
embeddings, and the gradient flows back to them."""

from __future__ import annotations

import pytest
import torch

from jtcse import devices
from jtcse.devices import autocast, check_precision, in_float32


@pytest.mark.parametrize("native, expected", [(False, "fp32"), (True, "bf16")])
def test_auto_is_bf16_on_a_cpu_only_where_it_has_native_bf16(monkeypatch, native, expected):
    from jtcse.training.arguments import build_training_args, precision_flags
    from jtcse.training.settings import TrainingSettings

    assert devices.CPU_AUTO_BF16 is True  # since the quality check of issue 43 held
    monkeypatch.setattr(devices, "native_bf16_cpu", lambda: native)  # the one place that asks
    assert check_precision("auto", "cpu") == expected
    assert precision_flags("auto", "cpu") == {"fp16": False, "bf16": native}
    args = build_training_args("out", TrainingSettings(), has_dev=False, logging_steps=1, device="cpu")
    assert args.bf16 is native and (not native or args.use_cpu)  # the trainer's CPU autocast, or none
    assert check_precision("fp32", "cpu") == "fp32" and check_precision("bf16", "cpu") == "bf16"  # as asked


@pytest.mark.parametrize("native", [False, True])
def test_with_the_cpu_default_off_auto_is_fp32_on_any_cpu(monkeypatch, native):
    """CPU_AUTO_BF16 is the one switch: off, auto is fp32 on any CPU, and bf16 is there to ask for."""
    monkeypatch.setattr(devices, "CPU_AUTO_BF16", False)
    monkeypatch.setattr(devices, "native_bf16_cpu", lambda: native)
    assert check_precision("auto", "cpu") == "fp32" and check_precision("bf16", "cpu") == "bf16"


@pytest.mark.parametrize(
    "capabilities, mkldnn, native",
    [
        ({"avx512_bf16": True, "amx_bf16": False}, True, True),
        ({"avx512_bf16": False, "amx_bf16": True}, True, True),
        ({"avx512_bf16": False, "amx_bf16": False, "avx2": True}, True, False),
        ({"avx512_bf16": True}, False, False),  # no oneDNN: nothing multiplies bf16 natively
        ({"architecture": "arm64"}, True, False),
    ],
)
def test_native_bf16_is_asked_of_torch(monkeypatch, capabilities, mkldnn, native):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities)
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: mkldnn)
    assert devices.native_bf16_cpu() is native


def test_the_run_summary_and_the_trainer_say_the_resolved_precision(monkeypatch):
    """A stage's recorded settings keep what was asked (``auto`` is not part of a finished run's identity); its
    summary says what ran (TrainerRun.precision)."""
    from jtcse.training.settings import TrainingSettings, recorded_settings

    assert "precision" not in recorded_settings(TrainingSettings())
    for native, expected in ((False, "fp32"), (True, "bf16")):
        monkeypatch.setattr(devices, "native_bf16_cpu", lambda native=native: native)
        from jtcse.training.trainer_run import TrainerRun

        run = TrainerRun.__new__(TrainerRun)  # only its settings and device matter here
        run.settings, run.device = TrainingSettings(), "cpu"
        assert run.precision == expected


# ------------------------------------------------------------------------------------ float32 under autocast
def _views(rows=8, width=16, seed=0):
    """Two bf16 "views" (leaves, as a bf16 model under autocast returns them) and their float32 copies."""
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(rows, width, generator=generator).bfloat16().requires_grad_()
    b = (a.detach().float() + 0.3 * torch.randn(rows, width, generator=generator)).bfloat16().requires_grad_()
    return a, b


def _same_loss_and_gradient(loss_fn, *tensors):
    """``loss_fn`` under bf16 autocast on the bf16 ``tensors`` against ``loss_fn`` in float32 on their values: the
    loss to float32 precision, and the gradients (to the bf16 leaves) as the float32 ones to bf16's precision (a
    bf16 leaf sums the gradients of the terms that read it in bf16)."""
    with autocast("bf16", "cpu"):
        loss = loss_fn(*tensors)
    assert loss.dtype == torch.float32
    loss.backward()
    copies = [t.detach().float().requires_grad_() for t in tensors]
    reference = loss_fn(*copies)
    reference.backward()
    torch.testing.assert_close(loss, reference, rtol=1e-6, atol=1e-7)
    for leaf, copy in zip(tensors, copies, strict=True):
        assert leaf.grad is not None and leaf.grad.dtype == torch.bfloat16 and leaf.grad.abs().sum() > 0
        scale = float(copy.grad.abs().max())
        torch.testing.assert_close(leaf.grad.float(), copy.grad, rtol=2e-2, atol=2e-2 * scale)
    return loss


def test_bf16_autocast_would_round_the_logits_that_the_losses_keep_in_float32():
    """The control: under bf16 autocast a cosine matrix over a temperature of 0.05 is bfloat16 (steps of 1/256
    near 1, i.e. 0.08 in the logits), so without the float32 region InfoNCE moves by far more than float32's
    precision."""
    a, b = _views()
    unit_a, unit_b = (torch.nn.functional.normalize(v.detach().float(), dim=-1) for v in (a, b))
    labels = torch.arange(len(a))
    with autocast("bf16", "cpu"):
        rounded = torch.nn.functional.cross_entropy(unit_a @ unit_b.T / 0.05, labels)
        kept = torch.nn.functional.cross_entropy(in_float32(torch.matmul)(unit_a, unit_b.T) / 0.05, labels)
    exact = torch.nn.functional.cross_entropy(unit_a @ unit_b.T / 0.05, labels)
    assert (unit_a @ unit_b.T).dtype == torch.float32
    assert abs(float(rounded - exact)) > 1e-2 * float(exact)  # a loss near 3e-5, off by percents
    assert float(kept) == float(exact)


def test_infonce_icnce_and_ictm_compute_in_float32_under_autocast():
    from jtcse.losses.functional import icnce, ictm, info_nce

    _same_loss_and_gradient(lambda x, y: info_nce(x, y, temperature=0.05), *_views())
    xa, xb = _views(seed=1)
    ya, yb = _views(seed=2)
    _same_loss_and_gradient(lambda *t: icnce(*t, temperature=0.05), xa, xb, ya, yb)
    h1, h2 = _views(seed=3)
    p1, p2 = _views(seed=4)
    _same_loss_and_gradient(ictm, h1, h2, p1, p2)


@pytest.mark.slow
def test_the_jtcse_loss_and_its_gradcache_form_compute_in_float32_under_autocast(tiny_bert, tiny_bert_b):
    """JTCSELoss's terms on a twin's training outputs, and CachedJTCSELoss's loss on its cached features, are the
    float32 loss of the bf16 features."""
    from jtcse.losses import CachedJTCSELoss, JTCSELoss
    from jtcse.modeling.build import build_twin

    twin = build_twin(tiny_bert, tiny_bert_b, cael_every=2, max_seq_length=16, device="cpu")
    keys = ("pooled_1", "pooled_2", "cross_pooled_1", "cross_pooled_2", "pooler_1", "pooler_2")
    leaves = [
        torch.randn(8, 32, generator=torch.Generator().manual_seed(i)).bfloat16().requires_grad_() for i in range(6)
    ]
    loss = JTCSELoss(twin, seed=3)

    def terms(*features):
        loss.set_training_step(0)  # the same ICNCE direction for both calls
        return torch.stack(list(loss.compute_loss_from_outputs(dict(zip(keys, features, strict=True))).values())).sum()

    _same_loss_and_gradient(terms, *leaves)

    cached = CachedJTCSELoss(twin, mini_batch_size=2, seed=3)
    packed = torch.randn(8, 6 * 32, generator=torch.Generator().manual_seed(9)).bfloat16().requires_grad_()

    def from_cache(block):
        cached.set_training_step(0)
        return cached.calculate_loss([[block[:4]], [block[4:]]])

    _same_loss_and_gradient(from_cache, packed)


@pytest.mark.slow
@pytest.mark.parametrize("mini_batch_size", [None, 4])
def test_the_simcse_loss_computes_in_float32_under_autocast(tiny_bert, mini_batch_size):
    """The warm-up's MultipleNegativesRankingLoss (and its GradCache form) scores with float32 cosines."""
    from jtcse.modeling.loading import load_tower
    from jtcse.training.settings import ContrastiveSettings
    from jtcse.training.simcse import simcse_loss

    tower = load_tower(tiny_bert, role="tower")[0]
    loss = simcse_loss(tower, ContrastiveSettings(mini_batch_size=mini_batch_size))
    assert loss.get_config_dict()["similarity_fct"] == "cos_sim"  # recorded as before
    labels = torch.zeros(8)
    if mini_batch_size is None:
        _same_loss_and_gradient(lambda q, d: loss.compute_loss_from_embeddings([q, d], labels), *_views())
    else:
        _same_loss_and_gradient(lambda q, d: loss.calculate_loss([[q], [d]]), *_views())


@pytest.mark.slow
@pytest.mark.parametrize(
    "objective, width",
    [("similarity", 32), ("mse-normalized", 32), ("similarity+mse-normalized", 48)],  # a sum with its projection
)
def test_the_distillation_losses_compute_in_float32_under_autocast(tiny_bert, objective, width):
    from jtcse.modeling.loading import load_student
    from jtcse.training.distill import distillation_loss

    student = load_student(tiny_bert)[0]
    loss = distillation_loss(student, objective, teacher_dim=width)
    teacher = torch.randn(8, width, generator=torch.Generator().manual_seed(5))  # cached float32 targets
    _same_loss_and_gradient(lambda s: loss.compute_loss_from_embeddings([s], [teacher]), _views(width=32)[0])


@pytest.mark.slow
def test_a_teacher_encoded_in_bf16_is_cached_apart_from_fp32(tiny_bert, tmp_path):
    """The teacher encodes under the stage's autocast; its float32 targets at bf16 are another cache entry than at
    fp32 (whose key is what it always was), and its note says the precision."""
    import json

    import numpy as np

    from jtcse.training.teacher_cache import teacher_targets

    sentences = ["a cat sat on the mat", "the stock market fell", "kids play football outside", "a plane takes off"]
    exact = teacher_targets(tiny_bert, sentences, tmp_path, precision="fp32", show_progress_bar=False)
    fast = teacher_targets(tiny_bert, sentences, tmp_path, precision="bf16", show_progress_bar=False)
    assert exact.cache_path != fast.cache_path and not fast.cache_hit
    assert exact.embeddings.dtype == fast.embeddings.dtype == np.float32
    assert not np.array_equal(exact.embeddings, fast.embeddings)
    unit = [e / np.linalg.norm(e, axis=1, keepdims=True) for e in (exact.embeddings, fast.embeddings)]
    assert (unit[0] * unit[1]).sum(axis=1).min() > 0.99
    assert json.loads(fast.cache_path.with_suffix(".json").read_text())["precision"] == "bf16"
    assert teacher_targets(tiny_bert, sentences, tmp_path, precision="bf16").cache_hit


@pytest.mark.slow
def test_bench_pipeline_smoke_runs_every_stage_under_each_precision(tiny_bert, shared_data, tmp_path):
    """scripts/bench_pipeline.py with a tiny tower and a step a stage: every stage of the default pipeline is timed
    under both precisions, with the ratios (wall and CPU seconds), the load and the padded share (no timing is
    checked)."""
    import json

    from helpers.cli import REPO, run_script_here

    out = tmp_path / "bench.json"
    run_script_here(REPO / "scripts" / "bench_pipeline.py", "--tower", tiny_bert, "--lines", "48", "--dev-pairs", "12",
                    "--warmup-steps", "1", "--twin-steps", "1", "--distill-steps", "1",
                    "--corpus", shared_data / "wiki12k.txt", "--dev-file", shared_data / "stsbenchmark" / "sts-dev.csv",
                    "--variants", "fp32,bf16", "-o", out)  # fmt: skip
    report = json.loads(out.read_text())
    stages = ["warmup_a", "warmup_b", "twin", "ensemble", "distill", "eval"]
    assert list(report["seconds"]["fp32"]) == list(report["seconds"]["bf16"]) == stages
    assert list(report["cpu_seconds"]["bf16"]) == list(report["load"]["bf16"]) == stages
    assert set(report["cpu_ratio_vs_fp32"]["bf16"]) == set(stages)
    assert set(report["ratio_vs_fp32"]["bf16"]) == set(stages) and report["variants"]["bf16"] == "bf16"
    for table in ("warmup", "twin", "distill"):
        share = report["padded_token_share"][table]
        assert 0 <= share["length_grouped"] < share["random"] < 1
