"""JTCSE loss maths: the functional forms against naive loops and hand-computed cases, and JTCSELoss."""

from __future__ import annotations

import math

import pytest
import torch

from jtcse.losses import JTCSELoss
from jtcse.losses.functional import icnce, ictm, info_nce, tmc
from jtcse.losses.jtcse_loss import stack_views, tower_one_anchors

pytestmark = pytest.mark.usefixtures("one_thread")


def _cos(u, v):
    return float(u @ v / (u.norm() * v.norm()))


def _naive_two_view(anchors, candidates, t):
    """Loop form of the 2B x 2B NT-Xent with the same-view entry excluded."""
    n = len(anchors)
    total = 0.0
    for i in range(n):
        pos = (i + n // 2) % n
        denom = sum(math.exp(_cos(anchors[i], candidates[j]) / t) for j in range(n) if j != i)
        total += -(_cos(anchors[i], candidates[pos]) / t - math.log(denom))
    return total / n


def test_info_nce_matches_naive_loop():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 7, generator=g, dtype=torch.float64), torch.randn(5, 7, generator=g, dtype=torch.float64)
    z = torch.cat([a, b])
    assert info_nce(a, b, temperature=0.1).item() == pytest.approx(_naive_two_view(z, z, 0.1), rel=1e-9)


def test_icnce_matches_naive_loop_and_is_directional():
    g = torch.Generator().manual_seed(1)
    xa, xb, ya, yb = (torch.randn(4, 6, generator=g, dtype=torch.float64) for _ in range(4))
    expected = _naive_two_view(torch.cat([xa, xb]), torch.cat([ya, yb]), 0.05)
    assert icnce(xa, xb, ya, yb).item() == pytest.approx(expected, rel=1e-9)
    assert icnce(ya, yb, xa, xb).item() != pytest.approx(expected, rel=1e-3)


def test_contrastive_hand_cases():
    e1, e2 = torch.eye(2, dtype=torch.float64)
    # one sentence: the positive is the only candidate left, so the loss is exactly 0
    assert info_nce(e1[None], e2[None]).item() == pytest.approx(0.0, abs=1e-12)
    assert icnce(e1[None], e2[None], e2[None], e1[None]).item() == pytest.approx(0.0, abs=1e-12)
    # two orthogonal sentences, identical views: positive cos 1, two negatives cos 0
    a = torch.stack([e1, e2])
    expected = math.log1p(2 * math.exp(-1 / 0.05))
    assert info_nce(a, a.clone()).item() == pytest.approx(expected, rel=1e-9)
    # ICNCE excludes Y's *same* view: making it identical to the anchor must not change the loss
    y_same = a.clone()
    y_other = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    assert icnce(a, a, y_same, y_other).item() == pytest.approx(expected, rel=1e-9)


def test_tmc_hand_cases():
    x = torch.tensor([[3.0, 0.0], [1.0, 2.0], [1.0, 1.0], [0.0, 0.0]])
    y = torch.tensor([[0.0, 4.0], [1.0, 2.0], [-1.0, -1.0], [0.0, 0.0]])
    assert tmc(x, y).tolist() == pytest.approx([5 / 7, 0.0, 1.0, 0.0])
    # scaled copy: same direction, norms k and 1 -> |k - 1| / (k + 1)
    assert tmc(x[1:2] * 3, x[1:2]).item() == pytest.approx(2 / 4)


def test_ictm_matches_naive_loop():
    g = torch.Generator().manual_seed(2)
    h_a, h_p, p_a, p_p = (torch.randn(6, 5, generator=g, dtype=torch.float64) for _ in range(4))
    expected = 0.0
    for s in range(6):
        cos = max(_cos(h_a[s], h_p[s]), 1e-4)
        t = float((p_a[s] - p_p[s]).norm() / (p_a[s].norm() + p_p[s].norm()))
        expected += -math.log(cos) * t
    assert ictm(h_a, h_p, p_a, p_p).item() == pytest.approx(expected / 6, rel=1e-9)


def test_ictm_eps_floor_blocks_gradient_to_h_but_not_to_p():
    h_a = torch.tensor([[1.0, 0.0]], requires_grad=True)
    h_p = torch.tensor([[-1.0, 0.5]], requires_grad=True)  # cos < 0: clamped to eps
    p_a = torch.tensor([[1.0, 2.0]], requires_grad=True)
    p_p = torch.tensor([[2.0, 1.0]], requires_grad=True)
    value = ictm(h_a, h_p, p_a, p_p, eps=1e-4)
    assert value.item() == pytest.approx(-math.log(1e-4) * tmc(p_a, p_p).item())
    value.backward()
    assert torch.count_nonzero(h_a.grad) == 0 and torch.count_nonzero(h_p.grad) == 0
    assert torch.count_nonzero(p_a.grad) > 0
    # identical CLS vectors: -log(1) = 0, whatever the poolers
    assert ictm(h_a, h_a, p_a, p_p).item() == pytest.approx(0.0, abs=1e-6)


