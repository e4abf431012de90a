"""The JTCSE training objective as a sentence-transformers loss: :class:`JTCSELoss` (its docstring gives the
equations) and the view handling it shares with :class:`~jtcse.losses.CachedJTCSELoss`.

The ICNCE direction R is drawn per forward from a Python RNG seeded with ``(seed, training step, draw within
the step)``, so a resumed run draws the same R as an uninterrupted one.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from jtcse.errors import SettingError
from jtcse.losses.functional import icnce, ictm, info_nce

_VIEW_KEYS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")


def split_views(sentence_features: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(view a, view b) feature dicts: one text column used twice (dropout views) or two columns of B rows."""
    if len(sentence_features) == 1:
        first = second = sentence_features[0]
    elif len(sentence_features) == 2:
        first, second = sentence_features
    else:
        raise ValueError(
            f"JTCSELoss takes one text column (both views are dropout views of it) or two (view a, view b); "
            f"got {len(sentence_features)} columns."
        )
    for key in _VIEW_KEYS:
        if key in first and key not in second:
            raise ValueError(f"The two views have different feature keys ({key!r} is missing from the second).")
    if first["input_ids"].shape[0] != second["input_ids"].shape[0]:
        raise ValueError("The two views must hold the same number of sentences.")
    return first, second


def stack_views(sentence_features: list[dict[str, Any]], pad_token_id: int = 0) -> dict[str, Any]:
    """One ``2B`` batch [view a; view b] from one feature dict (used twice) or two dicts of B rows each.

    Two dicts may be padded to different lengths; the shorter is right-padded (``input_ids`` with
    ``pad_token_id``, masks and type ids with 0) so both views run through a tower in one pass.
    """
    first, second = split_views(sentence_features)
    stacked = {key: value for key, value in first.items() if key not in _VIEW_KEYS}
    length = max(first["input_ids"].shape[1], second["input_ids"].shape[1])
    for key in _VIEW_KEYS:
        if key not in first:
            continue
        fill = pad_token_id if key == "input_ids" else 0
        parts = [nn.functional.pad(v[key], (0, length - v[key].shape[1]), value=fill) for v in (first, second)]
        stacked[key] = torch.cat(parts)
    return stacked


def tower_one_anchors(seed: int, step: int, draw: int) -> bool:
    """The ICNCE direction R = 1 (tower I anchors) of the ``draw``-th forward in training step ``step``.

    A function of its arguments only (a string-seeded ``random.Random``, the same in every process), so
    a resumed run and every DDP rank draw what an uninterrupted single process draws.
    """
    return random.Random(f"{seed}:{step}:{draw}").random() < 0.5


def unwrap_model(model: nn.Module) -> nn.Module:
    """The ``SentenceTransformer`` inside a ``torch.compile`` and/or (Distributed)DataParallel wrapper."""
    model = getattr(model, "_orig_mod", model)
    if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
        model = model.module
    return getattr(model, "_orig_mod", model)


def no_pooler_error() -> SettingError:
    """ICTM reads the towers' pooler outputs: towers without a pooler train with ``ictm_weight`` 0."""
    return SettingError(
        "ICTM needs pooler outputs, but the towers have no pooler; set {ictm_weight}=0.", ["ictm_weight"]
    )


