"""Regulariser loss classes on real tiny towers: wrapping, values, optimisation, stop-gradient, saving."""

from __future__ import annotations

import math

import pytest
import torch

from jtcse.losses import (
    DispersionLoss,
    NITPHead,
    NITPLoss,
    RegularizedLoss,
    SimRegLoss,
    ThresholdedCrossEntropyLoss,
    ThresholdedMultipleNegativesRankingLoss,
    remove_nitp_head,
)
from jtcse.losses.functional import dispersion, nitp, simreg

SENTENCES = [
    "the cat sat on the mat and the dog sat on the cat",
    "a quick brown fox jumps over the lazy dog",
    "rain rain go away come again another day",
    "short",
]


def _load(path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path)


def _columns(model, sentences=SENTENCES, columns=2):
    return [dict(model.preprocess(sentences)) for _ in range(columns)]


def _mnrl(model):
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    return MultipleNegativesRankingLoss(model)


def _count_encoder_calls(model):
    calls = []
    model[0].register_forward_hook(lambda *_: calls.append(1))
    return calls


# ------------------------------------------------------------------------------------------ wrapping


def test_wrapper_adds_no_encoder_pass(tiny_bert):
    model = _load(tiny_bert)
    base = _mnrl(model)
    calls = _count_encoder_calls(model)
    base(_columns(model), None)
    alone = len(calls)
    calls.clear()
    loss = RegularizedLoss(model, base, [SimRegLoss(model), DispersionLoss(model, layers=[-1, 2]), NITPLoss(model)])
    sum(loss(_columns(model), None).values()).backward()
    assert alone >= 1 and len(calls) == alone


def test_wrapper_value_is_base_plus_weighted_penalties(tiny_bert):
    model = _load(tiny_bert).eval()  # no dropout: every forward gives the same states
    base = _mnrl(model)
    simreg_loss = SimRegLoss(model, weight=3.0, temperature=0.5)
    dispersion_loss = DispersionLoss(model, weight=0.2, layers=[-1, 1], variant="orthogonal")
    nitp_loss = NITPLoss(model, weight=1.5, shallow_layer=1)
    wrapped = RegularizedLoss(model, base, [simreg_loss, dispersion_loss, nitp_loss])
    terms = wrapped(_columns(model), None)
    assert list(terms) == ["base", "simreg", "dispersion", "nitp"]
    got = sum(terms.values())

    config = model[0].model.config
    assert config.output_hidden_states is False  # switched on only inside the loss call
    with torch.no_grad():
        config.output_hidden_states = True
        out = model(dict(model.preprocess(SENTENCES)))
        config.output_hidden_states = False
    mask = out["attention_mask"].bool()
    hidden = out["all_layer_embeddings"]
    want_reg = (
        3.0 * torch.nn.functional.softplus(simreg(out["token_embeddings"], out["input_ids"], mask, 0.5))
        + 0.2
        * (dispersion(hidden[-1], mask, variant="orthogonal") + dispersion(hidden[1], mask, variant="orthogonal"))
        / 2
        + 1.5 * nitp(out["token_embeddings"], hidden[1], mask, nitp_loss.head.projection)
    )
    want = base(_columns(model), None) + want_reg
    torch.testing.assert_close(got.detach(), want.detach(), rtol=1e-5, atol=1e-6)


def test_regulariser_with_base_loss_equals_regularized_loss(tiny_bert):
    model = _load(tiny_bert).eval()
    base = _mnrl(model)
    own = DispersionLoss(model, weight=0.3, base_loss=base)(_columns(model), None)
    wrapped = RegularizedLoss(model, base, [DispersionLoss(model, weight=0.3)])(_columns(model), None)
    torch.testing.assert_close(own, wrapped)
    assert list(own) == ["base", "dispersion"]
    assert DispersionLoss(model, base_loss=base).get_config_dict()["base_loss"] == "MultipleNegativesRankingLoss"


