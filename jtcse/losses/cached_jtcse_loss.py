"""GradCache for the JTCSE twin: the JTCSE loss over a large batch with one mini-batch of activations alive.

Gao et al., "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup" (GradCache, 2021),
through sentence-transformers' ``CachedLossMixin``:

1. both views are embedded mini-batch by mini-batch without a graph; each mini-batch keeps only the
   per-sentence features the JTCSE terms read (pooled primitive stream of both towers, pooled cross
   stream when the twin has CAELs, pooler outputs when ICTM is on), packed side by side in one ``(m, k·d)`` row block;
2. :meth:`JTCSELoss.compute_loss_from_outputs` runs on the cached features and back-propagates to them;
3. each mini-batch is embedded again with a graph under its step-1 ``RandContext`` (same dropout
   masks) and receives its cached gradient.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from contextlib import nullcontext
from typing import Any

import torch
from sentence_transformers.base.losses.gradcache import CachedLossMixin, RandContext, _create_minibatch
from torch import Tensor

from jtcse.losses.jtcse_loss import JTCSELoss, no_pooler_error, split_views


class CachedJTCSELoss(CachedLossMixin, JTCSELoss):
    def __init__(
        self,
        model,
        mini_batch_size: int = 32,
        temperature: float = 0.05,
        ictm_weight: float = 0.5,
        nce_weight: float = 1.0,
        icnce_weight: float = 1.0,
        ictm_eps: float = 1e-4,
        seed: int | None = 0,
        gather_across_devices: bool = False,
        show_progress_bar: bool = False,
    ) -> None:
        """
        :class:`JTCSELoss` with gradient caching (GradCache): the same terms over a large batch, with the
        activations of one mini-batch alive at a time. In three passes over mini-batches of ``mini_batch_size``
        sentences per view:

            (1) embed both views without a graph, keeping only the per-sentence features the JTCSE terms read;
            (2) compute the JTCSE terms on those features and back-propagate to them (their gradients are cached);
            (3) embed each mini-batch again with a graph (same dropout masks) and back-propagate its cached gradient.

        Exact because every feature is per sentence: a CAEL mixes the two towers' hidden states of the *same*
        sentence, never across the batch. The loss value and gradients equal :class:`JTCSELoss` on the same batch
        when dropout is off; with dropout on, the recompute replays the first pass's masks, so they equal a
        JTCSELoss step that drew those masks.

        Args:
            model: the twin ``SentenceTransformer`` (or a DDP wrapper around it).
            mini_batch_size: sentences per view and per twin forward (a positive integer). Peak memory
                follows it, not the batch size. One larger than the batch is clamped to the batch
                (one mini-batch per view; still one extra forward pass).
            temperature: tau of every InfoNCE-style term (as in :class:`JTCSELoss`).
            ictm_weight: lambda_ICTM; 0 switches ICTM off.
            nce_weight: weight of L_NCE(I) + L_NCE(II); 0 switches them off.
            icnce_weight: weight of L_ICNCE; 0 switches it off.
            ictm_eps: epsilon of ``max(cos, eps)`` inside ICTM.
            seed: seed of the ICNCE direction R (None: unseeded), drawn per (seed, training step, draw).
            gather_across_devices: take the InfoNCE-style candidates from all ranks (cross-rank negatives),
                as in :class:`JTCSELoss`.
            show_progress_bar: a tqdm bar over the mini-batches.

        References:
            - Zong et al., JTCSE: Joint Tensor-Modulus Constraints and Cross-Attention for Unsupervised
              Contrastive Learning of Sentence Embeddings (2025)
            - Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup (GradCache):
              https://arxiv.org/abs/2101.06983
            - ``docs/distributed.md`` (GradCache and cross-rank negatives for the twin)

        Requirements:
            1. A twin model (:func:`jtcse.build_twin`) in training mode.
            2. No token-level terms: the first pass embeds without a graph, so :class:`RegularizedLoss` refuses
               a cached base loss.

        Inputs:
            +-------------------------------------------------+--------+
            | Inputs                                          | Labels |
            +=================================================+========+
            | single sentences (two dropout views each)       | none   |
            +-------------------------------------------------+--------+
            | (view a, view b) pairs, e.g. (text, paraphrase) | none   |
            +-------------------------------------------------+--------+

        Relations:
            - :class:`JTCSELoss` is the same loss without caching: faster per step, memory growing with the batch.
            - sentence-transformers' ``CachedMultipleNegativesRankingLoss`` applies the same GradCache scheme
              (its ``CachedLossMixin`` drives this class) to ``MultipleNegativesRankingLoss``.

        Example:
            ::

                from datasets import Dataset
                from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

                from jtcse import build_twin
                from jtcse.losses import CachedJTCSELoss

                model = build_twin("warmup_tower_1", "warmup_tower_2", cael_every=2)
                train_dataset = Dataset.from_dict({
                    "text": ["A man is playing a guitar.", "The cat sleeps on the sofa.", "Rain is expected tonight."],
                })
                loss = CachedJTCSELoss(model, mini_batch_size=16)

                args = SentenceTransformerTrainingArguments(output_dir="twin", per_device_train_batch_size=512)
                trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=train_dataset, loss=loss)
                trainer.train()
        """
        super().__init__(
            model,
            temperature=temperature,
            ictm_weight=ictm_weight,
            nce_weight=nce_weight,
            icnce_weight=icnce_weight,
            ictm_eps=ictm_eps,
            seed=seed,
            gather_across_devices=gather_across_devices,
        )
        try:
            if isinstance(mini_batch_size, bool):
                raise TypeError
            mini_batch_size = operator.index(mini_batch_size)
        except TypeError:
            raise ValueError(f"mini_batch_size must be a positive integer, not {mini_batch_size!r}.") from None
        if mini_batch_size <= 0:
            raise ValueError(f"mini_batch_size must be a positive integer, not {mini_batch_size}.")
        self.mini_batch_size = mini_batch_size
        self.show_progress_bar = show_progress_bar
        self._last_terms: dict[str, Tensor] = {}

    def feature_keys(self) -> list[str]:
        """The per-sentence twin outputs the loss reads, in packing order."""
        keys = ["pooled_1", "pooled_2"]
        if self.icnce_weight and self.twin[0].cael_every is not None:
            keys += ["cross_pooled_1", "cross_pooled_2"]
        if self.ictm_weight:
            keys += ["pooler_1", "pooler_2"]
        return keys

    def pack(self, outputs: dict[str, Any]) -> Tensor:
        """``(m, k·d)``: the :meth:`feature_keys` outputs of one mini-batch side by side."""
        if "pooled_1" not in outputs:
            raise ValueError("CachedJTCSELoss needs the twin's training-mode outputs (call model.train() first).")
        if self.ictm_weight and "pooler_1" not in outputs:
            raise no_pooler_error()
        return torch.cat([outputs[key] for key in self.feature_keys()], dim=-1)

    def unpack(self, packed: Tensor) -> dict[str, Tensor]:
        """Inverse of :meth:`pack` over the whole [view a; view b] batch."""
        return dict(zip(self.feature_keys(), packed.chunk(len(self.feature_keys()), dim=-1), strict=True))

    def embed_minibatch(
        self,
        sentence_feature: dict[str, Tensor],
        begin: int,
        end: int,
        with_grad: bool,
        copy_random_state: bool,
        random_state: RandContext | None = None,
    ) -> tuple[Tensor, RandContext | None]:
        """One twin forward over rows ``begin:end`` of one view, returning the packed features."""
        minibatch = _create_minibatch(sentence_feature, begin, end)
        with nullcontext() if random_state is None else random_state:
            with nullcontext() if with_grad else torch.no_grad():
                random_state = RandContext(*minibatch.values()) if copy_random_state else None
                packed = self.pack(self.model(minibatch))
        return packed, random_state

    def calculate_loss(
        self, reps: list[list[Tensor]], labels: Tensor | None = None, *, with_backward: bool = False
    ) -> Tensor:
        """The JTCSE terms on the cached features of both views (``reps[v]``: view v's mini-batches)."""
        packed = torch.cat([torch.cat(view) for view in reps])  # [view a; view b]
        terms = self.compute_loss_from_outputs(self.unpack(packed))
        total = torch.stack(list(terms.values())).sum()
        self._last_terms = {name: term.detach() for name, term in terms.items()}
        if with_backward:
            total.backward()
            total = total.detach()
        return total

    def forward(
        self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None
    ) -> dict[str, Tensor]:
        """The weighted terms as in :class:`JTCSELoss`; their sum back-propagates through the GradCache hook."""
        views = list(split_views(list(sentence_features)))
        total = self.forward_cached(views, labels)
        terms = dict(self._last_terms)
        # Each logged term is the detached value; the first also carries total - total.detach()
        # (exactly 0), so the sum the trainer back-propagates reaches the GradCache hook once.
        first = next(iter(terms))
        terms[first] = terms[first] + (total - total.detach())
        return terms

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "mini_batch_size": self.mini_batch_size}

    @property
    def citation(self) -> str:
        return (
            JTCSELoss.citation.fget(self)
            + """
@misc{gao2021scaling,
    title={Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup},
    author={Luyu Gao and Yunyi Zhang and Jiawei Han and Jamie Callan},
    year={2021},
    eprint={2101.06983},
    archivePrefix={arXiv},
    primaryClass={cs.LG}
}
"""
        )
