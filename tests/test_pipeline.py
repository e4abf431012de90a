"""``jtcse pipeline``: stages run in order, finished stages are skipped on rerun, one summary table."""

from __future__ import annotations

import json

import pytest

from jtcse.defaults import default_corpus_sentences
from jtcse.errors import JTCSEError
from jtcse.training.pipeline import run_pipeline

TINY = {"batch_size": 16, "max_steps": 2, "learning_rate": 1e-3}


@pytest.fixture()
def corpus_file(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(default_corpus_sentences(limit=48)) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_warmup_stages_run_once_and_are_skipped_on_rerun(tiny_bert, tiny_bert_b, corpus_file, tmp_path):
    out = tmp_path / "recipe"
    first = run_pipeline(
        out, tower_a=tiny_bert, tower_b=tiny_bert_b, corpus=corpus_file, until="warmup", warmup_settings=TINY
    )
    assert [(row["stage"], row["status"]) for row in first["table"]] == [("warmup_a", "ran"), ("warmup_b", "ran")]
    assert first["stages"]["warmup_b"]["config"]["seed"] == 43  # the second tower gets another seed
    weights = out / "tower_a" / "model.safetensors"
    stamp = weights.stat().st_mtime_ns

    second = run_pipeline(
        out, tower_a=tiny_bert, tower_b=tiny_bert_b, corpus=corpus_file, until="warmup", warmup_settings=TINY
    )
    assert [row["status"] for row in second["table"]] == ["skipped (done)", "skipped (done)"]
    assert weights.stat().st_mtime_ns == stamp
    table = (out / "pipeline_summary.md").read_text(encoding="utf-8")
    assert "| warmup_a | skipped (done) |" in table
    assert json.loads((out / "pipeline_summary.json").read_text())["until"] == "warmup"


def test_bad_pipeline_settings_are_clear_errors(tmp_path):
    with pytest.raises(JTCSEError, match="--until must be one of"):
        run_pipeline(tmp_path, until="everything")
    with pytest.raises(JTCSEError, match="the eval stage needs --dev-file"):
        run_pipeline(tmp_path)
    with pytest.raises(JTCSEError, match="dev file not found"):
        run_pipeline(tmp_path, dev_file=tmp_path / "missing.csv")


@pytest.mark.slow
def test_full_pipeline_runs_and_reruns_as_skips(tiny_bert, tiny_bert_b, corpus_file, tmp_path, shared_data):
    dev = tmp_path / "dev.csv"
    lines = (shared_data / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()[:40]
    dev.write_text("\n".join(lines) + "\n", encoding="utf-8")
    settings = {"batch_size": 16, "max_steps": 2, "eval_steps": 2}
    kwargs = dict(
        tower_a=tiny_bert, tower_b=tiny_bert_b, corpus=corpus_file, dev_file=dev,
        warmup_settings=settings, twin_settings=settings, distill_settings=settings,
    )
    first = run_pipeline(tmp_path / "recipe", **kwargs)
    assert [row["status"] for row in first["table"]] == ["ran"] * 5
    scores = first["stages"]["eval"]["dev_spearman"]
    assert set(scores) == {"warmup_a", "warmup_b", "twin", "distill"}
    trained = [first["stages"][stage] for stage in ("warmup_a", "warmup_b", "twin", "distill")]
    assert len({frozenset(summary) for summary in trained}) == 1  # one summary schema for every stage
    assert [summary["stage"] for summary in trained] == ["simcse", "simcse", "twin", "distill"]
    second = run_pipeline(tmp_path / "recipe", **kwargs)
    assert [row["status"] for row in second["table"]] == ["skipped (done)"] * 5
    assert second["stages"]["eval"]["dev_spearman"] == scores
