"""Distillation (``jtcse distill``): MSE to cached teacher targets, plain-loadable CLS student, resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from transformers import TrainerCallback

from helpers.cli import run_cli, run_python
from jtcse.defaults import default_corpus_sentences
from jtcse.errors import JTCSEError
from jtcse.training.distill import distill

REPO = Path(__file__).resolve().parents[1]
SENTENCES = default_corpus_sentences(limit=96)
TRAIN, HELD_OUT = SENTENCES[:64], SENTENCES[64:]


@pytest.fixture(scope="module")
def spread_roberta(tmp_path_factory) -> str:
    """Teacher: a tiny RoBERTa (byte-level BPE) whose CLS vectors differ across sentences."""
    from helpers.spread_towers import make_spread_tower

    return make_spread_tower(tmp_path_factory.mktemp("teacher") / "roberta", "roberta", seed=2)


def _mse(a: np.ndarray, b: np.ndarray) -> float:
    return float(((a - b) ** 2).mean())


def _encode(path_or_model, sentences):
    from sentence_transformers import SentenceTransformer

    model = path_or_model if not isinstance(path_or_model, (str, Path)) else SentenceTransformer(str(path_or_model))
    return model.encode(sentences, convert_to_numpy=True)


@pytest.mark.slow
def test_student_learns_the_teacher_across_tokenizers_and_loads_without_jtcse(spread_roberta, tiny_bert, tmp_path):
    from sentence_transformers import SentenceTransformer

    teacher = SentenceTransformer(spread_roberta)
    student0 = SentenceTransformer(tiny_bert)
    assert type(teacher.tokenizer).__name__ != type(student0.tokenizer).__name__  # BPE vs WordPiece
    teacher_held_out = _encode(teacher, HELD_OUT)
    before = _mse(_encode(student0, HELD_OUT), teacher_held_out)

    out = tmp_path / "student"
    summary = distill(
        spread_roberta, tiny_bert, TRAIN, out, batch_size=16, max_steps=16, learning_rate=1e-3, logging_steps=2
    )
    assert summary["first_logged_loss"] > 2 * summary["last_logged_loss"], summary
    after = _mse(_encode(out, HELD_OUT), teacher_held_out)
    assert after < 0.5 * before, (before, after)
    assert (summary["model"]["teacher_dimension"], summary["model"]["student_dimension"], summary["data"]["teacher_cache_hit"]) == (32, 32, False)

    modules = json.loads((out / "modules.json").read_text())
    assert [m["type"] for m in modules] == [
        "sentence_transformers.base.modules.transformer.Transformer",
        "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
    ]
    assert json.loads((out / "1_Pooling" / "config.json").read_text())["pooling_mode"] == "cls"

    # Load in a fresh interpreter that cannot see jtcse (isolated mode plus an import hook refusing it).
    probe = (
        "import numpy as np\n"
        "from sentence_transformers import SentenceTransformer\n"
        f"model = SentenceTransformer({str(out)!r})\n"
        f"np.save({str(tmp_path / 'plain.npy')!r}, model.encode({HELD_OUT!r}, convert_to_numpy=True))\n"
    )
    result = run_python(probe, hide_jtcse=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    np.testing.assert_allclose(np.load(tmp_path / "plain.npy"), _encode(out, HELD_OUT), rtol=1e-5, atol=1e-6)

    # Rerun: the cached teacher targets are reused, the cache file is not rewritten.
    cache = Path(summary["data"]["teacher_cache"])
    stamp = cache.stat().st_mtime_ns
    again = distill(spread_roberta, tiny_bert, TRAIN, out, batch_size=16, max_steps=1, overwrite=True)
    assert again["data"]["teacher_cache_hit"] and again["data"]["teacher_cache"] == str(cache)
    assert cache.stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_teacher_is_encoded_once_and_only_for_new_sentences(tiny_roberta, tiny_bert, tmp_path):
    from sentence_transformers import SentenceTransformer

    class CountingTeacher(SentenceTransformer):
        calls = 0

        def encode(self, *args, **kwargs):
            CountingTeacher.calls += 1
            return super().encode(*args, **kwargs)

    teacher = CountingTeacher(tiny_roberta)
    out = tmp_path / "student"
    first = distill(teacher, tiny_bert, TRAIN[:32], out, batch_size=16, max_steps=1)
    assert CountingTeacher.calls == 1 and not first["data"]["teacher_cache_hit"]
    second = distill(teacher, tiny_bert, TRAIN[:32], out, batch_size=16, max_steps=1, overwrite=True)
    assert CountingTeacher.calls == 1 and second["data"]["teacher_cache_hit"]
    third = distill(teacher, tiny_bert, TRAIN[:33], out, batch_size=16, max_steps=1, overwrite=True)
    assert CountingTeacher.calls == 2 and not third["data"]["teacher_cache_hit"]
    assert third["data"]["teacher_cache"] != first["data"]["teacher_cache"]
    cached = np.load(first["data"]["teacher_cache"])
    np.testing.assert_allclose(cached, teacher.encode(TRAIN[:32], convert_to_numpy=True), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_width_mismatch_is_an_error_unless_a_projection_is_asked_for(tiny_bert, tmp_path):
    from sentence_transformers import SentenceTransformer

    from jtcse.testing import make_tiny_tower

    wide = make_tiny_tower(tmp_path / "wide", "bert", hidden=48, seed=5)
    with pytest.raises(JTCSEError, match="teacher embeddings have 48 dimensions but the student's have 32"):
        distill(wide, tiny_bert, TRAIN[:32], tmp_path / "s1", batch_size=16, max_steps=1)
    summary = distill(wide, tiny_bert, TRAIN[:32], tmp_path / "s2", batch_size=16, max_steps=2, project=True)
    assert summary["model"]["changes"] == ["added a linear Dense projection 32->48"]
    student = SentenceTransformer(str(tmp_path / "s2"))
    assert [type(m).__name__ for m in student] == ["Transformer", "Pooling", "Dense"]
    assert student.encode(["one sentence"]).shape == (1, 48)


class _Interrupt(TrainerCallback):
    """Simulates a crash (Ctrl-C) right after a given step."""

    def __init__(self, at_step: int):
        self.at_step = at_step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.at_step:
            raise KeyboardInterrupt


@pytest.mark.slow
def test_interrupted_distillation_resumes_from_its_last_checkpoint(tiny_roberta, tiny_bert, tmp_path):
    out = tmp_path / "student"
    settings = dict(batch_size=16, max_steps=5, save_steps=2, learning_rate=1e-3)
    with pytest.raises(KeyboardInterrupt):
        distill(tiny_roberta, tiny_bert, TRAIN, out, callbacks=[_Interrupt(3)], **settings)
    assert (out / "checkpoints" / "checkpoint-2").is_dir() and not (out / "run_summary.json").exists()
    with pytest.raises(JTCSEError, match="learning_rate differ"):
        distill(tiny_roberta, tiny_bert, TRAIN, out, **{**settings, "learning_rate": 5e-4})
    resumed = distill(tiny_roberta, tiny_bert, TRAIN, out, **settings)
    assert resumed["resumed_from"].endswith("checkpoint-2")
    assert resumed["steps"] == 5 and resumed["data"]["teacher_cache_hit"]
    assert not (out / "checkpoints").exists()


def test_bad_inputs_are_clear_errors(tiny_bert, tmp_path):
    with pytest.raises(JTCSEError, match="teacher model not found"):
        distill(tmp_path / "nope", tiny_bert, TRAIN[:8], tmp_path / "o1")
    not_a_model = tmp_path / "not_a_model"
    not_a_model.mkdir()
    (not_a_model / "readme.txt").write_text("hello", encoding="utf-8")
    with pytest.raises(JTCSEError, match="cannot load the teacher"):
        distill(not_a_model, tiny_bert, TRAIN[:8], tmp_path / "o2")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(JTCSEError, match="has no sentences"):
        distill(tiny_bert, tiny_bert, empty, tmp_path / "o3")


@pytest.mark.slow
@pytest.mark.cli
def test_cli_reports_a_missing_teacher_in_one_line(tmp_path):
    result = run_cli(
        "distill", "--teacher", tmp_path / "nope", "-o", tmp_path / "out", "--train-file", REPO / "setup.py", timeout=300
    )
    assert result.returncode == 2
    assert result.stderr.strip() == f"Error: teacher model not found: {tmp_path / 'nope'}"
