"""jtcse.modeling.loading: every role, pooling override, length clamp, bad device, missing path, embedded default."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from jtcse.errors import JTCSEError
from jtcse.modeling.loading import load_cls_tower, load_model, resolve_source

SENTENCES = ["a short one", "a rather longer sentence with more words"]


def _hidden(model, sentences):
    hf, tok = model[0].auto_model, model[0].tokenizer
    batch = tok(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        return hf(**batch).last_hidden_state, batch["attention_mask"]


@pytest.fixture(scope="module")
def mean_normalized_tower(tiny_bert, tmp_path_factory):
    """tiny_bert saved as Transformer + mean Pooling + Normalize (as most hub encoders are)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    base = load_model(tiny_bert)
    model = SentenceTransformer(modules=[base[0], Pooling(32, pooling_mode="mean"), Normalize()], device="cpu")
    path = tmp_path_factory.mktemp("mean") / "tower"
    model.save(str(path))
    return str(path)


@pytest.mark.parametrize("role", ["encode", "teacher"])
def test_encode_roles_keep_the_checkpoints_modules(mean_normalized_tower, role):
    model = load_model(mean_normalized_tower, role=role)
    assert [type(m).__name__ for m in model] == ["Transformer", "Pooling", "Normalize"]
    hidden, mask = _hidden(model, SENTENCES)
    mean = (hidden * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
    expected = torch.nn.functional.normalize(mean, dim=-1).numpy()
    np.testing.assert_allclose(model.encode(SENTENCES), expected, atol=1e-5)


@pytest.mark.parametrize("role, pooling", [("tower", None), ("student", "cls")])
def test_tower_role_and_a_cls_student_become_cls_towers(mean_normalized_tower, role, pooling):
    model = load_model(mean_normalized_tower, role=role, pooling=pooling)
    assert [type(m).__name__ for m in model] == ["Transformer", "Pooling"]
    hidden, _ = _hidden(model, SENTENCES)
    np.testing.assert_allclose(model.encode(SENTENCES), hidden[:, 0].numpy(), atol=1e-5)
    _, changes = load_cls_tower(mean_normalized_tower, role=role)
    assert changes == ["replaced 'mean' pooling by CLS pooling", "dropped Normalize"]


def test_student_keeps_its_own_modules_unless_told(mean_normalized_tower, tiny_bert):
    from jtcse.modeling.loading import load_student

    student, changes = load_student(mean_normalized_tower)
    assert [type(m).__name__ for m in student] == ["Transformer", "Pooling", "Normalize"] and changes == []
    np.testing.assert_allclose(
        student.encode(SENTENCES), load_model(mean_normalized_tower).encode(SENTENCES), atol=1e-6
    )
    _, changes = load_student(tiny_bert, pooling="mean")
    assert changes == ["replaced 'cls' pooling by mean pooling"]
    with pytest.raises(ValueError, match="student_pooling: Input should be 'cls' or 'mean'"):
        load_student(tiny_bert, pooling="max")


def test_pooling_override_replaces_the_checkpoints_pooling(mean_normalized_tower):
    model = load_model(mean_normalized_tower, pooling="cls")
    hidden, _ = _hidden(model, SENTENCES)
    np.testing.assert_allclose(model.encode(SENTENCES), hidden[:, 0].numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="always pools CLS"):
        load_model(mean_normalized_tower, role="tower", pooling="mean")
    with pytest.raises(ValueError, match="role must be one of"):
        load_model(mean_normalized_tower, role="judge")


def test_max_seq_length_above_the_position_table_is_clamped_with_a_warning(tiny_bert, tiny_roberta, caplog):
    with caplog.at_level(logging.WARNING, logger="jtcse.modeling.loading"):
        assert load_model(tiny_bert, max_seq_length=40).max_seq_length == 40
        assert not caplog.records
        assert load_model(tiny_bert, max_seq_length=10_000).max_seq_length == 68  # 64 + 4 learned positions
        assert load_cls_tower(tiny_roberta, max_seq_length=500)[0].max_seq_length == 66  # RoBERTa: from pad + 1
    assert [r.getMessage().split(";")[1].strip() for r in caplog.records] == ["clamped to 68.", "clamped to 66."]
    assert load_model(tiny_bert, max_seq_length="max").max_seq_length == 68
    with pytest.raises(ValueError, match="positive integer"):
        load_model(tiny_bert, max_seq_length=0)


@pytest.mark.parametrize("device", ["tpu9", "cuda:7000", "nonsense:x"])
def test_bad_device_is_a_value_error(tiny_bert, device):
    with pytest.raises(ValueError, match="device"):
        load_model(tiny_bert, device=device)


def test_missing_path_and_non_model_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="teacher model not found"):
        load_model(tmp_path / "nope", role="teacher")
    with pytest.raises(JTCSEError, match="tower model not found"):
        load_cls_tower(str(tmp_path / "nope"))
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "readme.txt").write_text("hello", encoding="utf-8")
    with pytest.raises(ValueError, match="cannot load the student model"):
        load_model(tmp_path / "folder", role="student")


@pytest.mark.slow
def test_twin_is_encoded_whole_and_refused_as_a_tower(tiny_bert, tiny_bert_b, tmp_path):
    from jtcse.modeling.build import build_twin

    twin = build_twin(tiny_bert, tiny_bert_b, max_seq_length=32)
    twin.save(str(tmp_path / "twin"))
    loaded = load_model(tmp_path / "twin", role="teacher", max_seq_length=10_000)
    assert loaded[0].max_seq_length == 68
    np.testing.assert_allclose(loaded.encode(SENTENCES), twin.encode(SENTENCES), atol=1e-5)
    with pytest.raises(ValueError, match="twin checkpoint, not a single tower"):
        load_model(tmp_path / "twin", role="student")
    with pytest.raises(ValueError, match="pools by itself"):
        load_model(tmp_path / "twin", pooling="mean")


def test_embedded_default_is_resolved_in_one_place(minilm_path):
    from pathlib import Path

    import jtcse

    assert resolve_source(None) == minilm_path and resolve_source("x") == "x"
    assert load_model(None).encode(["hi"]).shape == (1, 384)
    package = Path(jtcse.__file__).parent
    callers = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if "default_tower_path(" in p.read_text(encoding="utf-8") and p.name != "defaults.py"
    )
    assert callers == ["modeling/loading.py"]
