"""SimRegLoss: embedding-similarity regularisation of token states (SimReg paper) as a sentence-transformers loss."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from jtcse.losses.functional.token import simreg, simreg_chunked
from jtcse.losses.regularized import TokenRegularizer, check_layers, normalize_layers

__all__ = ["SimRegLoss"]


class SimRegLoss(TokenRegularizer):
    #: the constructor arguments ``--regularizer simreg:...`` takes (help: the Args entries below)
    cli_options = ("weight", "temperature", "chunk_size", "layers")

    def __init__(
        self,
        model: nn.Module,
        weight: float = 2.0,
        temperature: float = 0.01,
        chunk_size: int | None = None,
        layers: int | Sequence[int] = -1,
        label_key: str = "input_ids",
        base_loss: nn.Module | None = None,
    ) -> None:
        """
        SimReg, embedding-similarity regularisation of the token states of each forward ("group-level
        averaging")::

            L   = weight · softplus(L_sr)
            ℓ_i = log Σ_{k ∈ N_i} exp(cos(e_i, e_k) / τ) − log Σ_{k ∈ P_i} exp(cos(e_i, e_k) / τ)

        Within each sequence, tokens with the same label (by default the same token id, read from
        ``input_ids``) are the positives ``P_i`` of token ``i`` -- itself always one -- and all others its
        negatives ``N_i``. ``L_sr`` averages ``ℓ_i`` per label group, then over groups and sequences
        (:func:`jtcse.losses.functional.simreg`); padding is excluded through ``attention_mask``.

        Args:
            model: the SentenceTransformer being trained.
            weight: λ. The paper finds 2–20 stable and scales it by √2 per doubling of the hidden size
                (``≈ 10·√(d/1024)``).
            temperature: τ (0.01 in the paper).
            chunk_size: tokens per chunk of the chunk-wise form
                (:func:`~jtcse.losses.functional.simreg_chunked`); unset: the full form. Memory is
                ``O(n·chunk_size)`` per sequence instead of ``O(n²)``.
            layers: hidden-state index or indices to regularise, -1 = the last layer (the paper's choice).
                Layers other than the last (``token_embeddings``) need a sentence-transformers
                ``Transformer``; several layers are averaged.
            label_key: the feature holding the per-token integer labels.
            base_loss: optional sentence-transformers loss; then the loss is ``base + weight·softplus(L_sr)``
                on the base loss's own forward pass (see :class:`~jtcse.losses.RegularizedLoss`). GradCache
                (``Cached…``) losses are refused: they embed without a graph.

        References:
            - SimReg: Achieving Higher Convergence and Generalization in the LLM Pretraining via Embedding
              Similarity Regularization (anonymous ICLR submission, under review)
            - ``docs/regularisers.md`` (equations of every regulariser, the ``--regularizer`` option)

        Requirements:
            1. A model whose forward returns ``token_embeddings``, ``attention_mask`` and the ``label_key``
               feature (a sentence-transformers ``Transformer`` does).

        Inputs:
            +-------------------------------------------+----------------------------+
            | Inputs                                    | Labels                     |
            +===========================================+============================+
            | any columns (alone: each is regularised)  | none                       |
            +-------------------------------------------+----------------------------+
            | the ``base_loss``'s inputs                | the ``base_loss``'s labels |
            +-------------------------------------------+----------------------------+

        Relations:
            - :class:`RegularizedLoss` adds several regularisers (and any ``fn(features)`` term) to one base loss,
              each logged under its own name.
            - :class:`DispersionLoss` pushes all tokens of a sequence apart; SimReg also pulls same-label tokens
              together.

        Example:
            ::

                from datasets import Dataset
                from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
                from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

                from jtcse.losses import SimRegLoss

                model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
                sentences = ["The river froze early this year.", "Two children built a sandcastle.", "Stocks fell."]
                # unsupervised SimCSE: each sentence is its own positive, dropout makes the two views
                train_dataset = Dataset.from_dict({"anchor": sentences, "positive": sentences})
                loss = SimRegLoss(model, weight=2.0, temperature=0.01, base_loss=MultipleNegativesRankingLoss(model))

                trainer = SentenceTransformerTrainer(model=model, train_dataset=train_dataset, loss=loss)
                trainer.train()
        """
        super().__init__(model, weight, base_loss)
        if not temperature > 0:
            raise ValueError(f"SimRegLoss: temperature must be > 0, got {temperature}")
        if chunk_size is not None and (
            isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1
        ):
            raise ValueError(f"SimRegLoss: chunk_size must be a positive integer or None, got {chunk_size!r}")
        self.temperature = float(temperature)
        self.chunk_size = chunk_size
        self.layers = normalize_layers(layers, "SimRegLoss")
        check_layers(model, self.layers, "SimRegLoss")
        self.label_key = label_key
        self.needs_hidden_states = any(layer != -1 for layer in self.layers)

    def penalty(self, features: dict[str, Any]) -> Tensor:
        mask = self.token_mask(features)
        labels = features.get(self.label_key)
        if labels is None:
            raise ValueError(f"SimRegLoss: the model's features have no {self.label_key!r} to take token labels from")
        values = []
        for layer in self.layers:
            states = self.layer_states(features, layer)
            if self.chunk_size is None:
                raw = simreg(states, labels, mask, self.temperature)
            else:
                raw = simreg_chunked(states, labels, mask, self.chunk_size, self.temperature)
            values.append(F.softplus(raw))
        return torch.stack(values).mean()

    def get_config_dict(self) -> dict[str, Any]:
        return {
            **super().get_config_dict(),
            "temperature": self.temperature,
            "chunk_size": self.chunk_size,
            "layers": list(self.layers),
            "label_key": self.label_key,
        }

    @property
    def citation(self) -> str:
        return """
@inproceedings{simreg,
    title = {SimReg: Achieving Higher Convergence and Generalization in the LLM Pretraining via Embedding Similarity Regularization},
    author = {Anonymous},
    booktitle = {Submitted to the International Conference on Learning Representations},
    note = {under double-blind review},
}
"""