@pytest.mark.parametrize(
    "make",
    [
        lambda m: SimRegLoss(m, weight=1.0, temperature=0.5),
        lambda m: SimRegLoss(m, weight=1.0, temperature=0.5, chunk_size=4),
        lambda m: DispersionLoss(m, weight=1.0, layers=[-1, -2]),
        lambda m: DispersionLoss(m, weight=1.0, variant="decorrelation"),
        lambda m: NITPLoss(m, weight=1.0),
    ],
    ids=["simreg", "simreg-chunked", "dispersion", "decorrelation", "nitp"],
)
def test_loss_lowers_its_own_value_on_a_fixed_batch(tiny_bert, make):
    torch.manual_seed(0)
    model = _load(tiny_bert).eval()
    loss = make(model)
    batch = _columns(model, columns=1)
    optimizer = torch.optim.Adam(loss.parameters(), lr=3e-3)
    values = []
    for _ in range(6):
        optimizer.zero_grad()
        value = loss([dict(f) for f in batch], None)
        assert torch.isfinite(value)
        value.backward()
        optimizer.step()
        values.append(value.item())
    assert values[-1] < values[0] - 1e-4 * abs(values[0]), values


def test_alone_the_regulariser_reads_hidden_layers_it_needs(tiny_bert):
    model = _load(tiny_bert)
    value = DispersionLoss(model, layers=0)(_columns(model, columns=1), None)
    assert torch.isfinite(value) and model[0].model.config.output_hidden_states is False


# ---------------------------------------------------------------------------------------------- NITP


def test_nitp_target_path_carries_no_gradient(tiny_bert):
    model = _load(tiny_bert).eval()
    loss = NITPLoss(model, shallow_layer=1)
    config = model[0].model.config
    config.output_hidden_states = True
    out = model(dict(model.preprocess(SENTENCES)))
    config.output_hidden_states = False
    encoder = [p for n, p in model[0].named_parameters()]
    # Only the target path differentiable: the shallow states are the sole route back to the encoder.
    target_only = dict(out, token_embeddings=out["token_embeddings"].detach())
    grads = torch.autograd.grad(
        loss.penalty(target_only), encoder + [loss.head.projection[0].weight], allow_unused=True
    )
    assert all(g is None or (g == 0).all() for g in grads[:-1])
    assert grads[-1] is not None and grads[-1].abs().sum() > 0
    # And the full loss reaches the encoder through the prediction path.
    full = torch.autograd.grad(loss.penalty(out), encoder, allow_unused=True)
    assert any(g is not None and g.abs().sum() > 0 for g in full)


def test_nitp_default_shallow_layer_is_a_fifth_of_depth(tiny_bert, minilm_path):
    assert NITPLoss(_load(tiny_bert)).shallow_layer == 1  # 4 layers -> round(0.8) = 1
    assert NITPLoss(_load(minilm_path)).shallow_layer == 1  # 6 layers -> round(1.2) = 1


@pytest.mark.parametrize("layer", [4, -1, True, 1.5])
def test_nitp_rejects_bad_shallow_layer(tiny_bert, layer):
    with pytest.raises(ValueError, match="shallow_layer"):
        NITPLoss(_load(tiny_bert), shallow_layer=layer)


@pytest.mark.slow
def test_nitp_head_is_saved_and_loaded_with_the_model(tiny_bert, tmp_path):
    from sentence_transformers import SentenceTransformer

    model = _load(tiny_bert)
    before = model.encode(SENTENCES, convert_to_tensor=True)
    loss = NITPLoss(model, hidden_features=16)
    with torch.no_grad():
        loss.head.projection[2].bias.fill_(0.25)
    assert isinstance(model[-1], NITPHead)
    torch.testing.assert_close(model.encode(SENTENCES, convert_to_tensor=True), before)  # encode unaffected
    model.save(str(tmp_path / "with_head"))

    loaded = SentenceTransformer(str(tmp_path / "with_head"), trust_remote_code=True)
    assert isinstance(loaded[-1], NITPHead) and loaded[-1].hidden_features == 16
    for a, b in zip(loaded[-1].state_dict().values(), model[-1].state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)
    again = NITPLoss(loaded)
    assert again.head is loaded[-1] and sum(isinstance(m, NITPHead) for m in loaded.children()) == 1

    assert remove_nitp_head(loaded) == 1
    loaded.save(str(tmp_path / "plain"))
    plain = SentenceTransformer(str(tmp_path / "plain"))  # no trust_remote_code needed any more
    torch.testing.assert_close(plain.encode(SENTENCES, convert_to_tensor=True), before, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_trainer_runs_wrapped_loss_and_checkpoints_the_head(tiny_bert, tmp_path):
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    model = _load(tiny_bert)
    loss = RegularizedLoss(model, _mnrl(model), [SimRegLoss(model, temperature=0.1), NITPLoss(model)])
    head_before = model[-1].projection[0].weight.detach().clone()
    data = Dataset.from_dict({"anchor": SENTENCES * 2, "positive": SENTENCES * 2})
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "run"),
        per_device_train_batch_size=4,
        max_steps=2,
        save_steps=2,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        learning_rate=1e-3,
    )
    SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=loss).train()
    assert not torch.equal(model[-1].projection[0].weight, head_before)  # the head was optimised
    checkpoint = tmp_path / "run" / "checkpoint-2"
    assert any(p.name.endswith("NITPHead") for p in checkpoint.iterdir())


