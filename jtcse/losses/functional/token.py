"""Token-level regularisers as pure tensor functions.

Every function takes padded token tensors ``(B, n, d)`` with a boolean ``mask`` ``(B, n)`` that is
True on real tokens, works on the whole batch at once (no Python loop over sequences, no host
sync), computes in float32 whatever the input dtype (safe under autocast), and returns a scalar
that stays attached to the graph even when no sequence contributes a term (then it is 0).

* :func:`simreg` / :func:`simreg_chunked` -- SimReg, "Embedding Similarity Regularization"
  (before the softplus; the loss classes apply ``λ·softplus``).
* :func:`dispersion` -- the dispersion loss against embedding condensation and its three variants.
* :func:`nitp` -- Next Implicit Token Prediction: ``1 − cos(P(h_t), sg(z_{t+1}))``.
* :func:`threshold_logits` / :func:`thresholded_cross_entropy` -- logit thresholding from
  "Stop Jostling" (far-away non-targets get no marginalisation gradient).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "DISPERSION_VARIANTS",
    "dispersion",
    "nitp",
    "simreg",
    "simreg_chunked",
    "threshold_logits",
    "thresholded_cross_entropy",
]

DISPERSION_VARIANTS = ("angular", "decorrelation", "l2_repel", "orthogonal")

# A finite stand-in for -inf: a row with no admissible entry must give a finite value and a finite
# (zero) gradient, which a true -inf does not (exp(-inf - -inf) is NaN).
_NEG = -1e30
# Terms more than 30 nats below a row's maximum are left out of its log-sum-exp. Their weight
# (< e^-30 ≈ 1e-13 against the maximum's 1) is below float32 resolution even summed over a few
# thousand tokens, so value and gradient are unchanged in float32; computing them, however, makes
# float32 denormals -- in the forward, and in the backward when a small upstream gradient (e.g.
# through SimReg's softplus) multiplies them -- which slow CPU kernels down ten-fold.
_LSE_FLOOR = -30.0
# cos is clamped to [-1 + _ACOS_EPS, 1 - _ACOS_EPS] before arccos (value only; the gradient passes
# straight through at the boundary), so coinciding or opposite vectors keep a finite gradient.
_ACOS_EPS = 1e-4


def _check_tokens(emb: Tensor, mask: Tensor, who: str) -> None:
    if emb.dim() != 3:
        raise ValueError(f"{who}: embeddings must be (batch, tokens, dim), got shape {tuple(emb.shape)}")
    if mask.shape != emb.shape[:2]:
        raise ValueError(f"{who}: mask must be (batch, tokens) = {tuple(emb.shape[:2])}, got shape {tuple(mask.shape)}")


def _as_float(x: Tensor) -> Tensor:
    """Half/bfloat16 inputs are computed in float32; float32/float64 stay as they are."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def _check_temperature(temperature: float, who: str) -> None:
    if not temperature > 0:
        raise ValueError(f"{who}: temperature must be > 0, got {temperature}")


def _masked_logsumexp(logits: Tensor, keep: Tensor) -> Tensor:
    """``log Σ_{keep} exp(logits)`` over the last axis (terms below max − 30 left out, see ``_LSE_FLOOR``).

    Rows with nothing kept give about ``_NEG`` with a zero gradient.
    """
    top = torch.where(keep, logits, _NEG).amax(dim=-1, keepdim=True).detach()
    # max=0 is exact for kept entries and keeps exp() of the others (possibly far above top) finite
    shifted = (logits - top).clamp(min=_LSE_FLOOR, max=0.0)
    total = torch.where(keep, shifted.exp(), torch.zeros_like(shifted)).sum(dim=-1)
    empty = ~keep.any(dim=-1)
    return top.squeeze(-1) + torch.log(total + empty.to(total.dtype))


def _mean_over(values: Tensor, has_term: Tensor) -> Tensor:
    """Mean of ``values`` over the entries where ``has_term``; 0 (still on the graph) if there are none."""
    total = torch.where(has_term, values, torch.zeros_like(values)).sum()
    return total / has_term.sum().clamp(min=1)


# --------------------------------------------------------------------------------------------- SimReg


