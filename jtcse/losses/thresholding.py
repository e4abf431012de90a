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
    def __init__(
        self,
        model: nn.Module,
        scale: float = 20.0,
        margin: float = 5.0,
        similarity_fct: Callable[[Tensor, Tensor], Tensor] = cos_sim,
    ) -> None:
        """
        In-batch negatives InfoNCE (``MultipleNegativesRankingLoss``) with logit thresholding. For anchors
        ``a_i`` and candidates ``c_j`` (all positives, then all hard negatives)::

            s_ij = scale · sim(a_i, c_j)
            s_ij = −inf  where  s_ij < s_ii − margin
            L    = mean_i CE(s_i, i)

        Candidates that the anchor already ranks ``margin`` below its positive get no gradient from it, so the
        softmax no longer pushes away what is already far (an adaptive negative sampling). ``margin = inf`` is
        the plain ``MultipleNegativesRankingLoss``.

        Args:
            model: the SentenceTransformer.
            scale: inverse temperature (20 = τ 0.05).
            margin: threshold below the positive, in logit units (after ``scale``).
            similarity_fct: similarity of two embedding matrices (default cosine).

        References:
            - Turumtaev, Stop Jostling: Adaptive Negative Sampling Reduces the Marginalization of Low-Resource
              Language Tokens by Cross-Entropy Loss (2026): https://arxiv.org/abs/2601.22439
            - ``docs/regularisers.md`` (logit thresholding, ``RowIsolatedAdamW``)

        Requirements:
            1. (anchor, positive) pairs or (anchor, positive, negative_1, ..., negative_n) tuples; for unsupervised
               SimCSE, the same sentence as anchor and positive (dropout makes the two views).

        Inputs:
            +-------------------------------------------------+--------+
            | Inputs                                          | Labels |
            +=================================================+========+
            | (anchor, positive) pairs                        | none   |
            +-------------------------------------------------+--------+
            | (anchor, positive, negative_1, ..., negative_n) | none   |
            +-------------------------------------------------+--------+

        Relations:
            - sentence-transformers' ``MultipleNegativesRankingLoss`` is this loss with ``margin = inf``.
            - :class:`ThresholdedCrossEntropyLoss` applies the same thresholding to token cross-entropy (MLM or
              causal heads).

        Example:
            ::

                from datasets import Dataset
                from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer

                from jtcse.losses import ThresholdedMultipleNegativesRankingLoss

                model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
                train_dataset = Dataset.from_dict({
                    "anchor": ["Ein Mann spielt Gitarre.", "Die Katze schläft."],
                    "positive": ["A man is playing a guitar.", "The cat is asleep."],
                })
                loss = ThresholdedMultipleNegativesRankingLoss(model, scale=20.0, margin=5.0)

                trainer = SentenceTransformerTrainer(model=model, train_dataset=train_dataset, loss=loss)
                trainer.train()
        """
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
    def __init__(self, margin: float = 5.0, ignore_index: int = -100, shift: bool = False) -> None:
        """
        Token cross-entropy with logit thresholding, for MLM or causal-LM heads: use it in place of
        ``nn.CrossEntropyLoss`` in a head's training step::

            z_v = −inf  where  z_v < z_y − margin      (z: a position's logits, y: its label)
            L   = mean over scored positions of CE(z, y)

        Non-targets already ``margin`` below the target get no gradient, so rare tokens are no longer pushed
        away from every context they do not appear in.

        Args:
            margin: threshold below the target logit, in logit units; ``inf`` is plain cross-entropy.
            ignore_index: label of unscored positions (the ``transformers`` convention, -100).
            shift: causal heads: position ``t`` predicts label ``t + 1``.

        References:
            - Turumtaev, Stop Jostling: Adaptive Negative Sampling Reduces the Marginalization of Low-Resource
              Language Tokens by Cross-Entropy Loss (2026): https://arxiv.org/abs/2601.22439

        Inputs:
            +-------------------------------+----------------------------------------------------+
            | Inputs                        | Labels                                             |
            +===============================+====================================================+
            | logits ``(batch, tokens, V)`` | token ids ``(batch, tokens)``; unscored: ``-100``  |
            +-------------------------------+----------------------------------------------------+

        Relations:
            - :class:`ThresholdedMultipleNegativesRankingLoss` applies the same thresholding to in-batch contrastive
              logits.
            - :class:`jtcse.optim.RowIsolatedAdamW` keeps embedding rows that got no gradient where they are, which
              the paper pairs with thresholding.

        Example:
            ::

                from transformers import AutoModelForMaskedLM, AutoTokenizer, DataCollatorForLanguageModeling

                from jtcse.losses import ThresholdedCrossEntropyLoss

                tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
                model = AutoModelForMaskedLM.from_pretrained("bert-base-uncased")
                collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
                batch = collator([tokenizer("A man is playing a guitar."), tokenizer("The cat sleeps.")])
                loss_fn = ThresholdedCrossEntropyLoss(margin=5.0)

                logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
                loss = loss_fn(logits, batch["labels"])
                loss.backward()
        """
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
