"""``base + Σ_k term_k``: the one way to add loss terms — named extra terms (token-level regularisers
``λ·reg`` or any ``fn(features)``) on the features of the base loss's own forward pass.

A sentence-transformers loss calls ``model(features)`` itself and keeps only the sentence
embedding. To regularise the token states of that *same* forward (no second encoder pass), the
wrapper registers a forward hook on the model for the duration of the base loss call; the hook
keeps each output feature dict (``token_embeddings``, ``attention_mask``, ``input_ids`` and, when a
regulariser asks for hidden layers, ``all_layer_embeddings``). Each regulariser then turns every
captured dict into one term; the terms of one regulariser are averaged over the forwards (one per
input column, or one merged forward for all columns).

Hidden layers: sentence-transformers' ``Transformer`` module writes ``all_layer_embeddings`` when its
``transformers`` model has ``config.output_hidden_states``; the flag is switched on only inside the
loss call and restored afterwards, so encoding and saved configs are untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "RegularizedLoss",
    "TokenRegularizer",
    "ExtraTerm",
    "capture_features",
    "check_layers",
    "hidden_state_count",
    "hidden_states_enabled",
    "normalize_layers",
    "regularized_forward",
    "regularizer_name",
]


def normalize_layers(layers: int | Sequence[int], who: str) -> tuple[int, ...]:
    """``-1`` / ``[-1, -2]`` → a non-empty tuple of ints (hidden-state indices, -1 = last layer)."""
    if isinstance(layers, bool):
        raise ValueError(f"{who}: layers must be integers, got {layers!r}")
    if isinstance(layers, int):
        return (layers,)
    layers = tuple(layers)
    if not layers or not all(isinstance(x, int) and not isinstance(x, bool) for x in layers):
        raise ValueError(f"{who}: layers must be a non-empty list of integers, got {layers!r}")
    return layers


def hidden_state_count(model: nn.Module) -> int | None:
    """Number of hidden states (layers + embedding output) of the first ``Transformer`` in ``model``, if known."""
    from sentence_transformers.base.modules import Transformer

    for module in model.modules():
        if isinstance(module, Transformer):
            layers = getattr(module.model.config, "num_hidden_layers", None)
            return None if layers is None else int(layers) + 1
    return None


def check_layers(model: nn.Module, layers: tuple[int, ...], who: str) -> None:
    """Refuse layer indices the model does not have (when its depth is known)."""
    count = hidden_state_count(model)
    for layer in layers:
        if count is not None and not -count <= layer < count:
            raise ValueError(
                f"{who}: layer {layer} does not exist; this model has hidden states 0..{count - 1} "
                "(0 = embedding output, -1 = last layer)"
            )


@contextmanager
def hidden_states_enabled(model: nn.Module, enabled: bool = True) -> Iterator[None]:
    """Make every sentence-transformers ``Transformer`` inside ``model`` emit ``all_layer_embeddings``."""
    if not enabled:
        yield
        return
    from sentence_transformers.base.modules import Transformer

    configs = [m.model.config for m in model.modules() if isinstance(m, Transformer)]
    previous = [getattr(c, "output_hidden_states", False) for c in configs]
    for config in configs:
        config.output_hidden_states = True
    try:
        yield
    finally:
        for config, value in zip(configs, previous, strict=True):
            config.output_hidden_states = value


@contextmanager
def capture_features(model: nn.Module, hidden_states: bool = False) -> Iterator[list[dict[str, Any]]]:
    """Collect the output feature dict of every ``model(...)`` call made inside the block."""
    captured: list[dict[str, Any]] = []

    def keep(_module, _args, output):
        if isinstance(output, dict):
            captured.append(output)

    with ExitStack() as stack:
        handle = model.register_forward_hook(keep)
        stack.callback(handle.remove)
        stack.enter_context(hidden_states_enabled(model, hidden_states))
        yield captured


def _check_base_loss(base_loss: nn.Module) -> None:
    if not isinstance(base_loss, nn.Module) or not callable(base_loss):
        raise TypeError(f"base_loss must be a sentence-transformers loss module, got {type(base_loss).__name__}")
    if type(base_loss).__name__.startswith("Cached"):
        raise ValueError(
            f"{type(base_loss).__name__} embeds without gradients and back-propagates mini-batch by mini-batch "
            "(GradCache), so the token states of its forward cannot carry a regulariser; use the non-cached loss."
        )


class TokenRegularizer(nn.Module):
    """Base class of the token-level regularisers (SimReg, dispersion, NITP).

    Subclasses implement :meth:`penalty` (the unweighted value for one feature dict). The loss is
    ``weight · penalty`` averaged over the model forwards it sees:

    * alone: ``forward`` encodes each input column and regularises those outputs;
    * around ``base_loss``: ``forward`` returns ``base_loss(...) + weight · penalty`` on the
      features of the base loss's own forward pass, as the named terms :class:`RegularizedLoss` returns.
    """

    #: whether :meth:`penalty` reads ``all_layer_embeddings`` (set by subclasses / from their layers)
    needs_hidden_states: bool = False

    def __init__(self, model: nn.Module, weight: float = 1.0, base_loss: nn.Module | None = None) -> None:
        super().__init__()
        if not weight >= 0:
            raise ValueError(f"{type(self).__name__}: weight must be ≥ 0, got {weight}")
        if base_loss is not None:
            _check_base_loss(base_loss)
        self.model = model
        self.weight = float(weight)
        self.base_loss = base_loss

    # -- to be provided by subclasses -------------------------------------------------------------
    def penalty(self, features: dict[str, Any]) -> Tensor:
        raise NotImplementedError

    def get_config_dict(self) -> dict[str, Any]:
        config: dict[str, Any] = {"weight": self.weight}
        if self.base_loss is not None:
            config["base_loss"] = type(self.base_loss).__name__
        return config

    # -- shared ------------------------------------------------------------------------------------
    def regularization(self, features: dict[str, Any]) -> Tensor:
        """``weight · penalty(features)``."""
        return self.weight * self.penalty(features)

    def forward(
        self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None
    ) -> Tensor | dict[str, Tensor]:
        if self.base_loss is not None:
            return regularized_forward(
                self.model,
                self.base_loss,
                {regularizer_name(self): self.regularization},
                sentence_features,
                labels,
                hidden_states=self.needs_hidden_states,
            )
        sentence_features = list(sentence_features)
        if not sentence_features:
            raise ValueError(f"{type(self).__name__}: no input columns to regularise")
        with hidden_states_enabled(self.model, self.needs_hidden_states):
            outputs = [self.model(features) for features in sentence_features]
        return torch.stack([self.regularization(out) for out in outputs]).mean()

    # helpers for subclasses
    @staticmethod
    def token_mask(features: dict[str, Any]) -> Tensor:
        mask = features.get("attention_mask")
        if mask is None:
            raise ValueError("the model's features have no 'attention_mask' to tell tokens from padding")
        return mask.bool()

    def layer_states(self, features: dict[str, Any], layer: int) -> Tensor:
        """Token states of ``layer``: -1 is the last layer (``token_embeddings``), 0 the embedding output."""
        hidden = features.get("all_layer_embeddings")
        if layer == -1 or (hidden is not None and layer == len(hidden) - 1):
            states = features.get("token_embeddings")
            if states is None:
                raise ValueError("the model's features have no 'token_embeddings'")
            return states
        if hidden is None:
            raise ValueError(
                f"{type(self).__name__} reads layer {layer}, but the model's features carry no "
                "'all_layer_embeddings' (only sentence-transformers Transformer modules emit them); "
                "use layer -1 (the last layer) with this model"
            )
        if not -len(hidden) <= layer < len(hidden):
            raise ValueError(
                f"{type(self).__name__}: layer {layer} does not exist; this model has hidden states 0..{len(hidden) - 1} "
                "(0 = embedding output)"
            )
        return hidden[layer]


ExtraTerm = Callable[[dict[str, Any]], Tensor]
"""An extra loss term: one model-output feature dict → an already-weighted scalar."""


def regularized_forward(
    model: nn.Module,
    base_loss: nn.Module,
    terms: Mapping[str, ExtraTerm],
    sentence_features: Iterable[dict[str, Tensor]],
    labels: Tensor | None,
    *,
    base_name: str = "base",
    hidden_states: bool = False,
) -> dict[str, Tensor]:
    """Named terms ``{base_name: base_loss(...), name: mean over forwards of term(features), ...}``.

    Every ``model(...)`` call the base loss makes is captured (one per input column, or one merged
    forward); each extra term is averaged over those feature dicts. A base loss that already returns a
    dict of named terms (e.g. :class:`jtcse.losses.JTCSELoss`) keeps its names. The trainer sums the
    terms and logs each one.
    """
    with capture_features(model, hidden_states=hidden_states) as captured:
        base = base_loss(sentence_features, labels)
    if not captured:
        raise RuntimeError(
            f"{type(base_loss).__name__} did not call the regularised model; wrap a loss built on the same model"
        )
    parts = dict(base) if isinstance(base, dict) else {base_name: base}
    clash = sorted(set(parts) & set(terms))
    if clash:
        raise ValueError(f"the base loss already has a term named {clash[0]!r}")
    for name, term in terms.items():
        parts[name] = torch.stack([term(features) for features in captured]).mean()
    return parts


def regularizer_name(reg: nn.Module) -> str:
    """``SimRegLoss`` -> ``simreg``: the name a regulariser's term is logged under."""
    return type(reg).__name__.removesuffix("Loss").lower()


