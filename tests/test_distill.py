"""Distillation (``jtcse distill``): the objectives, cached teacher targets, a student that keeps its own pooling
and width and loads without jtcse, a training-only projection for wider teachers, resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import invoke_cli, run_python
from transformers import TrainerCallback

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
        spread_roberta,
        tiny_bert,
        TRAIN,
        out,
        batch_size=16,
        max_steps=16,
        learning_rate=1e-3,
        logging_steps=2,
        objective="mse",
    )
    assert summary["first_logged_loss"] > 2 * summary["last_logged_loss"], summary
    after = _mse(_encode(out, HELD_OUT), teacher_held_out)
    assert after < 0.5 * before, (before, after)
    assert (
        summary["model"]["teacher_dimension"],
        summary["model"]["student_dimension"],
        summary["data"]["teacher_cache_hit"],
    ) == (32, 32, False)

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
    again = distill(spread_roberta, tiny_bert, TRAIN, out, batch_size=16, max_steps=1, overwrite=True, objective="mse")
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
    from jtcse.devices import autocast

    with autocast(
        "auto", "cpu"
    ):  # the teacher encodes at the stage's precision (auto: bf16 on a CPU with native bf16, else fp32)
        expected = teacher.encode(TRAIN[:32], convert_to_numpy=True)
    np.testing.assert_allclose(cached, expected, rtol=1e-5, atol=1e-6)
    # passages of three consecutive lines: what the teacher encodes, cached under their own key; the run's data
    # digest is theirs, so a run on other passages is another run
    from jtcse.corpus import passages

    joined = distill(teacher, tiny_bert, TRAIN[:32], out, batch_size=4, max_steps=1, overwrite=True,
                     passage_sentences=3)  # fmt: skip
    assert CountingTeacher.calls == 4 and not joined["data"]["teacher_cache_hit"] and "passages" not in first["data"]
    assert joined["data"]["passages"] == 11 and joined["data"]["sentences"] == 32
    assert joined["data"]["teacher_cache"] != first["data"]["teacher_cache"]
    assert joined["config"]["data"] != first["config"]["data"]
    with autocast("auto", "cpu"):
        expected = SentenceTransformer(tiny_roberta, device="cpu").encode(
            passages(TRAIN[:32], 3), convert_to_numpy=True
        )
    np.testing.assert_allclose(np.load(joined["data"]["teacher_cache"]), expected, rtol=1e-5, atol=1e-6)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_objective_losses_follow_their_equations(tiny_bert):
    """Each objective's value on fixed vectors equals its equation computed by hand (no training)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from jtcse.training.distill import distillation_loss
    from jtcse.training.settings import OBJECTIVES

    model = SentenceTransformer(tiny_bert, device="cpu")
    g = torch.Generator().manual_seed(0)
    s, t = torch.randn(5, 32, generator=g), torch.randn(5, 32, generator=g)
    sn, tn = _unit(s.numpy()), _unit(t.numpy())
    expected = {
        "mse": float(((s - t) ** 2).mean()),
        "mse-normalized": float(((sn - tn) ** 2).mean()),
        "cosine": float((1 - (sn * tn).sum(1)).mean()),
        "similarity": float(((sn @ sn.T - tn @ tn.T) ** 2).sum() / (5 * 4)),
    }
    for objective in OBJECTIVES:
        loss = distillation_loss(model, objective, 32)
        assert loss.projection is None
        value = float(loss.compute_loss_from_embeddings([s], [t]))
        assert value == pytest.approx(expected[objective], rel=1e-5), objective
    # on unit vectors normalised MSE is (2 / d) * (1 - cos): the same optimum as the cosine objective
    assert expected["mse-normalized"] == pytest.approx(2 / 32 * expected["cosine"], rel=1e-5)
    # a wider teacher: per-vector objectives get a learned projection, the similarity objective needs none
    for objective in OBJECTIVES:
        loss = distillation_loss(model, objective, 80, seed=3)
        if objective == "similarity":
            assert loss.projection is None
            assert float(loss.compute_loss_from_embeddings([s], [torch.randn(5, 80, generator=g)])) > 0
        else:
            assert (loss.projection.in_features, loss.projection.out_features) == (32, 80)
    same = [distillation_loss(model, "cosine", 80, seed=3).projection.weight for _ in range(2)]
    assert torch.equal(*same)  # the projection starts from the seed, so reruns and resumes agree
    with pytest.raises(
        JTCSEError, match="objective: Input should be 'mse', 'mse-normalized', 'cosine' or 'similarity'"
    ):
        distillation_loss(model, "kl", 32)


