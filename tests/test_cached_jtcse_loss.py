"""CachedJTCSELoss (GradCache for the twin) against JTCSELoss on the same batch, and its dropout replay."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from jtcse.losses import CachedJTCSELoss, JTCSELoss

SENTENCES = [
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog.",
    "Python modules are imported once.",
    "Rain is expected tomorrow afternoon in the north.",
    "She plays the violin.",
    "Stock prices fell sharply after the announcement of the new tariffs.",
    "Tea.",
]
PARAPHRASES = [
    "A cat was sitting on a mat.",
    "The lazy dog was jumped over by a fox.",
    "Modules load a single time in Python.",
    "Tomorrow afternoon it will rain up north.",
    "The violin is her instrument.",
    "After the tariff news, shares dropped.",
    "Some tea.",
]


def _dropout(model, p: float | None) -> dict[nn.Dropout, float]:
    """Set every dropout to ``p`` (None restores the saved values); returns the previous values."""
    modules = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    previous = {m: m.p for m in modules}
    for m in modules:
        m.p = p
    return previous


@pytest.fixture(scope="module")
def twin(tiny_bert, tiny_bert_b):
    from jtcse import build_twin

    model = build_twin(tiny_bert, tiny_bert_b, cael_every=2)
    model.train()
    return model


@pytest.fixture
def no_dropout(twin, one_thread):
    previous = _dropout(twin, 0.0)
    yield twin
    for module, p in previous.items():
        module.p = p


def _step(model, loss, columns):
    """Loss terms and every parameter gradient of one step, summed as SentenceTransformerTrainer does."""
    model.zero_grad()
    torch.manual_seed(0)
    terms = loss([model.preprocess(c) for c in columns], None)
    torch.stack(list(terms.values())).sum().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    return {k: v.detach() for k, v in terms.items()}, grads


def _assert_same_step(expected, got):
    (terms_e, grads_e), (terms_g, grads_g) = expected, got
    assert set(terms_e) == set(terms_g)
    for key in terms_e:
        torch.testing.assert_close(terms_g[key], terms_e[key], rtol=1e-5, atol=1e-5)
    assert set(grads_e) == set(grads_g)
    for name in grads_e:
        torch.testing.assert_close(grads_g[name], grads_e[name], rtol=1e-5, atol=1e-5, msg=name)


@pytest.mark.parametrize("mini_batch_size", [1, 3, len(SENTENCES), 100])
@pytest.mark.slow
def test_equals_jtcse_loss_with_dropout_off(no_dropout, mini_batch_size):
    model = no_dropout
    columns = [SENTENCES]
    expected = _step(model, JTCSELoss(model, seed=3), columns)
    assert {"nce_1", "nce_2", "icnce", "ictm"} == set(expected[0])
    assert any("pooler" in name for name in expected[1])  # ICTM reaches the pooler
    _assert_same_step(expected, _step(model, CachedJTCSELoss(model, mini_batch_size=mini_batch_size, seed=3), columns))


@pytest.mark.parametrize(
    "settings", [dict(cael_every=None), dict(ictm_weight=0.0), dict(nce_weight=0.0, temperature=0.1)], ids=str
)
def test_equals_jtcse_loss_for_other_settings_and_two_columns(no_dropout, settings):
    model = no_dropout
    cael_every = settings.pop("cael_every", 2)
    model[0].cael_every = cael_every
    try:
        columns = [SENTENCES, PARAPHRASES]
        expected = _step(model, JTCSELoss(model, seed=1, **settings), columns)
        got = _step(model, CachedJTCSELoss(model, mini_batch_size=3, seed=1, **settings), columns)
    finally:
        model[0].cael_every = 2
    _assert_same_step(expected, got)


def test_the_steps_differ_across_seeds_so_the_comparison_can_fail(no_dropout):
    """Same batch, other R draw (seed): the ICNCE term differs, so equal seeds above mean something (forwards
    only: the draw decides the term, the backward would repeat it)."""
    model = no_dropout
    features = [model.preprocess(SENTENCES)]
    with torch.no_grad():
        draws = {seed: JTCSELoss(model, seed=seed)(features, None)["icnce"] for seed in range(8)}
    assert len({round(v.item(), 6) for v in draws.values()}) == 2


class _Recording(CachedJTCSELoss):
    """Keeps every packed mini-batch: step 1 (no graph) and step 3 (recompute)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.first, self.replay = [], []

    def embed_minibatch(self, sentence_feature, begin, end, with_grad, copy_random_state, random_state=None):
        packed, state = super().embed_minibatch(
            sentence_feature, begin, end, with_grad, copy_random_state, random_state
        )
        (self.replay if with_grad else self.first).append(packed.detach().clone())
        return packed, state


