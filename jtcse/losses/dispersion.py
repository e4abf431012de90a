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
    """``weight · mean_layers dispersion(layer states)`` on the token states of each forward.

    Canonical form per sequence (valid tokens only): ``log Σ_{i≠j} exp(−arccos(cos(z_i, z_j)) / (π τ))``,
    averaged over sequences; variants ``"decorrelation"``, ``"l2_repel"``, ``"orthogonal"``
    (see :func:`jtcse.losses.functional.dispersion`). The paper applies it to the deeper layers,
    where condensation is strongest.

    Args:
        model: the SentenceTransformer being trained.
        weight: λ (0.1 in the paper).
        temperature: τ (1.0).
        variant: ``"angular"`` (canonical), ``"decorrelation"``, ``"l2_repel"`` or ``"orthogonal"``.
        layers: hidden-state index or indices, -1 = the last layer (``token_embeddings``), 0 = the
            embedding output. Several (e.g. ``[-1, -2, -3]``, the last three layers) are averaged.
        norm_weight: λ_norm of the ``"l2_repel"`` variant.
        base_loss: optional sentence-transformers loss to add the penalty to (same forward pass).

    Example::

        loss = DispersionLoss(model, weight=0.1, layers=[-1, -2], base_loss=MultipleNegativesRankingLoss(model))
    """

    #: the constructor arguments ``--regularizer dispersion:...`` takes (help: the Args entries above)
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
        super().__init__(model, weight, base_loss)
        if variant not in DISPERSION_VARIANTS:
            raise ValueError(f"DispersionLoss: variant must be one of {', '.join(DISPERSION_VARIANTS)}; got {variant!r}")
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
