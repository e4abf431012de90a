"""The parts of the GPU path a CPU can check: device and precision names refused up front, bf16 autocast on
the CPU, and every attention of the towers and of the CAEL cross stream going through fused SDPA."""

from __future__ import annotations

import pytest
import torch
from helpers.cli import click_app
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

from jtcse.devices import autocast, best_device, check_precision, resolve_device

NO_CUDA = not torch.cuda.is_available()


def test_devices_this_machine_has_are_returned_as_given():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device(None) == resolve_device("auto") == best_device()


@pytest.mark.parametrize(
    "name, message",
    [
        ("tpu9", r"^unknown device 'tpu9': use cpu, cuda, cuda:N or mps$"),
        pytest.param("cuda", r"^device 'cuda' asked for, but no CUDA device is available here$",
                     marks=pytest.mark.skipif(not NO_CUDA, reason="a CUDA device is visible")),
        pytest.param("cuda:1", r"^device 'cuda:1' asked for, but no CUDA device is available here$",
                     marks=pytest.mark.skipif(not NO_CUDA, reason="a CUDA device is visible")),
        pytest.param("cuda:99", r"^device 'cuda:99' asked for, but only \d+ CUDA device\(s\) are visible$",
                     marks=pytest.mark.skipif(NO_CUDA, reason="needs a CUDA device")),
        pytest.param("mps", r"^device 'mps' asked for, but MPS is not available here$",
                     marks=pytest.mark.skipif(torch.backends.mps.is_available(), reason="MPS is available")),
    ],
)  # fmt: skip
def test_a_device_this_machine_lacks_is_one_line(name, message):
    with pytest.raises(ValueError, match=message):
        resolve_device(name)


def test_the_loaders_device_check_is_the_same_check():
    from jtcse.modeling.loading import check_device

    assert check_device(None) is None and check_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="unknown device 'tpu9'"):
        check_device("tpu9")


def test_precisions_are_checked_against_the_device_they_run_on(monkeypatch):
    from jtcse import devices

    assert check_precision("bf16", "cpu") == "bf16" and check_precision("fp32") == "fp32"
    monkeypatch.setattr(devices, "native_bf16_cpu", lambda: False)
    assert check_precision("auto", "cpu") == "fp32"  # bf16 only where a GPU or the CPU has it natively
    monkeypatch.setattr(devices, "native_bf16_cpu", lambda: True)
    assert check_precision("auto", "cpu") == "bf16"
    with pytest.raises(ValueError, match=r"^unknown precision 'int4': use auto, fp32, fp16, bf16$"):
        check_precision("int4", "cpu")
    with pytest.raises(ValueError, match=r"^precision fp16 needs a CUDA device, not 'cpu'; use bf16 on the CPU"):
        check_precision("fp16", "cpu")  # also where a GPU is visible: the work runs on the CPU


@pytest.mark.skipif(not NO_CUDA, reason="a CUDA device is visible")
@pytest.mark.parametrize("precision", ["auto", "bf16", "fp16", "fp32"])
def test_any_precision_on_a_missing_cuda_device_names_the_device(precision):
    with pytest.raises(ValueError, match=r"^device 'cuda' asked for, but no CUDA device is available here$"):
        check_precision(precision, "cuda")


def test_cpu_bf16_autocast_runs_a_twin_training_step_close_to_fp32(tiny_bert, tiny_bert_b):
    from jtcse.losses import JTCSELoss
    from jtcse.modeling.build import build_twin

    torch.manual_seed(0)
    twin = build_twin(tiny_bert, tiny_bert_b, cael_every=2, max_seq_length=16, device="cpu")
    sentences = ["a cat sat on the mat", "the stock market fell", "kids play football outside", "a plane takes off"]
    reference = twin.encode(sentences, convert_to_tensor=True)
    with autocast("bf16", "cpu"):
        assert F.linear(torch.ones(1, 2), torch.ones(3, 2)).dtype == torch.bfloat16
        fast = twin.encode(sentences, convert_to_tensor=True)
    assert F.cosine_similarity(fast.float(), reference).min() > 0.99

    twin.train()
    loss = JTCSELoss(twin)
    features = twin.preprocess(sentences)
    with autocast("bf16", "cpu"):
        total = torch.stack(list(loss([features]).values())).sum()  # one column: the dropout views are the positives
    total.backward()
    grads = [p.grad for p in twin.parameters() if p.grad is not None]
    assert torch.isfinite(total) and grads and all(torch.isfinite(g).all() for g in grads)