def test_dropout_on_the_recompute_replays_the_cached_features_bit_for_bit(twin, one_thread):
    model = twin
    assert any(m.p > 0 for m in model.modules() if isinstance(m, nn.Dropout))
    loss = _Recording(model, mini_batch_size=3)
    model.zero_grad()
    torch.manual_seed(0)
    terms = loss([model.preprocess(SENTENCES)], None)
    torch.stack(list(terms.values())).sum().backward()
    assert len(loss.first) == len(loss.replay) == 2 * 3  # two views of 7 sentences in mini-batches of 3
    for cached, replayed in zip(loss.first, loss.replay, strict=True):
        assert torch.equal(cached, replayed)
    # The views differ (dropout is really on), and a forward without the saved RNG state would not match.
    assert not torch.equal(loss.first[0], loss.first[3])
    features = model.preprocess(SENTENCES)
    with torch.no_grad():
        fresh, _ = loss.embed_minibatch(features, 0, 3, with_grad=False, copy_random_state=False)
    assert not torch.equal(fresh, loss.first[0])
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    model.zero_grad()


def test_logged_terms_sum_to_the_hooked_loss_and_eval_needs_no_backward(no_dropout):
    model = no_dropout
    loss = CachedJTCSELoss(model, mini_batch_size=2, seed=0)
    terms = loss([model.preprocess(SENTENCES)], None)
    assert all(t.requires_grad for t in list(terms.values())[:1])
    assert not any(t.requires_grad for t in list(terms.values())[1:])
    with torch.no_grad():
        again = CachedJTCSELoss(model, mini_batch_size=2, seed=0)([model.preprocess(SENTENCES)], None)
    for key in terms:
        torch.testing.assert_close(again[key], terms[key].detach())
    config = loss.get_config_dict()
    assert config["mini_batch_size"] == 2 and config["gather_across_devices"] is False
    assert "gao2021scaling" in loss.citation


@pytest.mark.parametrize("bad", [0, -4, 2.5, True, "8"])
def test_bad_mini_batch_sizes_are_refused(twin, bad):
    with pytest.raises(ValueError, match="mini_batch_size must be a positive integer"):
        CachedJTCSELoss(twin, mini_batch_size=bad)


def test_cached_loss_refuses_an_untwinned_model(tiny_bert):
    from sentence_transformers import SentenceTransformer

    with pytest.raises(ValueError, match="twin model"):
        CachedJTCSELoss(SentenceTransformer(tiny_bert))


@pytest.mark.slow
def test_one_trainer_step_updates_the_weights_as_jtcse_loss_does(tiny_bert, tiny_bert_b, tmp_path, one_thread):
    """Through SentenceTransformerTrainer (loss dict summed, backward through the GradCache hook, SGD)."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    from jtcse import build_twin

    after = {}
    for name, make_loss in (("plain", JTCSELoss), ("cached", lambda m: CachedJTCSELoss(m, mini_batch_size=3))):
        model = build_twin(tiny_bert, tiny_bert_b, cael_every=2)
        _dropout(model, 0.0)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        args = SentenceTransformerTrainingArguments(
            output_dir=str(tmp_path / name),
            per_device_train_batch_size=len(SENTENCES),
            max_steps=1,
            learning_rate=0.5,
            optim="sgd",
            lr_scheduler_type="constant",
            warmup_steps=0,
            report_to=[],
            save_strategy="no",
            logging_steps=1,
            seed=0,
            use_cpu=True,
            dataloader_drop_last=True,
        )
        trainer = SentenceTransformerTrainer(
            model=model, args=args, train_dataset=Dataset.from_dict({"text": SENTENCES}), loss=make_loss(model)
        )
        trainer.train()
        after[name] = {n: p.detach() - before[n] for n, p in model.named_parameters()}
        logged = [entry for entry in trainer.state.log_history if "nce_1" in entry]
        assert logged, trainer.state.log_history
    assert any(delta.abs().max() > 0 for delta in after["plain"].values())
    for n, delta in after["plain"].items():
        torch.testing.assert_close(after["cached"][n], delta, rtol=1e-4, atol=1e-5, msg=n)