def simreg(emb: Tensor, labels: Tensor, mask: Tensor, temperature: float = 0.01) -> Tensor:
    """SimReg before the softplus (SimReg paper, eq. 3 with cosine similarity and group averaging).

    Per sequence, with ``φ(a, b) = exp(cos(a, b) / τ)``, positives ``P_i = {k : y_k = y_i}`` (self
    included) and negatives ``N_i = {k : y_k ≠ y_i}`` among the valid tokens::

        ℓ_i = log Σ_{k∈N_i} φ(e_i, e_k) − log Σ_{k∈P_i} φ(e_i, e_k)

    for every valid token that has at least one negative. ``ℓ`` is averaged within each label group,
    then over the groups of the sequence, then over the sequences that have any term.

    Args:
        emb: ``(B, n, d)`` token embeddings.
        labels: ``(B, n)`` integer labels (e.g. the token ids).
        mask: ``(B, n)`` True on real tokens (padding is excluded everywhere).
        temperature: τ (the paper's robust choice is 0.01).
    """
    _check_tokens(emb, mask, "simreg")
    if labels.shape != mask.shape:
        raise ValueError(f"simreg: labels must be (batch, tokens) = {tuple(mask.shape)}, got {tuple(labels.shape)}")
    if labels.is_floating_point() or labels.is_complex():
        raise ValueError(f"simreg: labels must be integers (e.g. token ids), got dtype {labels.dtype}")
    _check_temperature(temperature, "simreg")
    valid = mask.bool()
    unit = F.normalize(_as_float(emb), dim=-1)
    logits = unit @ unit.transpose(1, 2) / temperature  # (B, n, n)
    pair = valid.unsqueeze(2) & valid.unsqueeze(1)
    same = labels.unsqueeze(2) == labels.unsqueeze(1)
    positive = pair & same  # the diagonal of every valid token: self is always a positive
    negative = pair & ~same
    neg_lse = _masked_logsumexp(logits, negative)
    pos_lse = _masked_logsumexp(logits, positive)
    has_term = valid & negative.any(dim=-1)  # (B, n)
    per_token = torch.where(has_term, neg_lse - pos_lse, torch.zeros_like(neg_lse))
    # Group averaging without a loop: token i's group has c_i = #{k with a term and y_k = y_i}
    # members, so Σ_groups mean_g = Σ_i ℓ_i / c_i and the number of groups is Σ_i 1 / c_i.
    group_size = (same & has_term.unsqueeze(1)).sum(dim=-1).clamp(min=1).to(per_token.dtype)
    inv = has_term.to(per_token.dtype) / group_size
    groups = inv.sum(dim=-1)
    per_sequence = (per_token * inv).sum(dim=-1) / groups.clamp(min=1e-12)
    return _mean_over(per_sequence, groups > 0)


def simreg_chunked(emb: Tensor, labels: Tensor, mask: Tensor, chunk_size: int, temperature: float = 0.01) -> Tensor:
    """Chunk-wise SimReg: every run of ``chunk_size`` consecutive positions is its own sequence.

    A sequence of ``n`` tokens is cut into ``b = ⌈n / chunk_size⌉`` chunks (the last one padded);
    positives and negatives are taken inside a chunk only, so the similarity tensors hold
    ``B·b·chunk_size² = B·n²/b`` entries instead of ``B·n²``. The chunks are then averaged like
    sequences in :func:`simreg` (each chunk with any term counts once). With ``chunk_size ≥ n``
    this is exactly :func:`simreg`.
    """
    _check_tokens(emb, mask, "simreg_chunked")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"simreg_chunked: chunk_size must be a positive integer, got {chunk_size!r}")
    if labels.shape != mask.shape:
        raise ValueError(
            f"simreg_chunked: labels must be (batch, tokens) = {tuple(mask.shape)}, got {tuple(labels.shape)}"
        )
    batch, n, dim = emb.shape
    chunks = max(1, math.ceil(n / chunk_size))
    pad = chunks * chunk_size - n
    if pad:
        emb = F.pad(emb, (0, 0, 0, pad))
        labels = F.pad(labels, (0, pad))
        mask = F.pad(mask.bool(), (0, pad), value=False)
    return simreg(
        emb.reshape(batch * chunks, chunk_size, dim),
        labels.reshape(batch * chunks, chunk_size),
        mask.reshape(batch * chunks, chunk_size),
        temperature,
    )


# ----------------------------------------------------------------------------------------- dispersion


def _angular_distance(unit: Tensor) -> Tensor:
    """``arccos(cos(z_i, z_j)) / π`` for unit rows, clamped so the gradient stays finite."""
    cos = unit @ unit.transpose(1, 2)
    clamped = cos.clamp(-1.0 + _ACOS_EPS, 1.0 - _ACOS_EPS)
    # Value of the clamped cosine, gradient of the raw one (evaluated at the clamped point).
    cos = cos + (clamped - cos).detach()
    return torch.arccos(cos) / math.pi


