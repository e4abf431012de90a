"""The token-level functional regularisers against hand-computed values and naive per-token loops."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from jtcse.losses.functional import (
    DISPERSION_VARIANTS,
    dispersion,
    nitp,
    simreg,
    simreg_chunked,
    threshold_logits,
    thresholded_cross_entropy,
)

DT = torch.float64


def _cos(a, b):
    return torch.dot(a, b) / (a.norm().clamp(min=1e-12) * b.norm().clamp(min=1e-12))


def _mean(values):
    return torch.stack(values).mean() if values else torch.zeros((), dtype=DT)


# ---------------------------------------------------------------------------------------- naive forms


def naive_simreg(emb, labels, mask, tau):
    per_sequence = []
    for b in range(emb.shape[0]):
        idx = [i for i in range(emb.shape[1]) if mask[b, i]]
        groups: dict[int, list] = {}
        for i in idx:
            neg = [k for k in idx if labels[b, k] != labels[b, i]]
            if not neg:
                continue
            pos = [k for k in idx if labels[b, k] == labels[b, i]]
            lse_neg = torch.logsumexp(torch.stack([_cos(emb[b, i], emb[b, k]) / tau for k in neg]), 0)
            lse_pos = torch.logsumexp(torch.stack([_cos(emb[b, i], emb[b, k]) / tau for k in pos]), 0)
            groups.setdefault(int(labels[b, i]), []).append(lse_neg - lse_pos)
        if groups:
            per_sequence.append(_mean([_mean(v) for v in groups.values()]))
    return _mean(per_sequence)


def _angle(a, b):
    c = _cos(a, b).clamp(-1 + 1e-4, 1 - 1e-4)
    return torch.arccos(c) / math.pi


def naive_dispersion(emb, mask, tau, variant, norm_weight=0.01):
    out = []
    for b in range(emb.shape[0]):
        idx = [i for i in range(emb.shape[1]) if mask[b, i]]
        if len(idx) < 2:
            continue
        pairs = [(i, j) for i in idx for j in idx if i != j]
        z = emb[b]
        if variant == "angular":
            out.append(torch.log(sum(torch.exp(-_angle(z[i], z[j]) / tau) for i, j in pairs)))
        elif variant == "orthogonal":
            out.append(_mean([torch.relu(0.5 - _angle(z[i], z[j])) ** 2 for i, j in pairs]))
        elif variant == "l2_repel":
            repel = torch.log(sum(torch.exp(-((z[i] - z[j]) ** 2).sum() / tau) for i, j in pairs))
            out.append(repel + norm_weight * _mean([(z[i] ** 2).sum() for i in idx]))
        else:
            zz = z[idx]
            zc = (zz - zz.mean(0)) / torch.sqrt(zz.var(0, unbiased=True) + 1e-6)
            cov = zc.T @ zc / (len(idx) - 1)
            d = cov.shape[0]
            out.append(sum(cov[m, k] ** 2 for m in range(d) for k in range(d) if m != k))
    return _mean(out)


def naive_nitp(final, shallow, mask, proj):
    terms = []
    for b in range(final.shape[0]):
        for t in range(final.shape[1] - 1):
            if mask[b, t] and mask[b, t + 1]:
                terms.append(1 - _cos(proj(final[b, t]), shallow[b, t + 1].detach()))
    return _mean(terms)


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture
def batch():
    """Padding, a single-token sequence, a sequence with one label everywhere, coinciding vectors."""
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(5, 7, 4, generator=g, dtype=DT)
    labels = torch.randint(0, 3, (5, 7), generator=g)
    mask = torch.ones(5, 7, dtype=torch.bool)
    mask[0, 5:] = False  # padding
    mask[1, 1:] = False  # a single real token
    labels[2] = 4  # every token has the same label
    emb[3, 2] = emb[3, 1]  # two coinciding token vectors ...
    emb[3, 4] = 3.0 * emb[3, 1]  # ... and a third one pointing the same way
    labels[3, 1], labels[3, 2], labels[3, 4] = 0, 1, 0
    return emb.requires_grad_(True), labels, mask


# --------------------------------------------------------------------------------------------- SimReg


def test_simreg_hand_case_two_orthogonal_tokens():
    emb = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]], dtype=DT)
    labels = torch.tensor([[7, 8]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    # ℓ_i = cos/τ (negative) − 1/τ (self) = −1/τ for both tokens; two groups of one.
    assert simreg(emb, labels, mask, temperature=0.5).item() == pytest.approx(-2.0)


@pytest.mark.parametrize("tau", [0.01, 0.2])
def test_simreg_matches_naive_loop(batch, tau):
    emb, labels, mask = batch
    got = simreg(emb, labels, mask, temperature=tau)
    want = naive_simreg(emb, labels, mask, tau)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
    (g_got,) = torch.autograd.grad(got, emb)
    (g_want,) = torch.autograd.grad(want, emb)
    assert torch.isfinite(g_got).all()
    torch.testing.assert_close(g_got, g_want, rtol=1e-7, atol=1e-9)
    assert (g_got[0, 5:] == 0).all() and (g_got[1] == 0).all() and (g_got[2] == 0).all()


def test_simreg_group_averaging_weighs_groups_not_tokens():
    # Three tokens of label 0 and one of label 1: the lone token's group counts as much as the trio.
    g = torch.Generator().manual_seed(1)
    emb = torch.randn(1, 4, 3, generator=g, dtype=DT)
    labels = torch.tensor([[0, 0, 0, 1]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    got = simreg(emb, labels, mask, temperature=0.3)
    terms = []
    for i in range(4):
        neg = [k for k in range(4) if labels[0, k] != labels[0, i]]
        pos = [k for k in range(4) if labels[0, k] == labels[0, i]]
        terms.append(
            torch.logsumexp(torch.stack([_cos(emb[0, i], emb[0, k]) / 0.3 for k in neg]), 0)
            - torch.logsumexp(torch.stack([_cos(emb[0, i], emb[0, k]) / 0.3 for k in pos]), 0)
        )
    want = ((terms[0] + terms[1] + terms[2]) / 3 + terms[3]) / 2
    torch.testing.assert_close(got, want)
    assert not torch.isclose(got, torch.stack(terms).mean())


def test_simreg_without_any_term_is_zero_and_differentiable():
    emb = torch.randn(2, 3, 4, dtype=DT, requires_grad=True)
    labels = torch.zeros(2, 3, dtype=torch.long)  # one label: no token has a negative
    value = simreg(emb, labels, torch.ones(2, 3, dtype=torch.bool))
    assert value.item() == 0.0
    (grad,) = torch.autograd.grad(value, emb)
    assert (grad == 0).all()


def test_simreg_half_precision_is_computed_in_float32():
    emb = torch.randn(2, 5, 8).to(torch.bfloat16)
    labels = torch.randint(0, 3, (2, 5))
    mask = torch.ones(2, 5, dtype=torch.bool)
    got = simreg(emb, labels, mask)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, simreg(emb.float(), labels, mask))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(emb=torch.zeros(2, 3)), "batch, tokens, dim"),
        (dict(mask=torch.ones(2, 4, dtype=torch.bool)), "mask must be"),
        (dict(labels=torch.zeros(2, 4, dtype=torch.long)), "labels must be"),
        (dict(labels=torch.zeros(2, 3)), "integers"),
        (dict(temperature=0.0), "temperature"),
    ],
)
def test_simreg_bad_inputs(kwargs, message):
    args = dict(
        emb=torch.zeros(2, 3, 4),
        labels=torch.zeros(2, 3, dtype=torch.long),
        mask=torch.ones(2, 3, dtype=torch.bool),
        temperature=0.01,
    )
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        simreg(**args)


def test_simreg_chunked_is_simreg_per_chunk(batch):
    emb, labels, mask = batch
    # 7 tokens in chunks of 3 -> chunks [0:3], [3:6], [6:7] (+2 padding positions).
    got = simreg_chunked(emb, labels, mask, chunk_size=3, temperature=0.1)
    pieces = [(0, 3), (3, 6), (6, 7)]
    per_chunk = []
    for b in range(emb.shape[0]):
        for lo, hi in pieces:
            value = naive_simreg(emb[b : b + 1, lo:hi], labels[b : b + 1, lo:hi], mask[b : b + 1, lo:hi], 0.1)
            has_term = any(
                mask[b, i] and any(mask[b, k] and labels[b, k] != labels[b, i] for k in range(lo, hi))
                for i in range(lo, hi)
            )
            if has_term:
                per_chunk.append(value)
    torch.testing.assert_close(got, torch.stack(per_chunk).mean())
    (grad,) = torch.autograd.grad(got, emb)
    assert torch.isfinite(grad).all()


@pytest.mark.parametrize("chunk_size", [7, 100])
def test_simreg_chunked_with_one_chunk_is_simreg(batch, chunk_size):
    emb, labels, mask = batch
    torch.testing.assert_close(simreg_chunked(emb, labels, mask, chunk_size), simreg(emb, labels, mask))


@pytest.mark.parametrize("chunk_size", [0, -3, 2.5, True])
def test_simreg_chunked_rejects_bad_chunk_size(batch, chunk_size):
    emb, labels, mask = batch
    with pytest.raises(ValueError, match="chunk_size"):
        simreg_chunked(emb, labels, mask, chunk_size)


# ----------------------------------------------------------------------------------------- dispersion


def test_dispersion_hand_case_two_orthogonal_tokens():
    emb = torch.tensor([[[1.0, 0.0], [0.0, 3.0]]], dtype=DT)
    mask = torch.ones(1, 2, dtype=torch.bool)
    # two ordered pairs, each at angular distance 1/2: log(2 e^{-1/2}).
    assert dispersion(emb, mask).item() == pytest.approx(math.log(2) - 0.5)
    assert dispersion(emb, mask, variant="orthogonal").item() == pytest.approx(0.0)
    # ‖z1 − z2‖² = 10, mean ‖z‖² = 5.
    assert dispersion(emb, mask, variant="l2_repel", temperature=10.0, norm_weight=0.1).item() == pytest.approx(
        math.log(2) - 1.0 + 0.5
    )


@pytest.mark.parametrize("variant", DISPERSION_VARIANTS)
@pytest.mark.parametrize("tau", [1.0, 0.1])
def test_dispersion_matches_naive_loop(batch, variant, tau):
    emb, _, mask = batch
    got = dispersion(emb, mask, temperature=tau, variant=variant)
    want = naive_dispersion(emb, mask, tau, variant)
    torch.testing.assert_close(got, want, rtol=1e-8, atol=1e-8)
    (g_got,) = torch.autograd.grad(got, emb)
    (g_want,) = torch.autograd.grad(want, emb)
    assert torch.isfinite(g_got).all()
    torch.testing.assert_close(g_got, g_want, rtol=1e-6, atol=1e-8)
    assert (g_got[0, 5:] == 0).all() and (g_got[1] == 0).all()


@pytest.mark.parametrize("variant", DISPERSION_VARIANTS)
def test_dispersion_gradient_is_finite_for_coinciding_and_opposite_tokens(variant):
    v = torch.tensor([0.3, -1.2, 0.5], dtype=torch.float32)
    emb = torch.stack([v, v, -v, 2 * v]).unsqueeze(0).requires_grad_(True)
    value = dispersion(emb, torch.ones(1, 4, dtype=torch.bool), variant=variant)
    (grad,) = torch.autograd.grad(value, emb)
    assert torch.isfinite(value) and torch.isfinite(grad).all()


def test_dispersion_angular_gradient_spreads_tokens():
    g = torch.Generator().manual_seed(3)
    emb = (torch.ones(1, 6, 8) + 0.1 * torch.randn(1, 6, 8, generator=g)).requires_grad_(True)
    mask = torch.ones(1, 6, dtype=torch.bool)
    before = F.normalize(emb.detach(), dim=-1)
    opt = torch.optim.SGD([emb], lr=0.5)
    for _ in range(20):
        opt.zero_grad()
        dispersion(emb, mask, temperature=0.5).backward()
        opt.step()
    after = F.normalize(emb.detach(), dim=-1)
    mean_cos = lambda u: (u[0] @ u[0].T).sum() / 36  # noqa: E731
    assert mean_cos(after) < mean_cos(before) - 0.05


def test_dispersion_bad_inputs():
    emb, mask = torch.zeros(1, 3, 2), torch.ones(1, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="variant must be one of"):
        dispersion(emb, mask, variant="cosine")
    with pytest.raises(ValueError, match="temperature"):
        dispersion(emb, mask, temperature=-1.0)
    with pytest.raises(ValueError, match="norm_weight"):
        dispersion(emb, mask, variant="l2_repel", norm_weight=-1.0)
    with pytest.raises(ValueError, match="mask must be"):
        dispersion(emb, torch.ones(1, 2, dtype=torch.bool))


# ----------------------------------------------------------------------------------------------- NITP


def test_nitp_matches_naive_loop_and_stops_target_gradient(batch):
    emb, _, mask = batch
    shallow = (torch.randn(5, 7, 3, dtype=DT) + 0.5).requires_grad_(True)
    proj = torch.nn.Linear(4, 3, dtype=DT)
    got = nitp(emb, shallow, mask, proj)
    want = naive_nitp(emb, shallow, mask, proj)
    torch.testing.assert_close(got, want)
    g_emb, g_shallow = torch.autograd.grad(got, [emb, shallow], allow_unused=True)
    assert g_shallow is None  # the target is detached
    assert (g_emb[:, -1] == 0).all()  # last position predicts nothing
    assert (g_emb[1] == 0).all() and (g_emb[0, 4:] == 0).all()  # single token, padding and last real token
    assert (g_emb[2, :-1] != 0).any()


def test_nitp_identity_projection_hand_case():
    h = torch.tensor([[[1.0, 0.0], [5.0, 5.0], [0.0, 1.0]]])
    z = torch.tensor([[[9.0, 9.0], [2.0, 0.0], [-3.0, 0.0]]])
    # pairs (0→1): 1 − cos((1,0), (2,0)) = 0; (1→2): 1 − cos((5,5), (−3,0)) = 1 + 1/√2
    assert nitp(h, z, torch.ones(1, 3, dtype=torch.bool)).item() == pytest.approx((0 + 1 + 2**-0.5) / 2)


def test_nitp_shape_errors():
    h = torch.zeros(1, 3, 4)
    with pytest.raises(ValueError, match="share"):
        nitp(h, torch.zeros(1, 2, 4), torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="features"):
        nitp(h, torch.zeros(1, 3, 5), torch.ones(1, 3, dtype=torch.bool))


# ------------------------------------------------------------------------------------- thresholding


def test_threshold_logits_hand_case():
    logits = torch.tensor([[2.0, 0.5, -3.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    target = torch.tensor([1, -100])
    out = threshold_logits(logits, target, margin=1.0)
    assert out[0].tolist() == [2.0, 0.5, float("-inf"), 1.0]  # only −3 < 0.5 − 1 drops
    assert out[1].tolist() == [0.0, 0.0, 0.0, 0.0]  # ignored row untouched


def test_thresholded_cross_entropy_zeroes_exactly_the_dropped_gradients():
    g = torch.Generator().manual_seed(4)
    logits = (3 * torch.randn(6, 9, generator=g, dtype=DT)).requires_grad_(True)
    target = torch.randint(0, 9, (6,), generator=g)
    target[2] = -100
    margin = 2.0
    loss = thresholded_cross_entropy(logits, target, margin)
    (grad,) = torch.autograd.grad(loss, logits)
    rows = [r for r in range(6) if target[r] != -100]
    want_loss, want_grad = 0.0, torch.zeros_like(logits)
    for r in rows:
        t = int(target[r])
        kept = [c for c in range(9) if logits[r, c] >= logits[r, t] - margin]
        probs = torch.softmax(logits[r, kept].detach(), 0)
        want_loss += -torch.log(probs[kept.index(t)]) / len(rows)
        for j, c in enumerate(kept):
            want_grad[r, c] = (probs[j] - float(c == t)) / len(rows)
    dropped = torch.zeros_like(logits, dtype=torch.bool)
    for r in rows:
        dropped[r] = logits[r].detach() < logits[r, target[r]].detach() - margin
    assert dropped.any() and (~dropped).any()
    torch.testing.assert_close(loss, torch.as_tensor(want_loss, dtype=DT))
    torch.testing.assert_close(grad, want_grad)
    assert (grad[dropped] == 0).all()
    assert (grad[~dropped & (torch.arange(6) != 2).unsqueeze(1)] != 0).all()
    assert (grad[2] == 0).all()


def test_threshold_infinite_margin_is_plain_cross_entropy():
    logits = torch.randn(4, 5)
    target = torch.tensor([0, 4, 2, 1])
    torch.testing.assert_close(thresholded_cross_entropy(logits, target, float("inf")), F.cross_entropy(logits, target))


def test_threshold_logits_bad_inputs():
    logits = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="margin"):
        threshold_logits(logits, torch.tensor([0, 1]), -0.5)
    with pytest.raises(ValueError, match="target must have shape"):
        threshold_logits(logits, torch.tensor([0, 1, 2]), 1.0)
    with pytest.raises(ValueError, match="integer"):
        threshold_logits(logits, torch.tensor([0.0, 1.0]), 1.0)