class RegularizedLoss(nn.Module):
    def __init__(
        self,
        model: nn.Module,
        base_loss: nn.Module,
        regularizers: Sequence[TokenRegularizer] | Mapping[str, ExtraTerm],
        base_name: str = "base",
    ) -> None:
        """
        A base loss plus named extra terms computed on the features of the base loss's own forward pass::

            L = base_loss + Σ_k term_k,     term_k = mean over the base loss's model calls f of term_k(features_f)

        The one way to add a loss term to a trainer's loss. ``regularizers`` is either a list of
        :class:`TokenRegularizer` (each logged under :func:`regularizer_name`, e.g. ``simreg``, and weighted by its
        own ``weight`` λ) or a mapping ``{name: fn(features) -> scalar}`` (weights folded into ``fn``). Each term
        reads every feature dict the base loss's ``model(...)`` calls produced (no second encoder pass).

        Args:
            model: the SentenceTransformer (or any model returning feature dicts) the base loss encodes with.
            base_loss: a sentence-transformers loss; GradCache ("Cached…") losses are refused.
            regularizers: :class:`TokenRegularizer` instances built without a ``base_loss`` of their own,
                or a ``{name: fn(features)}`` mapping (an ``nn.Module`` fn is trained with the model; a fn
                with ``needs_hidden_states = True`` gets ``all_layer_embeddings``).
            base_name: the name the base loss is logged under when it returns a single tensor.

        References:
            - ``docs/regularisers.md`` (the regularisers, extra terms from the trainers, ``--regularizer``)

        Requirements:
            1. ``base_loss`` calls ``model`` itself (the terms read that call's output features) and is not a
               GradCache loss, whose first pass has no graph to carry the terms.
            2. Term names distinct from each other and from the base loss's own terms.

        Inputs:
            +----------------------------+----------------------------+
            | Inputs                     | Labels                     |
            +============================+============================+
            | the ``base_loss``'s inputs | the ``base_loss``'s labels |
            +----------------------------+----------------------------+

        Returns:
            A dict of named terms (the base loss's own names when it returns a dict, e.g. :class:`JTCSELoss`);
            the trainer sums them and logs each one.

        Relations:
            - :class:`SimRegLoss`, :class:`DispersionLoss` and :class:`NITPLoss` given a ``base_loss`` build a
              ``RegularizedLoss``-style sum with themselves as the one term.
            - ``jtcse.losses.registry.build_regularised_loss`` builds one from ``--regularizer`` specs.

        Example:
            ::

                from datasets import Dataset
                from sentence_transformers import SentenceTransformerTrainer

                from jtcse import build_twin
                from jtcse.losses import DispersionLoss, JTCSELoss, RegularizedLoss, SimRegLoss

                twin = build_twin("warmup_tower_1", "warmup_tower_2", cael_every=2)
                train_dataset = Dataset.from_dict({"text": ["Snow fell overnight.", "The bakery opens at six.", "He lost his keys."]})
                # logged as nce_1, nce_2, icnce, ictm, simreg, dispersion
                loss = RegularizedLoss(twin, JTCSELoss(twin), [SimRegLoss(twin, weight=2.0), DispersionLoss(twin, weight=0.1)])
                # or any term of the twin's output features, its weight folded in:
                loss = RegularizedLoss(twin, JTCSELoss(twin), {"cls_norm": lambda out: 0.01 * out["pooled_1"].norm(dim=-1).mean()})

                trainer = SentenceTransformerTrainer(model=twin, train_dataset=train_dataset, loss=loss)
                trainer.train()
        """
        super().__init__()
        _check_base_loss(base_loss)
        if isinstance(regularizers, Mapping):
            terms = dict(regularizers)
        else:
            terms = {}
            for reg in regularizers:
                if not isinstance(reg, TokenRegularizer):
                    raise TypeError(f"regularizers must be TokenRegularizer instances, got {type(reg).__name__}")
                if regularizer_name(reg) in terms:
                    raise ValueError(f"two regularisers are named {regularizer_name(reg)!r}; give each once")
                terms[regularizer_name(reg)] = reg
        for name, fn in terms.items():
            if not callable(fn):
                raise TypeError(f"extra term {name!r} must be a callable fn(features) -> scalar")
            if isinstance(fn, TokenRegularizer) and fn.base_loss is not None:
                raise ValueError(
                    f"{type(fn).__name__} already wraps a base loss; pass regularisers built without base_loss"
                )
        self.model = model
        self.base_loss = base_loss
        self.base_name = base_name
        self.terms = terms
        # the terms that hold parameters (TokenRegularizers, e.g. NITP's head) train with the model
        self.regularizers = nn.ModuleList(fn for fn in terms.values() if isinstance(fn, nn.Module))
        self.needs_hidden_states = any(getattr(fn, "needs_hidden_states", False) for fn in terms.values())

    def forward(
        self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None
    ) -> dict[str, Tensor]:
        calls = {name: fn.regularization if isinstance(fn, TokenRegularizer) else fn for name, fn in self.terms.items()}
        return regularized_forward(
            self.model,
            self.base_loss,
            calls,
            sentence_features,
            labels,
            base_name=self.base_name,
            hidden_states=self.needs_hidden_states,
        )

    def get_config_dict(self) -> dict[str, Any]:
        return {
            "base_loss": type(self.base_loss).__name__,
            "base_loss_config": self.base_loss.get_config_dict() if hasattr(self.base_loss, "get_config_dict") else {},
            "regularizers": [
                {"name": type(fn).__name__, **fn.get_config_dict()}
                for fn in self.terms.values()
                if isinstance(fn, TokenRegularizer)
            ],
            "terms": sorted(self.terms),
        }

    @property
    def citation(self) -> str:
        parts = [getattr(self.base_loss, "citation", None)] + [getattr(r, "citation", None) for r in self.regularizers]
        return "\n".join(p for p in parts if p)