class CountSDPA(TorchFunctionMode):
    """Counts calls of ``scaled_dot_product_attention`` (the real function runs)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is F.scaled_dot_product_attention:
            self.calls += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("tower", ["tiny_bert", "tiny_roberta"])
def test_towers_load_with_sdpa_and_every_attention_of_a_training_forward_is_fused(tower, request):
    """Single towers and both twin towers load with ``attn_implementation == "sdpa"``; a training forward of a
    4-layer twin with k=2 runs SDPA 2*4 times in the primitive streams and 2*3 times in the cross stream
    (CAELs at layers 2 and 4 through jtcse's own SDPA call, layer 3 through the tower's)."""
    from jtcse.modeling.build import build_twin
    from jtcse.modeling.loading import load_model

    path = request.getfixturevalue(tower)
    single = load_model(path)
    assert single[0].auto_model.config._attn_implementation == "sdpa"
    twin = build_twin(path, path, cael_every=2, max_seq_length=16, device="cpu")
    models = twin[0].tower_models()
    assert [m.config._attn_implementation for m in models] == ["sdpa", "sdpa"]
    layers = models[0].config.num_hidden_layers
    assert layers == 4

    features = twin.preprocess(["a cat sat on the mat", "the stock market fell today"])
    twin.train()
    with CountSDPA() as counter:
        out = twin(features)
    assert "cross_pooled_1" in out
    assert counter.calls == 2 * layers + 2 * (layers - 2 + 1)
    twin.eval()
    with CountSDPA() as counter, torch.no_grad():
        twin(features)
    assert counter.calls == 2 * layers  # inference: no cross stream


@pytest.mark.slow
def test_bench_gpu_smoke_runs_on_the_cpu_and_reports_every_part(tiny_bert):
    """scripts/bench_gpu.py with tiny settings on the CPU: the JSON has every part; GradCache says CUDA only."""
    import json

    from helpers.cli import REPO, run_script_here

    printed = run_script_here(REPO / "scripts" / "bench_gpu.py", "--device", "cpu", "--tower", tiny_bert,
                              "--batch-size", "4", "--max-seq-length", "16", "--warmup", "0", "--repeats", "1",
                              "--encode-sentences", "16", "--encode-batch-size", "8")  # fmt: skip
    report = json.loads(printed)
    assert report["device"] == "cpu" and report["settings"]["precisions"] == ["fp32", "bf16"]
    for precision in ("fp32", "bf16"):
        train = report["train"][precision]
        assert set(train["median_s"]) == {"two_simcse_steps", "jtcse_no_cael", "jtcse_k2"}
        assert set(train["ratios"]) == {"jtcse_no_cael / two_simcse_steps", "jtcse_k2 / two_simcse_steps"}
        assert all(v > 0 for v in train["median_s"].values())
    assert set(report["encode"]) == {"fp32", "bf16_autocast", "bf16_weights"}
    for result_ in report["encode"].values():
        assert result_["sentences_per_second"] > 0 and result_["min_cosine_to_fp32"] > 0.99
    assert "bf16_autocast / fp32 encode" in report["ratios"]
    assert "CUDA only" in report["gradcache"]["skipped"] and report["peak_rss_mb"] > 0
    assert report["within_target"] == "targets apply on a CUDA device"


# ------------------------------------------------------------------------------ the wiring: every command checks first
# (command, what it needs to parse) for every command with --device: the option's callback checks it when parsed
DEVICE_COMMANDS = [
    (("train",), []), (("simcse",), ["-o", "out"]), (("distill",), ["-t", "teacher", "-o", "out"]),
    (("pipeline",), ["-o", "out"]), (("encode",), ["-i", "in.txt", "-o", "out.npy"]),
    (("eval", "sts"), ["model", "--data-dir", "d"]), (("eval", "mteb"), ["model"]), (("diagnose",), ["model", "-o", "d"]),
    (("index", "build"), ["-i", "in.txt", "-o", "idx"]),
    (("index", "mine"), ["-i", "pairs.csv", "-o", "mined.jsonl"]), (("rtt",), ["-o", "rtt"]),
]  # fmt: skip


def _parse(path: tuple[str, ...], args: list[str]):

    command = click_app()
    for name in path:
        command = command.commands[name]
    return command.make_context(path[-1], args)


@pytest.mark.slow
def test_every_command_with_a_device_option_checks_it_when_parsed():

    def with_device(command, path=()):
        if hasattr(command, "commands"):
            return [p for name, sub in command.commands.items() for p in with_device(sub, (*path, name))]
        return [path] if any(param.name == "device" for param in command.params) else []

    assert sorted(with_device(click_app())) == sorted(path for path, _ in DEVICE_COMMANDS)
    for path, needed in DEVICE_COMMANDS:
        assert _parse(path, [*needed, "--device", "cpu"]).params["device"] == "cpu"
        with pytest.raises(ValueError, match=r"^unknown device 'tpu9': use cpu, cuda, cuda:N or mps$"):
            _parse(path, [*needed, "--device", "tpu9"])
        if NO_CUDA:
            with pytest.raises(ValueError, match=r"^device 'cuda' asked for, but no CUDA device is available here$"):
                _parse(path, [*needed, "--device", "cuda"])


@pytest.mark.cli
@pytest.mark.skipif(not NO_CUDA, reason="a CUDA device is visible")
def test_cuda_on_a_machine_without_it_is_one_line_and_nothing_is_written(tmp_path):
    from helpers.cli import invoke_cli, one_error_line

    line = one_error_line(invoke_cli("train", "--device", "cuda", "-o", tmp_path / "twin"))
    assert line == "Error: device 'cuda' asked for, but no CUDA device is available here"
    assert not (tmp_path / "twin").exists()


def test_trainers_check_device_and_precision_before_loading_anything(tmp_path):
    """fp16 on the CPU is refused up front by every trainer and by the pipeline (no model named here exists: a
    check after loading would fail otherwise); bf16 on the CPU is accepted (autocast)."""
    from jtcse.pipeline.run import run_pipeline
    from jtcse.pipeline.settings import PipelineConfig
    from jtcse.training.distill import distill
    from jtcse.training.simcse import train_simcse
    from jtcse.training.trainer_run import training_device
    from jtcse.training.twin import train_twin

    missing = str(tmp_path / "no-model")
    fp16 = r"^precision fp16 needs a CUDA device, not 'cpu'; use bf16 on the CPU, or fp32$"
    calls = [
        lambda: train_twin(missing, missing, None, tmp_path / "twin", precision="fp16", device="cpu"),
        lambda: train_simcse(missing, None, tmp_path / "tower", precision="fp16", device="cpu"),
        lambda: distill(missing, missing, None, tmp_path / "student", precision="fp16", device="cpu"),
        lambda: run_pipeline(
            tmp_path / "pipeline",
            PipelineConfig.from_values({"tower_a": missing, "precision": "fp16"}),
            device="cpu",
        ),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=fp16):
            call()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert training_device("cpu", "bf16") == "cpu" and training_device(None, "fp32") is None
    if NO_CUDA:
        with pytest.raises(ValueError, match="no CUDA device is available here"):
            training_device("cuda", "fp32")
        assert training_device(None, "bf16") is None  # the CPU, where bf16 autocast runs
    else:
        with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES=1"):
            training_device("cuda:1", "fp32")
