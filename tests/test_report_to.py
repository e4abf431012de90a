"""``--report-to`` (issue 46): the trainer reports where HF Trainer users look. TensorBoard for real: a tiny
``jtcse simcse`` run writes event files into its folder, and TensorBoard's own event reader reads the loss back."""

from __future__ import annotations

import json

import pytest
from helpers.cli import invoke_cli


@pytest.mark.slow
@pytest.mark.cli
def test_a_run_reports_its_loss_to_tensorboard(tiny_bert, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"Sentence number {i} is about topic {i % 7}.\n" for i in range(40)), encoding="utf-8")
    out = tmp_path / "run"
    result = invoke_cli("simcse", "--model", tiny_bert, "--corpus", corpus, "-o", out, "--max-steps", "4", "--batch-size", "8",
                        "--logging-steps", "1", "--report-to", "tensorboard")  # fmt: skip
    assert result.returncode == 0, result.stderr
    (logs,) = (out / "runs").iterdir()  # runs/<time>_<host>, beside the model (checkpoints/ is deleted)
    events = EventAccumulator(str(logs))
    events.Reload()
    losses = events.Scalars("train/loss")
    assert [event.step for event in losses] == [1, 2, 3, 4]
    history = json.loads((out / "run_summary.json").read_text())
    listed = json.loads((out / "jtcse_outputs.json").read_text())["files"]  # --overwrite removes them
    assert any(name.startswith(f"runs/{logs.name}/") for name in listed), listed
    assert all(event.value == event.value and event.value > 0 for event in losses)  # finite, positive losses
    assert history["config"].get("report_to") is None  # how a run reports is not what it trained


def test_report_to_is_one_setting_of_every_trainer_and_of_the_pipeline():
    from jtcse.pipeline.recipe import dump_recipe
    from jtcse.pipeline.settings import PipelineConfig
    from jtcse.training.arguments import build_training_args, run_name
    from jtcse.training.settings import DistillSettings, TwinSettings, WarmupSettings

    for cls in (WarmupSettings, TwinSettings, DistillSettings):
        assert cls().training.report_to == "none"  # the default stays none
    assert "report_to" in dump_recipe(PipelineConfig())
    assert run_name("/x/OUT/twin") == "OUT/twin"
    args = build_training_args("/x/OUT/twin", TwinSettings().replace(report_to="tensorboard").training, has_dev=False,
                               logging_steps=1, device="cpu")  # fmt: skip
    assert args.report_to == ["tensorboard"] and args.run_name == "OUT/twin"