class JTCSELoss(nn.Module):
    def __init__(
        self,
        model,
        temperature: float = 0.05,
        ictm_weight: float = 0.5,
        nce_weight: float = 1.0,
        icnce_weight: float = 1.0,
        ictm_eps: float = 1e-4,
        seed: int | None = 0,
        gather_across_devices: bool = False,
    ) -> None:
        """
        The JTCSE objective for a twin built by :func:`jtcse.build_twin` (module 0 a ``TwinTowers``): InfoNCE
        within each tower (``L_NCE``), InfoNCE across the towers (``L_ICNCE``) and the tensor-modulus constraint
        across them (``ICTM``)::

            L = nce_weight (L_NCE(I) + L_NCE(II)) + icnce_weight L_ICNCE + ictm_weight ICTM

            L_ICNCE = R (ICNCE(c_I, c_II) + ICNCE(h_I, h_II)) + (1 - R) (ICNCE(c_II, c_I) + ICNCE(h_II, h_I))
            ICTM    = mean_s [ -log max(cos(h_I^a, h_II^b), eps) TMC(p_I^a, p_II^b)
                             + -log max(cos(h_II^a, h_I^b), eps) TMC(p_II^a, p_I^b) ]
            TMC(x, y) = ||x - y|| / (||x|| + ||y||)

        ``h`` is a tower's pooled primitive-stream vector (CLS or mean, as the twin pools), ``c`` its pooled
        cross-stream vector (absent without CAELs: TNCSE), ``p`` the tower's pooler head applied to ``h``
        (:meth:`jtcse.modeling.twin.TwinTowers.pooler_heads`), ``a``/``b`` the two views of a sentence. ``L_NCE(I)`` is SimCSE's unsupervised
        InfoNCE (NT-Xent over the 2B views of tower I, temperature tau); ``ICNCE(x, y)`` the same with tower x's
        views as anchors and tower y's as candidates (positive: y's other view of the sentence). ``R`` in {0, 1}
        says which tower anchors ICNCE and is drawn per forward (see ``seed``).

        Args:
            model: the twin ``SentenceTransformer`` (or a DDP wrapper around it).
            temperature: tau of every InfoNCE-style term.
            ictm_weight: lambda_ICTM (0.5 = the reference code's TMC / 2); 0 switches ICTM off.
            nce_weight: weight of L_NCE(I) + L_NCE(II); 0 switches them off.
            icnce_weight: weight of L_ICNCE; 0 switches it off. Its cross-stream half is present
                exactly when the twin has CAELs (``cael_every`` not None).
            ictm_eps: epsilon of ``max(cos, eps)`` inside ICTM.
            seed: seed of the direction R (None: unseeded). R is a function of (seed, training step,
                draw within the step): the trainer tells the loss its step (:meth:`set_training_step`,
                called by jtcse's stage runner), so a run resumed from a checkpoint draws what an
                uninterrupted run draws, and under DDP every rank with the same seed draws the same R.
            gather_across_devices: in a ``torch.distributed`` group of several ranks, every
                InfoNCE-style term (both L_NCE, both ICNCE halves) keeps its anchors local and takes
                its candidates from all ranks (``all_gather_with_grad``), so DDP's averaged gradient
                equals that of one process holding the global batch. ICTM stays per row. Every rank
                must hold the same number of sentences. Without a process group: a warning once,
                then the local batch.

        References:
            - Zong et al., JTCSE: Joint Tensor-Modulus Constraints and Cross-Attention for Unsupervised
              Contrastive Learning of Sentence Embeddings (2025); TNCSE (AAAI 2025) is its case without CAELs.
            - ``docs/twin.md`` (the twin and its loss), ``docs/distributed.md`` (``gather_across_devices``).

        Requirements:
            1. A twin model (:func:`jtcse.build_twin`) in training mode: the loss reads its per-tower outputs.
            2. Towers with a pooler when ``ictm_weight > 0``.

        Inputs:
            +-------------------------------------------------+--------+
            | Inputs                                          | Labels |
            +=================================================+========+
            | single sentences (two dropout views each)       | none   |
            +-------------------------------------------------+--------+
            | (view a, view b) pairs, e.g. (text, paraphrase) | none   |
            +-------------------------------------------------+--------+

        Returns:
            A dict of the weighted terms (``nce_1``, ``nce_2``, ``icnce``, ``ictm``);
            ``SentenceTransformerTrainer`` sums them and logs each one.

        Relations:
            - :class:`CachedJTCSELoss` is this loss with gradient caching (GradCache): the same terms, with
              memory bounded by its ``mini_batch_size`` instead of the batch size.
            - :class:`RegularizedLoss` adds token-level terms (:class:`SimRegLoss`, :class:`DispersionLoss`,
              :class:`NITPLoss`) on the features of this loss's own forward pass.
            - :func:`~jtcse.losses.functional.info_nce`, :func:`~jtcse.losses.functional.icnce` and
              :func:`~jtcse.losses.functional.ictm` are the terms as pure tensor functions.

        Example:
            ::

                from datasets import Dataset
                from sentence_transformers import SentenceTransformerTrainer

                from jtcse import build_twin
                from jtcse.losses import JTCSELoss

                model = build_twin("warmup_tower_1", "warmup_tower_2", cael_every=2)
                train_dataset = Dataset.from_dict({
                    "text": ["A man is playing a guitar.", "The cat sleeps on the sofa.", "Rain is expected tonight."],
                })
                loss = JTCSELoss(model, temperature=0.05, ictm_weight=0.5)

                trainer = SentenceTransformerTrainer(model=model, train_dataset=train_dataset, loss=loss)
                trainer.train()
        """
        super().__init__()
        from jtcse.modeling.twin import TwinTowers

        twin = unwrap_model(model)
        if not isinstance(twin, nn.Sequential) or len(twin) == 0 or not isinstance(twin[0], TwinTowers):
            raise ValueError("JTCSELoss needs a twin model (jtcse.build_twin); module 0 is not a TwinTowers.")
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, not {temperature}.")
        weights = {"nce_weight": nce_weight, "icnce_weight": icnce_weight, "ictm_weight": ictm_weight}
        for name, value in weights.items():
            if value < 0:
                raise ValueError(f"{name} must be >= 0, not {value}.")
        if not any(weights.values()):
            raise SettingError(
                "Every JTCSE loss term is switched off ({nce_weight}, {icnce_weight}, {ictm_weight}); set at least "
                "one weight above 0.",
                list(weights),
            )
        self.model = model
        self.temperature = temperature
        self.nce_weight = nce_weight
        self.icnce_weight = icnce_weight
        self.ictm_weight = ictm_weight
        self.ictm_eps = ictm_eps
        self.seed = seed
        self.gather_across_devices = bool(gather_across_devices)
        self._direction_seed = seed if seed is not None else random.SystemRandom().getrandbits(64)
        self._step = 0
        self._draws = 0
        self._warned_no_group = False

    def set_training_step(self, step: int) -> None:
        """The optimizer step about to run (its count of finished steps); R is drawn per (seed, step, draw)."""
        self._step = int(step)
        self._draws = 0

    def _tower_one_anchors(self) -> bool:
        """R for this forward (:func:`tower_one_anchors` of the seed, the step and the draw within it)."""
        self._draws += 1
        return tower_one_anchors(self._direction_seed, self._step, self._draws - 1)

    @property
    def twin(self):
        """The twin ``SentenceTransformer``, also when the trainer has swapped in its DDP wrapper."""
        return unwrap_model(self.model)

    def _gather(self) -> bool:
        """Whether the InfoNCE-style terms gather candidates; warns once when asked to without a process group."""
        if not self.gather_across_devices:
            return False
        from sentence_transformers.util.environment import is_dist_initialized

        if not is_dist_initialized() and not self._warned_no_group:
            self._warned_no_group = True
            warnings.warn(
                "gather_across_devices=True, but torch.distributed is not initialised; the loss uses the "
                "local batch only (launch with torchrun or accelerate to gather across ranks).",
                UserWarning,
                stacklevel=3,
            )
        return True

    def forward(
        self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None
    ) -> dict[str, Tensor]:
        tokenizer = self.twin.tokenizer
        pad_id = getattr(tokenizer, "pad_token_id", None) or 0
        features = stack_views(list(sentence_features), pad_token_id=pad_id)
        return self.compute_loss_from_outputs(self.model(features))

    def compute_loss_from_outputs(self, outputs: dict[str, Tensor]) -> dict[str, Tensor]:
        """The weighted loss terms from a training-mode twin forward over a [view a; view b] batch."""
        if "pooled_1" not in outputs:
            raise ValueError("JTCSELoss needs the twin's training-mode outputs (call model.train() first).")
        half = outputs["pooled_1"].shape[0] // 2

        def views(key: str) -> tuple[Tensor, Tensor]:
            value = outputs[key]
            return value[:half], value[half:]

        h = {1: views("pooled_1"), 2: views("pooled_2")}
        tau = self.temperature
        gather = self._gather()
        losses: dict[str, Tensor] = {}
        if self.nce_weight:
            losses["nce_1"] = self.nce_weight * info_nce(*h[1], temperature=tau, gather=gather)
            losses["nce_2"] = self.nce_weight * info_nce(*h[2], temperature=tau, gather=gather)
        if self.icnce_weight:
            x, y = (1, 2) if self._tower_one_anchors() else (2, 1)
            term = icnce(*h[x], *h[y], temperature=tau, gather=gather)
            if "cross_pooled_1" in outputs:
                c = {1: views("cross_pooled_1"), 2: views("cross_pooled_2")}
                term = term + icnce(*c[x], *c[y], temperature=tau, gather=gather)
            losses["icnce"] = self.icnce_weight * term
        if self.ictm_weight:
            if "pooler_1" not in outputs:
                raise no_pooler_error()
            p = {1: views("pooler_1"), 2: views("pooler_2")}
            eps = self.ictm_eps
            losses["ictm"] = self.ictm_weight * (
                ictm(h[1][0], h[2][1], p[1][0], p[2][1], eps=eps) + ictm(h[2][0], h[1][1], p[2][0], p[1][1], eps=eps)
            )
        return losses

    def get_config_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "nce_weight": self.nce_weight,
            "icnce_weight": self.icnce_weight,
            "ictm_weight": self.ictm_weight,
            "ictm_eps": self.ictm_eps,
            "seed": self.seed,
            "gather_across_devices": self.gather_across_devices,
            "cael_every": self.twin[0].cael_every,
        }

    @property
    def citation(self) -> str:
        return """
@article{zong2025jtcse,
    title={{JTCSE}: Joint Tensor-Modulus Constraints and Cross-Attention for Unsupervised Contrastive Learning of Sentence Embeddings},
    author={Zong, Tianyu and Yi, Hongzhu and Wang, Yuanxiang and Xu, Jungang and others},
    journal={arXiv preprint},
    year={2025}
}
"""
