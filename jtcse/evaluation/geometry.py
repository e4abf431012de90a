"""Geometry of embeddings: the quantities the papers plot, as plain tensor functions.

* alignment  ``E‖f(x) − f(x⁺)‖^α`` and uniformity ``log E exp(−t‖f(x) − f(y)‖²)`` over distinct pairs,
  on L2-normalised embeddings (Wang & Isola, ICML 2020; α = 2, t = 2);
* CLS energy ``E_CLS = ‖h_cls‖₂ / ‖H_others‖_F`` per sequence, H_others = the other non-padding tokens
  (JTCSE paper, §VI);
* condensation ``μ = (1/N²) Σ_i Σ_j cos(z_i, z_j)`` over a sequence's N tokens, and its Spearman /
  Kendall correlation with depth (dispersion-loss paper, §2.2);
* attention maps averaged over heads and sequences, and the attention mass on the first / last token
  (the attention-sink picture).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def alignment(x: torch.Tensor, y: torch.Tensor, alpha: float = 2.0) -> float:
    """Mean ‖x̂_i − ŷ_i‖^α over positive pairs (rows of ``x`` and ``y``), x̂ = x/‖x‖."""
    x, y = F.normalize(x.double(), dim=-1), F.normalize(y.double(), dim=-1)
    return float((x - y).norm(dim=-1).pow(alpha).mean())


def uniformity(x: torch.Tensor, t: float = 2.0) -> float:
    """log of the mean of exp(−t‖x̂_i − x̂_j‖²) over all pairs i < j."""
    x = F.normalize(x.double(), dim=-1)
    return float(torch.pdist(x, p=2).pow(2).mul(-t).exp().mean().log())


def cls_energy(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Per sequence ‖h_0‖₂ / ‖[h_j]_{j≥1, valid}‖_F for hidden states (B, T, D); returns (B,)."""
    mask = attention_mask.to(hidden.dtype)
    others = mask.clone()
    others[:, 0] = 0
    others_sq = (hidden.pow(2).sum(-1) * others).sum(-1)
    return hidden[:, 0].norm(dim=-1) / others_sq.sqrt()


def mean_token_cosine(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Per sequence (1/N²) Σ_{i,j} cos(z_i, z_j) over its N valid tokens (self-pairs included); (B,)."""
    z = F.normalize(hidden.double(), dim=-1)
    mask = attention_mask.double()
    sims = z @ z.transpose(1, 2)
    pair_mask = mask[:, :, None] * mask[:, None, :]
    return (sims * pair_mask).sum((1, 2)) / pair_mask.sum((1, 2))


def depth_correlation(values) -> dict[str, float | None]:
    """Spearman ρ and Kendall τ between a per-layer sequence and its layer index 1..L; ``None`` where there is none
    (fewer than two layers, or the same value at every layer), never NaN."""
    from scipy.stats import kendalltau, spearmanr

    depth = list(range(1, len(values) + 1))
    if len(values) < 2 or max(values) == min(values):
        return {"spearman": None, "kendall": None}
    return {
        "spearman": float(spearmanr(depth, values).statistic),
        "kendall": float(kendalltau(depth, values).statistic),
    }


def attention_sums(
    attentions: torch.Tensor, attention_mask: torch.Tensor, size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Head-averaged attention (B, H, T, T) summed over the batch on a ``size``×``size`` grid, with counts.

    Position pairs where query or key is padding do not count; divide sum by count for the mean map.
    """
    mean_heads = attentions.double().mean(1)
    mask = attention_mask.double()
    valid = mask[:, :, None] * mask[:, None, :]
    t = min(size, mean_heads.shape[-1])
    total = torch.zeros(size, size, dtype=torch.float64)
    count = torch.zeros(size, size, dtype=torch.float64)
    total[:t, :t] = (mean_heads * valid)[:, :t, :t].sum(0)
    count[:t, :t] = valid[:, :t, :t].sum(0)
    return total, count


def sink_shares(attentions: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sequence, the mean over valid queries of the head-averaged attention paid to the first
    token (CLS / ``<s>``) and to the last valid token (SEP / ``</s>``); two (B,) tensors."""
    mean_heads = attentions.double().mean(1)  # (B, T, T)
    mask = attention_mask.double()
    n_valid = mask.sum(-1)
    last = (n_valid - 1).long()
    to_first = (mean_heads[:, :, 0] * mask).sum(-1) / n_valid
    to_last_per_query = mean_heads.gather(2, last[:, None, None].expand(-1, mean_heads.shape[1], 1)).squeeze(-1)
    to_last = (to_last_per_query * mask).sum(-1) / n_valid
    return to_first, to_last