# ------------------------------------------------------------------------------------------- errors


def test_errors_are_clear(tiny_bert):
    from sentence_transformers.sentence_transformer.losses import CachedMultipleNegativesRankingLoss

    model = _load(tiny_bert)
    with pytest.raises(ValueError, match="GradCache"):
        SimRegLoss(model, base_loss=CachedMultipleNegativesRankingLoss(model))
    with pytest.raises(ValueError, match="layer 5 does not exist"):
        DispersionLoss(model, layers=[-1, 5])
    with pytest.raises(ValueError, match="variant"):
        DispersionLoss(model, variant="spread")
    with pytest.raises(ValueError, match="weight"):
        SimRegLoss(model, weight=-1.0)
    with pytest.raises(ValueError, match="chunk_size"):
        SimRegLoss(model, chunk_size=0)
    with pytest.raises(ValueError, match="temperature"):
        SimRegLoss(model, temperature=0)
    with pytest.raises(ValueError, match="already wraps"):
        RegularizedLoss(model, _mnrl(model), [SimRegLoss(model, base_loss=_mnrl(model))])
    with pytest.raises(TypeError, match="TokenRegularizer"):
        RegularizedLoss(model, _mnrl(model), [_mnrl(model)])
    # features without hidden states (e.g. a model whose forward emits only token_embeddings)
    out = model(dict(model.preprocess(SENTENCES)))
    with pytest.raises(ValueError, match="all_layer_embeddings"):
        DispersionLoss(model, layers=1).penalty(out)
    with pytest.raises(ValueError, match="attention_mask"):
        SimRegLoss(model).penalty({"token_embeddings": out["token_embeddings"]})


# ------------------------------------------------------------------------------------- thresholding


def test_thresholded_mnrl_matches_mnrl_without_threshold_and_a_naive_loop(tiny_bert):
    model = _load(tiny_bert)
    g = torch.Generator().manual_seed(0)
    anchors = torch.randn(5, 8, generator=g, dtype=torch.float64)
    positives = anchors + 0.3 * torch.randn(5, 8, generator=g, dtype=torch.float64)
    negatives = torch.randn(5, 8, generator=g, dtype=torch.float64)
    embeddings = [anchors, positives, negatives]
    plain = _mnrl(model).compute_loss_from_embeddings(embeddings, None)
    inf = ThresholdedMultipleNegativesRankingLoss(model, margin=math.inf).compute_loss_from_embeddings(embeddings)
    torch.testing.assert_close(inf, plain)

    margin = 4.0
    candidates = torch.cat([positives, negatives])
    terms = []
    for i in range(5):
        logits = [20.0 * torch.nn.functional.cosine_similarity(anchors[i], c, dim=0) for c in candidates]
        kept = [x for x in logits if x >= logits[i] - margin]
        terms.append(torch.logsumexp(torch.stack(kept), 0) - logits[i])
    got = ThresholdedMultipleNegativesRankingLoss(model, margin=margin).compute_loss_from_embeddings(embeddings)
    torch.testing.assert_close(got, torch.stack(terms).mean())


def test_thresholded_mnrl_gives_far_negatives_no_gradient(tiny_bert):
    model = _load(tiny_bert)
    anchors = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    positives = torch.tensor([[1.0, 0.8, 0.0], [0.8, 1.0, 0.0]], requires_grad=True)  # 20·Δcos ≈ 3 apart
    far = torch.tensor([[-1.0, -1.0, 0.0], [0.0, 0.0, 1.0]], requires_grad=True)  # cos −0.71 / 0 to both anchors
    loss = ThresholdedMultipleNegativesRankingLoss(model, scale=20.0, margin=10.0)
    value = loss.compute_loss_from_embeddings([anchors, positives, far])
    g_pos, g_far = torch.autograd.grad(value, [positives, far])
    assert (g_far == 0).all()  # 20·(cos_pos − cos_far) > 10 for every anchor: dropped
    assert (g_pos != 0).any()  # the other positive is within the margin and still pushed
    # with a wide margin the same negatives do get pushed
    wide = ThresholdedMultipleNegativesRankingLoss(model, scale=20.0, margin=100.0)
    (g_far_wide,) = torch.autograd.grad(wide.compute_loss_from_embeddings([anchors, positives, far]), [far])
    assert (g_far_wide != 0).any()