def _pair_mask(valid: Tensor) -> Tensor:
    n = valid.shape[1]
    off_diagonal = ~torch.eye(n, dtype=torch.bool, device=valid.device)
    return valid.unsqueeze(2) & valid.unsqueeze(1) & off_diagonal


def _log_sum_exp_pairs(logits: Tensor, pairs: Tensor) -> Tensor:
    """Per sequence ``log Σ_{(i,j) ∈ pairs} exp(logits_ij)``; finite filler where there is no pair."""
    return _masked_logsumexp(logits.flatten(1), pairs.flatten(1))


def _dispersion_angular(z: Tensor, valid: Tensor, temperature: float) -> tuple[Tensor, Tensor]:
    pairs = _pair_mask(valid)
    distance = _angular_distance(F.normalize(z, dim=-1))
    return _log_sum_exp_pairs(-distance / temperature, pairs), pairs.flatten(1).any(-1)


def _dispersion_orthogonal(z: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    pairs = _pair_mask(valid)
    distance = _angular_distance(F.normalize(z, dim=-1))
    hinge = torch.relu(0.5 - distance).square()
    count = pairs.flatten(1).sum(-1)
    total = torch.where(pairs, hinge, torch.zeros_like(hinge)).flatten(1).sum(-1)
    return total / count.clamp(min=1), count > 0


def _dispersion_l2_repel(z: Tensor, valid: Tensor, temperature: float, norm_weight: float) -> tuple[Tensor, Tensor]:
    pairs = _pair_mask(valid)
    sq_norm = z.square().sum(-1)  # (B, n)
    sq_dist = (sq_norm.unsqueeze(2) + sq_norm.unsqueeze(1) - 2.0 * (z @ z.transpose(1, 2))).clamp(min=0.0)
    repel = _log_sum_exp_pairs(-sq_dist / temperature, pairs)
    tokens = valid.sum(-1)
    mean_sq_norm = torch.where(valid, sq_norm, torch.zeros_like(sq_norm)).sum(-1) / tokens.clamp(min=1)
    return repel + norm_weight * mean_sq_norm, pairs.flatten(1).any(-1)


def _dispersion_decorrelation(z: Tensor, valid: Tensor, eps: float = 1e-6) -> tuple[Tensor, Tensor]:
    weight = valid.unsqueeze(-1).to(z.dtype)
    tokens = weight.sum(1)  # (B, 1)
    denom = (tokens - 1.0).clamp(min=1.0)
    mean = (z * weight).sum(1, keepdim=True) / tokens.clamp(min=1.0).unsqueeze(1)
    centred = (z - mean) * weight
    std = torch.sqrt(centred.square().sum(1, keepdim=True) / denom.unsqueeze(1) + eps)
    standard = centred / std  # padding rows stay 0
    n, d = z.shape[1], z.shape[2]
    # ‖ZᵀZ‖_F = ‖ZZᵀ‖_F: take whichever Gram matrix is smaller.
    gram = standard @ standard.transpose(1, 2) if n <= d else standard.transpose(1, 2) @ standard
    frobenius = gram.square().flatten(1).sum(-1)
    diagonal = standard.square().sum(1).square().sum(-1)
    off_diagonal = (frobenius - diagonal) / denom.squeeze(-1).square()
    return off_diagonal, tokens.squeeze(-1) >= 2


def dispersion(
    emb: Tensor,
    mask: Tensor,
    temperature: float = 1.0,
    variant: str = "angular",
    *,
    norm_weight: float = 0.01,
) -> Tensor:
    """Dispersion loss over the valid tokens of each sequence, averaged over sequences with ≥ 2 tokens.

    Variants (Dispersion-loss paper, Table 1, "ours" column), with ``D_ij = arccos(cos(z_i, z_j)) / π``:

    * ``"angular"`` (canonical): ``log Σ_{i≠j} exp(−D_ij / τ)``;
    * ``"decorrelation"``: ``Σ_{m≠n} C_mn²`` with ``C = Z_cᵀ Z_c / (N − 1)`` the correlation matrix
      of the features standardised over the ``N`` valid tokens (``temperature`` unused);
    * ``"l2_repel"``: ``log Σ_{i≠j} exp(−‖z_i − z_j‖² / τ) + norm_weight · mean_i ‖z_i‖²``
      (the norm term is the paper's ``λ_norm‖Z‖²`` divided by ``N`` so its weight does not grow
      with sentence length);
    * ``"orthogonal"``: ``mean_{i≠j} max(0, ½ − D_ij)²`` (``temperature`` unused).

    ``arccos`` sees a clamped cosine and passes the gradient straight through, so coinciding
    tokens keep finite gradients.
    """
    _check_tokens(emb, mask, "dispersion")
    if variant not in DISPERSION_VARIANTS:
        raise ValueError(f"dispersion: variant must be one of {', '.join(DISPERSION_VARIANTS)}; got {variant!r}")
    _check_temperature(temperature, "dispersion")
    z = _as_float(emb)
    valid = mask.bool()
    if variant == "angular":
        per_sequence, has_term = _dispersion_angular(z, valid, temperature)
    elif variant == "orthogonal":
        per_sequence, has_term = _dispersion_orthogonal(z, valid)
    elif variant == "l2_repel":
        if norm_weight < 0:
            raise ValueError(f"dispersion: norm_weight must be ≥ 0, got {norm_weight}")
        per_sequence, has_term = _dispersion_l2_repel(z, valid, temperature, norm_weight)
    else:
        per_sequence, has_term = _dispersion_decorrelation(z, valid)
    return _mean_over(per_sequence, has_term)


# ----------------------------------------------------------------------------------------------- NITP


def nitp(
    final_hidden: Tensor,
    shallow_hidden: Tensor,
    mask: Tensor,
    projection: Callable[[Tensor], Tensor] | None = None,
) -> Tensor:
    """Next Implicit Token Prediction: ``mean_t [1 − cos(P(h_t), sg(z_{t+1}))]``.

    ``h`` = ``final_hidden`` (B, n, d), ``z`` = ``shallow_hidden`` (B, n, d') -- a shallow layer's
    hidden states, detached here so no gradient reaches that layer through the target. ``P`` is
    ``projection`` (identity if None). The mean runs over every position ``t`` where both ``t`` and
    ``t + 1`` are real tokens (padding and each sequence's last token are masked).
    """
    _check_tokens(final_hidden, mask, "nitp")
    if shallow_hidden.shape[:2] != final_hidden.shape[:2]:
        raise ValueError(
            f"nitp: shallow_hidden must share (batch, tokens) = {tuple(final_hidden.shape[:2])}, "
            f"got {tuple(shallow_hidden.shape)}"
        )
    valid = mask.bool()
    pairs = valid[:, :-1] & valid[:, 1:]
    predicted = final_hidden[:, :-1]
    if projection is not None:
        predicted = projection(predicted)
    target = shallow_hidden[:, 1:].detach()
    if predicted.shape[-1] != target.shape[-1]:
        raise ValueError(
            f"nitp: the prediction has {predicted.shape[-1]} features but the target has {target.shape[-1]}"
        )
    predicted = _as_float(predicted)
    cos = F.cosine_similarity(predicted, _as_float(target).to(predicted.dtype), dim=-1, eps=1e-8)
    return _mean_over(1.0 - cos, pairs)


# ----------------------------------------------------------------------------------- logit thresholding


def threshold_logits(logits: Tensor, target: Tensor, margin: float, ignore_index: int | None = -100) -> Tensor:
    """Set every logit below ``logits[target] − margin`` to −inf (Stop-Jostling logit thresholding).

    After the softmax those entries have probability 0, so a cross-entropy on the result sends them
    no "marginalisation" gradient; the target and everything within ``margin`` of it are untouched.
    ``logits`` is ``(..., C)``, ``target`` is ``(...)`` class indices; rows whose target equals
    ``ignore_index`` are left as they are. ``margin`` must be ≥ 0 (``inf`` disables thresholding).
    """
    if not margin >= 0:
        raise ValueError(f"threshold_logits: margin must be ≥ 0, got {margin}")
    if target.shape != logits.shape[:-1]:
        raise ValueError(
            f"threshold_logits: target must have shape {tuple(logits.shape[:-1])} (logits without the class "
            f"axis), got {tuple(target.shape)}"
        )
    if target.is_floating_point():
        raise ValueError(f"threshold_logits: target must hold integer class indices, got dtype {target.dtype}")
    kept_rows = torch.ones_like(target, dtype=torch.bool) if ignore_index is None else target != ignore_index
    index = torch.where(kept_rows, target, torch.zeros_like(target)).unsqueeze(-1)
    threshold = logits.gather(-1, index) - margin
    drop = (logits < threshold) & kept_rows.unsqueeze(-1)
    return logits.masked_fill(drop, float("-inf"))


def thresholded_cross_entropy(
    logits: Tensor,
    target: Tensor,
    margin: float,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """Cross-entropy over :func:`threshold_logits` (``logits (..., C)``, ``target (...)``)."""
    cut = threshold_logits(logits, target, margin, ignore_index=ignore_index)
    return F.cross_entropy(
        _as_float(cut.reshape(-1, cut.shape[-1])), target.reshape(-1), ignore_index=ignore_index, reduction=reduction
    )