def test_a_sum_of_objectives_is_the_sum_of_their_losses_computed_by_hand(tiny_bert):
    """``similarity+mse``: the similarity-matrix loss plus the MSE, each by its equation; each term is returned under
    its name for the trainer to log; with a wider teacher the MSE term sees the student through the projection the
    MSE objective alone would have (same seed) and the similarity term sees the student as it is."""
    import torch
    from sentence_transformers import SentenceTransformer

    from jtcse.training.distill import distillation_loss

    model = SentenceTransformer(tiny_bert, device="cpu")
    g = torch.Generator().manual_seed(1)
    s, t = torch.randn(6, 32, generator=g), torch.randn(6, 32, generator=g)
    sn, tn = _unit(s.numpy()), _unit(t.numpy())
    similarity = float(((sn @ sn.T - tn @ tn.T) ** 2).sum() / (6 * 5))
    mse, cosine = float(((s - t) ** 2).mean()), float((1 - (sn * tn).sum(1)).mean())
    loss = distillation_loss(model, "similarity+mse", 32)
    assert loss.projection is None and type(loss).__name__ == "DistillationSumLoss"
    assert float(loss.compute_loss_from_embeddings([s], [t])) == pytest.approx(similarity + mse, rel=1e-5)
    terms = loss.terms([s], [t])
    assert list(terms) == ["similarity", "mse"] and float(terms["mse"]) == pytest.approx(mse, rel=1e-5)
    three = distillation_loss(model, "mse+cosine+similarity", 32)
    assert float(three.compute_loss_from_embeddings([s], [t])) == pytest.approx(mse + cosine + similarity, rel=1e-5)

    wide = torch.randn(6, 80, generator=g)
    loss = distillation_loss(model, "similarity+mse", 80, seed=3)
    alone = distillation_loss(model, "mse", 80, seed=3)
    assert torch.equal(loss.projection.weight, alone.projection.weight)
    wn, projected = _unit(wide.numpy()), alone.projection(s).detach().numpy()
    expected = float(((sn @ sn.T - wn @ wn.T) ** 2).sum() / 30) + float(((projected - wide.numpy()) ** 2).mean())
    assert float(loss.compute_loss_from_embeddings([s], [wide]).detach()) == pytest.approx(expected, rel=1e-5)
    for bad in ("similarity+similarity", "similarity+kl", "similarity+"):
        with pytest.raises(JTCSEError, match="objective: Input should be .* or a sum of distinct ones joined by"):
            distillation_loss(model, bad, 32)


