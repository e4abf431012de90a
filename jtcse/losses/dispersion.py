"""DispersionLoss: the dispersion loss against embedding condensation, as a sentence-transformers loss."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from jtcse.losses.functional.token import DISPERSION_VARIANTS, dispersion
from jtcse.losses.regularized import TokenRegularizer, check_layers, normalize_layers

__all__ = ["DispersionLoss"]


class DispersionLoss(TokenRegularizer):
    #: the constructor arguments ``--regularizer dispersion:...`` takes (help: the Args entries below)
    cli_options = ("weight", "temperature", "variant", "layers", "norm_weight")

    def __init__(
        self,
        model: nn.Module,
        weight: float = 0.1,
        temperature: float = 1.0,
        variant: str = "angular",
        layers: int | Sequence[int] = -1,
        norm_weight: float = 0.01,
        base_loss: nn.Module | None = None,
    ) -> None:
        """
        The dispersion loss against embedding condensation (token states collapsing into a narrow cone), on the
        token states of each forward::

            L = weight · mean_layers dispersion(layer states)
            dispersion = mean_sequences log Σ_{i≠j} exp(−arccos(cos(z_i, z_j)) / (π τ))      (variant "angular")

        over the valid tokens ``z`` of each sequence. The other variants (:func:`jtcse.losses.functional.dispersion`):
        ``"decorrelation"`` (squared off-diagonal feature correlations), ``"l2_repel"``
        (``log Σ_{i≠j} exp(−‖z_i − z_j‖² / τ) + norm_weight · mean_i ‖z_i‖²``) and ``"orthogonal"``
        (``mean_{i≠j} max(0, ½ − arccos(cos(z_i, z_j)) / π)²``). The paper applies it to the deeper layers, where
        condensation is strongest.

        Args:
            model: the SentenceTransformer being trained.
            weight: λ (0.1 in the paper).
            temperature: τ (1.0).
            variant: ``"angular"`` (canonical), ``"decorrelation"``, ``"l2_repel"`` or ``"orthogonal"``.
            layers: hidden-state index or indices, -1 = the last layer (``token_embeddings``), 0 = the
                embedding output. Several (e.g. ``[-1, -2, -3]``, the last three layers) are averaged.
            norm_weight: λ_norm of the ``"l2_repel"`` variant.
            base_loss: optional sentence-transformers loss to add the penalty to (same forward pass); not a
                GradCache (``Cached…``) loss, which embeds without a graph.

        References:
            - Liu et al., Dispersion Loss Counteracts Embedding Condensation and Improves Generalization in Small
              Language Models (2026)
            - ``docs/regularisers.md`` (equations of every variant, the ``--regularizer`` option)

        Requirements:
            1. A model whose forward returns ``token_embeddings`` and ``attention_mask``; layers other than -1
               need a sentence-transformers ``Transformer``.

        Inputs:
            +-------------------------------------------+----------------------------+
            | Inputs                                    | Labels                     |
            +===========================================+============================+
            | any columns (alone: each is regularised)  | none                       |
            +-------------------------------------------+----------------------------+
            | the ``base_loss``'s inputs                | the ``base_loss``'s labels |
            +-------------------------------------------+----------------------------+

        Relations:
            - :class:`RegularizedLoss` adds several regularisers (and any ``fn(features)`` term) to one base loss.
            - sentence-transformers' ``GlobalOrthogonalRegularizationLoss`` spreads *sentence* embeddings across
              a batch; this loss spreads the *tokens* of each sequence.

        Example:
            ::

                from datasets import Dataset
                from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
                from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

                from jtcse.losses import DispersionLoss

                model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
                train_dataset = Dataset.from_dict({
                    "anchor": ["Where is the nearest train station?", "How do I reset my password?"],
                    "positive": ["The station is two streets north.", "Use the 'forgot password' link."],
                    "negative": ["Trains were invented in England.", "Passwords should be long."],
                })
                # the last three layers, where condensation is strongest, averaged
                dispersion = DispersionLoss(model, weight=0.1, layers=[-1, -2, -3], base_loss=MultipleNegativesRankingLoss(model))

                trainer = SentenceTransformerTrainer(model=model, train_dataset=train_dataset, loss=dispersion)
                trainer.train()
        """
        super().__init__(model, weight, base_loss)
        if variant not in DISPERSION_VARIANTS:
            raise ValueError(
                f"DispersionLoss: variant must be one of {', '.join(DISPERSION_VARIANTS)}; got {variant!r}"
            )
        if not temperature > 0:
            raise ValueError(f"DispersionLoss: temperature must be > 0, got {temperature}")
        if not norm_weight >= 0:
            raise ValueError(f"DispersionLoss: norm_weight must be ≥ 0, got {norm_weight}")
        self.temperature = float(temperature)
        self.variant = variant
        self.layers = normalize_layers(layers, "DispersionLoss")
        check_layers(model, self.layers, "DispersionLoss")
        self.norm_weight = float(norm_weight)
        self.needs_hidden_states = any(layer != -1 for layer in self.layers)

    def penalty(self, features: dict[str, Any]) -> Tensor:
        mask = self.token_mask(features)
        values = [
            dispersion(
                self.layer_states(features, layer), mask, self.temperature, self.variant, norm_weight=self.norm_weight
            )
            for layer in self.layers
        ]
        return torch.stack(values).mean()

    def get_config_dict(self) -> dict[str, Any]:
        config = {
            **super().get_config_dict(),
            "temperature": self.temperature,
            "variant": self.variant,
            "layers": list(self.layers),
        }
        if self.variant == "l2_repel":
            config["norm_weight"] = self.norm_weight
        return config

    @property
    def citation(self) -> str:
        return """
@article{liu2026dispersion,
    title = {Dispersion Loss Counteracts Embedding Condensation and Improves Generalization in Small Language Models},
    author = {Liu, Chen and Sun, Xingzhi and Xiao, Xi and Van Tassel, Alexandre and Xu, Ke and Reimann, Kristof
              and Liao, Danqi and Gerstein, Mark and Wang, Tianyang and Wang, Xiao and Krishnaswamy, Smita},
    year = {2026},
}
"""
