"""Pure-tensor forms of the JTCSE loss terms (Zong et al., JTCSE, 2025; TNCSE, AAAI 2025).

Shapes: ``a``, ``b``, ``xa`` ... are ``(B, d)`` embeddings of the same B sentences, row ``s`` of a
``...a`` tensor and row ``s`` of the matching ``...b`` tensor being two dropout views of sentence s.
Everything is vectorised over the batch and never synchronises with the host.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def _two_view_nt_xent(anchors: torch.Tensor, candidates: torch.Tensor, temperature: float) -> torch.Tensor:
    """Cross-entropy over ``cos(anchors_i, candidates_j) / t`` for ``2B`` rows stacked as [view a; view b].

    Row i's positive is column ``(i + B) mod 2B`` (the other view of the same sentence), column i
    (the same view of the same sentence) is excluded, every other column is a negative.
    """
    n = anchors.shape[0]
    logits = F.normalize(anchors, dim=-1) @ F.normalize(candidates, dim=-1).T / temperature
    same_view = torch.eye(n, dtype=torch.bool, device=logits.device)
    logits = logits.masked_fill(same_view, float("-inf"))
    targets = torch.arange(n, device=logits.device).roll(n // 2)
    return F.cross_entropy(logits, targets)


def info_nce(a: torch.Tensor, b: torch.Tensor, temperature: float = 0.05) -> torch.Tensor:
    """Unsupervised InfoNCE (NT-Xent) inside one tower over all 2B views (SimCSE, Gao et al., 2021).

    Each of the 2B embeddings is an anchor; its positive is the other view of the same sentence,
    the other 2B-2 embeddings are negatives, self-similarity is excluded. Mean over the 2B anchors.
    """
    z = torch.cat([a, b])
    return _two_view_nt_xent(z, z, temperature)


def icnce(
    xa: torch.Tensor, xb: torch.Tensor, ya: torch.Tensor, yb: torch.Tensor, temperature: float = 0.05
) -> torch.Tensor:
    """Interaction-constrained InfoNCE from tower X's embeddings (anchors) to tower Y's (candidates).

    ``sim(X_i, Y_j) / t`` over the 2B x 2B matrix; for the anchor "view v of sentence s" the positive
    is Y's *other* view of s, Y's *same* view of s is excluded, the other 2B-2 entries are negatives.
    Mean over the 2B anchors.
    """
    return _two_view_nt_xent(torch.cat([xa, xb]), torch.cat([ya, yb]), temperature)


def tmc(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Tensor-modulus constraint per row, JTCSE eq. 1: ``||x - y|| / (||x|| + ||y||)``.

    In ``[0, 1]``; 0 iff x and y have the same norm and direction. Two zero rows give 0.
    """
    denominator = (x.norm(dim=-1) + y.norm(dim=-1)).clamp_min(torch.finfo(x.dtype).tiny)
    return (x - y).norm(dim=-1) / denominator


def ictm(
    h_anchor: torch.Tensor,
    h_partner: torch.Tensor,
    p_anchor: torch.Tensor,
    p_partner: torch.Tensor,
    eps: float = 1e-4,
) -> torch.Tensor:
    """One direction of the inter-tower modulus term, mean over rows:

    ``mean_s [ -log(max(cos(h_anchor_s, h_partner_s), eps)) * TMC(p_anchor_s, p_partner_s) ]``

    with ``h`` the towers' CLS vectors and ``p`` their pooler outputs (JTCSE sec. III-C). The full
    ICTM is ``ictm(h_I^a, h_II^b, p_I^a, p_II^b) + ictm(h_II^a, h_I^b, p_II^a, p_I^b)``.
    """
    cos = F.cosine_similarity(h_anchor, h_partner, dim=-1)
    return (-torch.log(cos.clamp_min(eps)) * tmc(p_anchor, p_partner)).mean()
