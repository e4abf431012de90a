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
    """``weight · softplus(L_sr)`` on the token states of each forward (SimReg, "group-level averaging").

    ``L_sr`` is :func:`jtcse.losses.functional.simreg`: within each sequence, tokens with the same
    label (by default the same token id, read from ``input_ids``) are positives -- self always one --
    and all others negatives; ``ℓ_i = log Σ_{N_i} exp(cos/τ) − log Σ_{P_i} exp(cos/τ)``, averaged per
    label group, then over groups and sequences. Padding is excluded through ``attention_mask``.

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
            on the base loss's own forward pass (see :class:`~jtcse.losses.RegularizedLoss`).

    Example::

        loss = SimRegLoss(model, weight=2.0, base_loss=MultipleNegativesRankingLoss(model))
    """

    #: the constructor arguments ``--regularizer simreg:...`` takes (help: the Args entries above)
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
        super().__init__(model, weight, base_loss)
        if not temperature > 0:
            raise ValueError(f"SimRegLoss: temperature must be > 0, got {temperature}")
        if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
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