def test_passages_join_consecutive_sentences(tmp_path):
    from jtcse.corpus import passages

    assert passages(["a.", "b.", "c.", "d."], 3) == ["a. b. c.", "d."]
    assert passages(["a.", "b."], 1) == ["a.", "b."]
    with pytest.raises(ValueError, match="at least one sentence"):
        passages(["a."], 0)
    with pytest.raises(JTCSEError, match="passage_sentences"):  # refused before anything is read
        distill("no-teacher", "no-student", ["a.", "b."], tmp_path / "out", passage_sentences=0)
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def mean_tower(tiny_bert, tmp_path_factory) -> str:
    """tiny_bert saved as Transformer + mean Pooling + Normalize, as the shipped MiniLM is."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    base = SentenceTransformer(tiny_bert, device="cpu")
    path = tmp_path_factory.mktemp("mean") / "tower"
    SentenceTransformer(modules=[base[0], Pooling(32, pooling_mode="mean"), Normalize()], device="cpu").save(str(path))
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["similarity", "cosine", "similarity+mse"])
def test_wider_teacher_teaches_a_student_that_keeps_its_pooling_and_width(
    objective, spread_roberta, mean_tower, tmp_path
):
    """An 80-wide concat ensemble teaches a 32-wide mean-pooled student; nothing of the projection is saved."""
    from sentence_transformers import SentenceTransformer

    from jtcse.modeling.build import build_ensemble
    from jtcse.testing import make_tiny_tower

    wide = make_tiny_tower(tmp_path / "wide", "bert", hidden=48, seed=5)
    teacher_dir = tmp_path / "ensemble"
    build_ensemble([spread_roberta, wide], device="cpu").save(str(teacher_dir))
    teacher = SentenceTransformer(str(teacher_dir), trust_remote_code=True, device="cpu")
    assert teacher.get_embedding_dimension() == 80
    t = _unit(_encode(teacher, HELD_OUT))

    def gap(model) -> float:  # how far the student's cosine matrix is from the teacher's, on unseen sentences
        s = _unit(_encode(model, HELD_OUT))
        return float(np.abs(s @ s.T - t @ t.T).mean())

    before = gap(SentenceTransformer(mean_tower, device="cpu"))
    out = tmp_path / "student"
    summary = distill(str(teacher_dir), mean_tower, TRAIN, out, batch_size=16, max_steps=24, learning_rate=2e-3,
                      objective=objective, logging_steps=4)  # fmt: skip
    assert summary["first_logged_loss"] > summary["last_logged_loss"], summary
    assert (summary["model"]["teacher_dimension"], summary["model"]["student_dimension"]) == (80, 32)
    assert summary["config"]["objective"] == summary["model"]["objective"] == objective
    names = {
        "similarity": "SimilarityMatrixLoss",
        "cosine": "EmbedDistillLoss",
        "similarity+mse": "DistillationSumLoss",
    }
    assert summary["loss"]["name"] == names[objective]
    if "+" in objective:  # each term logged
        assert set(summary["loss_terms"]) == {"similarity", "mse"}, summary["loss_terms"]
    student = SentenceTransformer(str(out), device="cpu")
    assert [type(m).__name__ for m in student] == ["Transformer", "Pooling", "Normalize"]
    assert student[1].pooling_mode == "mean" and student.get_embedding_dimension() == 32
    assert not list(out.glob("*projection*")) and not (out / "2_Dense").exists()
    if objective == "similarity":
        assert summary["model"]["changes"] == []
        assert gap(student) < 0.8 * before, (before, gap(student))
    else:
        assert summary["model"]["changes"] == [
            "trained through a linear projection 32->80, not saved (the student keeps its width)"
        ]


@pytest.mark.slow
def test_student_pooling_replaces_the_students_own(mean_tower, tiny_roberta, tmp_path):
    from sentence_transformers import SentenceTransformer

    summary = distill(tiny_roberta, mean_tower, TRAIN[:32], tmp_path / "s", batch_size=16, max_steps=1,
                      student_pooling="cls")  # fmt: skip
    assert summary["model"]["changes"] == ["replaced 'mean' pooling by CLS pooling", "dropped Normalize"]
    student = SentenceTransformer(str(tmp_path / "s"))
    assert [type(m).__name__ for m in student] == ["Transformer", "Pooling"] and student[1].pooling_mode == "cls"
    with pytest.raises(JTCSEError, match="student_pooling: Input should be 'cls' or 'mean'"):
        distill(tiny_roberta, mean_tower, TRAIN[:32], tmp_path / "s2", student_pooling="max")


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
    with pytest.raises(JTCSEError, match=r"learning_rate 0.001 -> 0.0005"):
        distill(tiny_roberta, tiny_bert, TRAIN, out, **{**settings, "learning_rate": 5e-4})
    resumed = distill(tiny_roberta, tiny_bert, TRAIN, out, **settings)
    assert resumed["resumed_from"].endswith("checkpoint-2")
    assert resumed["steps"] == 5 and resumed["data"]["teacher_cache_hit"]
    assert not (out / "checkpoints").exists()


class _ProjectionAtFirstStep(TrainerCallback):
    """Records the (80 x 32) projection weight the optimizer holds when the first step of a run begins."""

    weight = None

    def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
        if self.weight is None:
            (self.weight,) = [
                p.detach().clone() for g in optimizer.param_groups for p in g["params"] if p.shape == (80, 32)
            ]


@pytest.mark.slow
def test_a_resumed_run_continues_the_training_only_projection(spread_roberta, tiny_bert, tmp_path):
    from safetensors.torch import load_file

    from jtcse.modeling.build import build_ensemble
    from jtcse.testing import make_tiny_tower
    from jtcse.training.distill import PROJECTION_FILE

    teacher = tmp_path / "ensemble"
    build_ensemble([spread_roberta, make_tiny_tower(tmp_path / "wide", hidden=48, seed=5)]).save(str(teacher))
    out = tmp_path / "student"
    settings = dict(batch_size=16, max_steps=5, save_steps=2, learning_rate=1e-2, objective="mse")
    with pytest.raises(KeyboardInterrupt):
        distill(str(teacher), tiny_bert, TRAIN, out, callbacks=[_Interrupt(3)], **settings)
    saved = load_file(out / "checkpoints" / "checkpoint-2" / PROJECTION_FILE)["weight"]
    first = _ProjectionAtFirstStep()
    resumed = distill(str(teacher), tiny_bert, TRAIN, out, callbacks=[first], **settings)
    assert resumed["resumed_from"].endswith("checkpoint-2") and resumed["steps"] == 5
    assert first.weight is not None and bool((first.weight == saved).all())
    assert not list(out.glob("**/*projection*"))  # dropped with the checkpoints; never part of the student


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
    with pytest.raises(JTCSEError, match="objective: Input should be"):
        distill(tiny_bert, tiny_bert, TRAIN[:8], tmp_path / "o4", objective="kl")
    assert not (tmp_path / "o4").exists()


def test_cli_default_objective_is_the_librarys():
    import inspect

    from jtcse.commands.distill import distill as command
    from jtcse.training.settings import OBJECTIVES, DistillSettings

    option = inspect.signature(command).parameters["objective"].default  # generated from DistillSettings
    assert option.default is None and option.show_default == DistillSettings().objective in OBJECTIVES


@pytest.mark.slow
@pytest.mark.cli
def test_cli_reports_a_missing_teacher_in_one_line(tmp_path):
    result = invoke_cli(
        "distill", "--teacher", tmp_path / "nope", "-o", tmp_path / "out", "--train-file", REPO / "setup.py"
    )
    assert result.returncode == 2  # --train-file: the old name of --corpus, still working
    assert result.stderr.splitlines() == [
        "DeprecationWarning: --train-file is deprecated; use --corpus.",
        f"Error: teacher model not found: {tmp_path / 'nope'}",
    ]
