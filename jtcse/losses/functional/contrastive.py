"""Pure-tensor forms of the JTCSE loss terms (Zong et al., JTCSE, 2025; TNCSE, AAAI 2025).

Shapes: ``a``, ``b``, ``xa`` ... are ``(B, d)`` embeddings of the same B sentences, row ``s`` of a
``...a`` tensor and row ``s`` of the matching ``...b`` tensor being two dropout views of sentence s.
Everything is vectorised over the batch and never synchronises with the host. Every term computes in float32
under any autocast (:func:`~jtcse.devices.in_float32`): its normalisation, similarity matrix, temperature scaling
and cross-entropy (InfoNCE, ICNCE), its cosines, logarithm and norms (ICTM).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from jtcse.devices import in_float32


def gathers(gather: bool) -> bool:
    """Whether ``gather=True`` really gathers: a ``torch.distributed`` group of more than one rank is up."""
    from sentence_transformers.util.distributed import get_world_size

    return gather and get_world_size() > 1


@in_float32
def _two_view_nt_xent(
    anchors_a: torch.Tensor,
    anchors_b: torch.Tensor,
    candidates_a: torch.Tensor,
    candidates_b: torch.Tensor,
    temperature: float,
    gather: bool = False,
) -> torch.Tensor:
    """Cross-entropy over ``cos(anchor, candidate) / t``, anchors [view a; view b] of the local B sentences.

    Candidates are [view a; view b] of the local B sentences, or with :func:`gathers` of all
    ``N = world_size * B`` sentences (``all_gather_with_grad``, rank-major, so the local sentence j is
    global sentence ``rank * B + j``). The anchor "view a of sentence s" has its positive at column
    ``N + s`` (the other view) and its column ``s`` (the same view) excluded; view b mirrors that;
    every other column is a negative. Mean over the 2B local anchors.
    """
    n = anchors_a.shape[0]
    offset = 0
    if gathers(gather):
        from sentence_transformers.util.distributed import all_gather_with_grad, get_rank

        candidates_a, candidates_b = all_gather_with_grad(candidates_a), all_gather_with_grad(candidates_b)
        offset = get_rank() * n
    total = candidates_a.shape[0]
    anchors = F.normalize(torch.cat([anchors_a, anchors_b]), dim=-1)
    candidates = F.normalize(torch.cat([candidates_a, candidates_b]), dim=-1)
    logits = anchors @ candidates.T / temperature
    own = torch.arange(offset, offset + n, device=logits.device)
    same_view = torch.cat([own, own + total])
    other_view = torch.cat([own + total, own])
    rows = torch.arange(2 * n, device=logits.device)
    logits = logits.index_put((rows, same_view), logits.new_tensor(float("-inf")))
    return F.cross_entropy(logits, other_view)


@in_float32
def cos_sim(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """sentence-transformers' ``cos_sim`` (the ``(n, m)`` cosines of ``a``'s rows with ``b``'s) in float32 under any
    autocast: the similarity the SimCSE warm-up's ``MultipleNegativesRankingLoss`` scales by 1/τ (then its
    log-sum-exp and cross-entropy run on float32 too)."""
    from sentence_transformers.util import cos_sim as cosines

    return cosines(a, b)


def info_nce(a: torch.Tensor, b: torch.Tensor, temperature: float = 0.05, gather: bool = False) -> torch.Tensor:
    """Unsupervised InfoNCE (NT-Xent) inside one tower over all 2B views (SimCSE, Gao et al., 2021).

    Each of the 2B embeddings is an anchor; its positive is the other view of the same sentence,
    the other 2B-2 embeddings are negatives, self-similarity is excluded. Mean over the 2B anchors.
    With ``gather`` (and a process group of several ranks) the anchors stay local and the
    candidates are the views of every rank's sentences: ``2N - 2`` negatives for ``N`` global sentences.
    """
    return _two_view_nt_xent(a, b, a, b, temperature, gather)


def icnce(
    xa: torch.Tensor,
    xb: torch.Tensor,
    ya: torch.Tensor,
    yb: torch.Tensor,
    temperature: float = 0.05,
    gather: bool = False,
) -> torch.Tensor:
    """Interaction-constrained InfoNCE from tower X's embeddings (anchors) to tower Y's (candidates).

    ``sim(X_i, Y_j) / t`` over the 2B x 2B matrix; for the anchor "view v of sentence s" the positive
    is Y's *other* view of s, Y's *same* view of s is excluded, the other 2B-2 entries are negatives.
    Mean over the 2B anchors. ``gather`` takes Y from every rank, as in :func:`info_nce`.
    """
    return _two_view_nt_xent(xa, xb, ya, yb, temperature, gather)


def tmc(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Tensor-modulus constraint per row, JTCSE eq. 1: ``||x - y|| / (||x|| + ||y||)``.

    In ``[0, 1]``; 0 iff x and y have the same norm and direction. Two zero rows give 0.
    """
    denominator = (x.norm(dim=-1) + y.norm(dim=-1)).clamp_min(torch.finfo(x.dtype).tiny)
    return (x - y).norm(dim=-1) / denominator


@in_float32
def ictm(
    h_anchor: torch.Tensor,
    h_partner: torch.Tensor,
    p_anchor: torch.Tensor,
    p_partner: torch.Tensor,
    eps: float = 1e-4,
) -> torch.Tensor:
    """One direction of the inter-tower modulus term, mean over rows:

    ``mean_s [ -log(max(cos(h_anchor_s, h_partner_s), eps)) * TMC(p_anchor_s, p_partner_s) ]``

    with ``h`` the towers' pooled vectors (CLS in JTCSE sec. III-C) and ``p`` their pooler outputs. The full
    ICTM is ``ictm(h_I^a, h_II^b, p_I^a, p_II^b) + ictm(h_II^a, h_I^b, p_II^a, p_I^b)``.
    """
    cos = F.cosine_similarity(h_anchor, h_partner, dim=-1)
    return (-torch.log(cos.clamp_min(eps)) * tmc(p_anchor, p_partner)).mean()