def test_stack_views_pads_the_shorter_view():
    first = {"input_ids": torch.tensor([[5, 6, 7]]), "attention_mask": torch.tensor([[1, 1, 1]]), "modality": "text"}
    second = {"input_ids": torch.tensor([[5, 6]]), "attention_mask": torch.tensor([[1, 1]]), "modality": "text"}
    stacked = stack_views([first, second], pad_token_id=0)
    assert stacked["input_ids"].tolist() == [[5, 6, 7], [5, 6, 0]]
    assert stacked["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert stacked["modality"] == "text"
    assert stack_views([first])["input_ids"].tolist() == [[5, 6, 7], [5, 6, 7]]
    with pytest.raises(ValueError, match="one text column"):
        stack_views([first, first, first])


# -- the loss class on a real tiny twin ---------------------------------------------------------

SENTENCES = [
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog.",
    "Python modules are imported once.",
    "Rain is expected tomorrow afternoon in the north.",
]


@pytest.fixture(scope="module")
def bert_twin(tiny_bert, tiny_bert_b):
    from jtcse import build_twin

    return build_twin(tiny_bert, tiny_bert_b, cael_every=2)


def _outputs(model, seed=0):
    model.train()
    torch.manual_seed(seed)
    features = stack_views([model.preprocess(SENTENCES)], pad_token_id=model.tokenizer.pad_token_id)
    return model(features)


def test_jtcse_loss_equals_the_formula(bert_twin):
    loss = JTCSELoss(bert_twin, temperature=0.05, ictm_weight=0.5, seed=7)
    out = _outputs(bert_twin)
    terms = loss.compute_loss_from_outputs(out)
    assert set(terms) == {"nce_1", "nce_2", "icnce", "ictm"}

    half = len(SENTENCES)
    v = {
        k: (out[k][:half], out[k][half:])
        for k in ("pooled_1", "pooled_2", "cross_pooled_1", "cross_pooled_2", "pooler_1", "pooler_2")
    }
    r = tower_one_anchors(7, step=0, draw=0)
    x, y = ("1", "2") if r else ("2", "1")
    expected_icnce = icnce(*v[f"pooled_{x}"], *v[f"pooled_{y}"]) + icnce(
        *v[f"cross_pooled_{x}"], *v[f"cross_pooled_{y}"]
    )
    (h1a, h1b), (h2a, h2b) = v["pooled_1"], v["pooled_2"]
    (p1a, p1b), (p2a, p2b) = v["pooler_1"], v["pooler_2"]
    expected_ictm = 0.5 * (ictm(h1a, h2b, p1a, p2b) + ictm(h2a, h1b, p2a, p1b))
    torch.testing.assert_close(terms["nce_1"], info_nce(h1a, h1b))
    torch.testing.assert_close(terms["nce_2"], info_nce(h2a, h2b))
    torch.testing.assert_close(terms["icnce"], expected_icnce)
    torch.testing.assert_close(terms["ictm"], expected_ictm)


def test_icnce_direction_follows_the_seeded_draw(bert_twin):
    out = _outputs(bert_twin)
    half = len(SENTENCES)
    views = lambda k: (out[k][:half], out[k][half:])  # noqa: E731
    one_to_two = icnce(*views("pooled_1"), *views("pooled_2")) + icnce(
        *views("cross_pooled_1"), *views("cross_pooled_2")
    )
    two_to_one = icnce(*views("pooled_2"), *views("pooled_1")) + icnce(
        *views("cross_pooled_2"), *views("cross_pooled_1")
    )
    loss = JTCSELoss(bert_twin, nce_weight=0, ictm_weight=0, seed=123)
    for step, draws in ((0, 6), (41, 2)):  # the trainer tells the loss its step (jtcse's stage runner)
        loss.set_training_step(step)
        for draw in range(draws):
            expected = one_to_two if tower_one_anchors(123, step, draw) else two_to_one
            torch.testing.assert_close(loss.compute_loss_from_outputs(out)["icnce"], expected)


def test_terms_switch_off(bert_twin):
    out = _outputs(bert_twin)
    only_nce = JTCSELoss(bert_twin, icnce_weight=0, ictm_weight=0).compute_loss_from_outputs(out)
    assert set(only_nce) == {"nce_1", "nce_2"}
    only_ictm = JTCSELoss(bert_twin, nce_weight=0, icnce_weight=0).compute_loss_from_outputs(out)
    assert set(only_ictm) == {"ictm"}
    with pytest.raises(TypeError, match="extra_terms"):
        JTCSELoss(bert_twin, extra_terms={})  # extra terms go through RegularizedLoss
    with pytest.raises(ValueError, match="switched off"):
        JTCSELoss(bert_twin, nce_weight=0, icnce_weight=0, ictm_weight=0)
    with pytest.raises(ValueError, match=">= 0"):
        JTCSELoss(bert_twin, ictm_weight=-1)


def test_without_cael_icnce_uses_the_primitive_stream_only(tiny_bert, tiny_bert_b):
    from jtcse import build_twin

    tn = build_twin(tiny_bert, tiny_bert_b, cael_every=None)
    out = _outputs(tn)
    assert "cross_pooled_1" not in out
    half = len(SENTENCES)
    views = lambda k: (out[k][:half], out[k][half:])  # noqa: E731
    r = tower_one_anchors(0, step=0, draw=0)
    expected = icnce(*views("pooled_1"), *views("pooled_2")) if r else icnce(*views("pooled_2"), *views("pooled_1"))
    got = JTCSELoss(tn, nce_weight=0, ictm_weight=0, seed=0).compute_loss_from_outputs(out)["icnce"]
    torch.testing.assert_close(got, expected)


def test_one_column_equals_two_identical_columns(bert_twin):
    features = bert_twin.preprocess(SENTENCES)
    bert_twin.train()
    values = []
    for sentence_features in ([features], [features, dict(features)]):
        torch.manual_seed(3)
        values.append(JTCSELoss(bert_twin, seed=1)(sentence_features, None))
    for key in values[0]:
        torch.testing.assert_close(values[0][key], values[1][key])


def test_loss_backpropagates_into_both_towers(bert_twin):
    bert_twin.zero_grad()
    terms = JTCSELoss(bert_twin)([bert_twin.preprocess(SENTENCES)], None)
    torch.stack(list(terms.values())).sum().backward()
    for tower in bert_twin[0].tower_models():
        assert tower.embeddings.word_embeddings.weight.grad is not None
        assert tower.pooler.dense.weight.grad.abs().sum() > 0  # ICTM reaches the pooler
    bert_twin.zero_grad()


def test_loss_rejects_wrong_models_and_modes(bert_twin, tiny_bert):
    from sentence_transformers import SentenceTransformer

    with pytest.raises(ValueError, match="twin model"):
        JTCSELoss(SentenceTransformer(tiny_bert))
    bert_twin.eval()
    features = stack_views([bert_twin.preprocess(SENTENCES)])
    with pytest.raises(ValueError, match="training-mode"):
        JTCSELoss(bert_twin).compute_loss_from_outputs(bert_twin(features))
    out = _outputs(bert_twin)
    out.pop("pooler_1")
    with pytest.raises(ValueError, match="pooler"):
        JTCSELoss(bert_twin).compute_loss_from_outputs(out)


def test_gather_without_a_process_group_warns_once_and_stays_local(bert_twin):
    import warnings

    out = _outputs(bert_twin)
    local = JTCSELoss(bert_twin, seed=5).compute_loss_from_outputs(out)
    gathering = JTCSELoss(bert_twin, seed=5, gather_across_devices=True)
    with pytest.warns(UserWarning, match="not initialised") as record:
        first = gathering.compute_loss_from_outputs(out)
    assert len(record) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = gathering.compute_loss_from_outputs(out)
    for key in local:
        torch.testing.assert_close(first[key], local[key], rtol=0, atol=0)
    assert set(second) == set(local)
    assert gathering.get_config_dict()["gather_across_devices"] is True


def test_loss_reaches_the_twin_through_a_data_parallel_wrapper(bert_twin):
    """The trainer swaps its (Distributed)DataParallel wrapper into ``loss.model``; the loss unwraps it."""
    wrapped = torch.nn.DataParallel(bert_twin)  # CPU: a pass-through wrapper with the same ``module`` layout
    loss = JTCSELoss(wrapped, seed=2)
    assert loss.twin is bert_twin and loss.get_config_dict()["cael_every"] == 2
    bert_twin.train()
    torch.manual_seed(4)
    through_wrapper = loss([bert_twin.preprocess(SENTENCES)], None)
    torch.manual_seed(4)
    direct = JTCSELoss(bert_twin, seed=2)([bert_twin.preprocess(SENTENCES)], None)
    for key in direct:
        torch.testing.assert_close(through_wrapper[key], direct[key])
    with pytest.raises(ValueError, match="twin model"):
        JTCSELoss(torch.nn.Linear(2, 2))
