"""Logit thresholding ("Stop Jostling") for in-batch contrastive losses and token cross-entropy heads.

Cross-entropy pushes *every* non-target away from the anchor ("marginalisation"), including
candidates that are already far below the target. Thresholding sets each logit below
``logit[target] − margin`` to −inf before the softmax, so only the target and the candidates within
``margin`` of it receive gradient -- an adaptive negative sampling over the similarity matrix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from sentence_transformers.util import cos_sim, similarity_fct_name
from torch import Tensor, nn

from jtcse.losses.functional.token import thresholded_cross_entropy

__all__ = ["ThresholdedCrossEntropyLoss", "ThresholdedMultipleNegativesRankingLoss"]

_CITATION = """
@article{turumtaev2026stopjostling,
    title = {Stop Jostling: Adaptive Negative Sampling Reduces the Marginalization of Low-Resource Language Tokens by Cross-Entropy Loss},
    author = {Turumtaev, Galim},
    year = {2026},
    eprint = {2601.22439},
    archivePrefix = {arXiv},
}
"""


def _check_margin(margin: float, who: str) -> float:
    if not margin >= 0:
        raise ValueError(f"{who}: margin must be ≥ 0 (in logit units), got {margin}")
    return float(margin)


class ThresholdedMultipleNegativesRankingLoss(nn.Module):
    """In-batch negatives InfoNCE (MultipleNegativesRankingLoss) with logit thresholding.

    For anchors ``a_i`` and candidates ``c_j`` (all positives, then all hard negatives):
    ``s_ij = scale · sim(a_i, c_j)``; entries with ``s_ij < s_ii − margin`` are set to −inf, then
    ``loss = CE(s, i)``. Candidates that the anchor already ranks ``margin`` below its positive get
    no gradient from it. ``margin = inf`` is the plain MultipleNegativesRankingLoss.

    Inputs: (anchor, positive) pairs or (anchor, positive, negative_1, …) tuples, no labels. For
    unsupervised SimCSE, give the same sentence as anchor and positive (dropout makes the views).

    Args:
        model: the SentenceTransformer.
        scale: inverse temperature (20 = τ 0.05).
        margin: threshold below the positive, in logit units (after ``scale``).
        similarity_fct: similarity of two embedding matrices (default cosine).
    """

    def __init__(
        self,
        model: nn.Module,
        scale: float = 20.0,
        margin: float = 5.0,
        similarity_fct: Callable[[Tensor, Tensor], Tensor] = cos_sim,
    ) -> None:
        super().__init__()
        if not scale > 0:
            raise ValueError(f"ThresholdedMultipleNegativesRankingLoss: scale must be > 0, got {scale}")
        self.model = model
        self.scale = float(scale)
        self.margin = _check_margin(margin, "ThresholdedMultipleNegativesRankingLoss")
        self.similarity_fct = similarity_fct

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        from sentence_transformers.base.losses.merged_forward import embed_columns

        return self.compute_loss_from_embeddings(embed_columns(self.model, sentence_features), labels)

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], labels: Tensor | None = None) -> Tensor:
        if len(embeddings) < 2:
            raise ValueError(
                f"ThresholdedMultipleNegativesRankingLoss needs (anchor, positive[, negatives…]) columns, got {len(embeddings)}"
            )
        anchors = embeddings[0]
        candidates = torch.cat(embeddings[1:], dim=0)
        logits = self.similarity_fct(anchors, candidates) * self.scale
        target = torch.arange(anchors.shape[0], device=anchors.device)
        return thresholded_cross_entropy(logits, target, self.margin)

    def get_config_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, "margin": self.margin, "similarity_fct": similarity_fct_name(self.similarity_fct)}

    @property
    def temperature(self) -> float:
        return 1.0 / self.scale

    @property
    def citation(self) -> str:
        return _CITATION


class ThresholdedCrossEntropyLoss(nn.Module):
    """Token cross-entropy with logit thresholding, for MLM / causal-LM heads.

    ``forward(logits (B, n, V), labels (B, n))`` with ``ignore_index`` on unscored positions (the
    ``transformers`` convention, -100). With ``shift=True`` (causal heads) position ``t`` predicts
    label ``t + 1``. Use it in place of ``nn.CrossEntropyLoss`` in a head's training step.
    """

    def __init__(self, margin: float = 5.0, ignore_index: int = -100, shift: bool = False) -> None:
        super().__init__()
        self.margin = _check_margin(margin, "ThresholdedCrossEntropyLoss")
        self.ignore_index = int(ignore_index)
        self.shift = bool(shift)

    def forward(self, logits: Tensor, labels: Tensor) -> Tensor:
        if logits.shape[:-1] != labels.shape:
            raise ValueError(
                f"ThresholdedCrossEntropyLoss: labels must have shape {tuple(logits.shape[:-1])}, got {tuple(labels.shape)}"
            )
        if self.shift:
            logits, labels = logits[..., :-1, :], labels[..., 1:]
        return thresholded_cross_entropy(logits, labels, self.margin, ignore_index=self.ignore_index)

    def get_config_dict(self) -> dict[str, Any]:
        return {"margin": self.margin, "ignore_index": self.ignore_index, "shift": self.shift}

    @property
    def citation(self) -> str:
        return _CITATION