def test_thresholded_mnrl_trains_end_to_end(tiny_bert):
    model = _load(tiny_bert)
    loss = ThresholdedMultipleNegativesRankingLoss(model, margin=2.0)
    value = loss(_columns(model), None)
    value.backward()
    assert torch.isfinite(value) and loss.get_config_dict() == {
        "scale": 20.0,
        "margin": 2.0,
        "similarity_fct": "cos_sim",
    }
    with pytest.raises(ValueError, match="margin"):
        ThresholdedMultipleNegativesRankingLoss(model, margin=-1)
    with pytest.raises(ValueError, match="columns"):
        loss.compute_loss_from_embeddings([torch.zeros(2, 3)])


def test_thresholded_token_cross_entropy_shift_and_ignore():
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(2, 5, 11, generator=g, requires_grad=True)
    labels = torch.randint(0, 11, (2, 5), generator=g)
    labels[0, 3] = -100
    causal = ThresholdedCrossEntropyLoss(margin=1.5, shift=True)(logits, labels)
    from jtcse.losses.functional import thresholded_cross_entropy

    torch.testing.assert_close(causal, thresholded_cross_entropy(logits[:, :-1], labels[:, 1:], 1.5))
    (grad,) = torch.autograd.grad(causal, logits)
    assert (grad[:, -1] == 0).all() and (grad[0, 2] == 0).all()  # no label after the end; ignored target
    mlm = ThresholdedCrossEntropyLoss(margin=math.inf)(logits, labels)
    torch.testing.assert_close(mlm, torch.nn.functional.cross_entropy(logits.reshape(-1, 11), labels.reshape(-1)))
    with pytest.raises(ValueError, match="labels must have shape"):
        ThresholdedCrossEntropyLoss()(logits, labels[:, :4])


def test_named_extra_terms_ride_on_the_base_forward_and_are_logged_by_name(tiny_bert):
    """A ``{name: fn(features)}`` term is computed on each forward the base loss made, averaged, named."""
    model = _load(tiny_bert).eval()
    base = _mnrl(model)
    calls = _count_encoder_calls(model)
    loss = RegularizedLoss(
        model, base, {"norm": lambda out: 0.5 * out["token_embeddings"].norm(dim=-1).mean()}, base_name="simcse"
    )
    terms = loss(_columns(model), None)
    assert len(calls) == 2  # one forward per column, none added by the term
    assert list(terms) == ["simcse", "norm"]
    columns = _columns(model)
    with torch.no_grad():
        outs = [model(dict(features)) for features in columns]
        want_norm = sum(0.5 * o["token_embeddings"].norm(dim=-1).mean() for o in outs) / 2
        want_base = base(_columns(model), None)
    torch.testing.assert_close(terms["norm"].detach(), want_norm, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(terms["simcse"].detach(), want_base, rtol=1e-5, atol=1e-6)
    assert loss.get_config_dict()["terms"] == ["norm"]
    with pytest.raises(TypeError, match="callable"):
        RegularizedLoss(model, base, {"norm": 3.0})
    with pytest.raises(ValueError, match="already has a term named 'base'"):
        RegularizedLoss(model, base, {"base": lambda out: out["token_embeddings"].sum()})(_columns(model), None)


@pytest.mark.slow
def test_library_only_example_in_the_docs_runs(tmp_path, monkeypatch, one_thread):
    """docs/regularisers.md's library-only block (thresholded loss + RowIsolatedAdamW) trains as written."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "regularisers.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Library only") :]
    code = re.findall(r"```python\n(.*?)```", section, flags=re.S)[1]
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "docs/regularisers.md", "exec"), namespace)
    state = namespace["trainer"].state
    assert state.global_step == 2
    assert (tmp_path / "runs" / "library-only").is_dir()
