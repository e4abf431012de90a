"""NITPLoss: Next Implicit Token Prediction on token states, with its projection head saved in the model.

The head ``P`` is trained with the encoder, so it has to live where checkpoints see it:
:class:`NITPHead` is a sentence-transformers ``Module`` appended to the model's pipeline. It passes
the features through unchanged (``encode`` output is unaffected), and ``model.save`` /
``SentenceTransformer(path)`` store and restore its weights like any other module -- which also makes
``resume_from_checkpoint`` continue with the trained head. Loading such a checkpoint needs ``jtcse``
importable; :func:`remove_nitp_head` strips the head before an export for plain
sentence-transformers users.
"""

from __future__ import annotations

from typing import Any

from sentence_transformers.base.modules import Module
from torch import Tensor, nn

from jtcse.losses.functional.token import nitp
from jtcse.losses.regularized import TokenRegularizer

try:  # Python 3.11+
    from typing import Self
except ImportError:  # pragma: no cover
    from typing_extensions import Self

__all__ = ["NITPHead", "NITPLoss", "remove_nitp_head"]


class NITPHead(Module):
    """The NITP projection head ``P`` (Linear → GELU → Linear); identity on the feature dict.

    Args:
        in_features: width of the final hidden state.
        out_features: width of the shallow target (defaults to ``in_features``).
        hidden_features: width of the inner layer (defaults to ``in_features``).
    """

    config_keys: list[str] = ["in_features", "out_features", "hidden_features"]

    def __init__(self, in_features: int, out_features: int | None = None, hidden_features: int | None = None) -> None:
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features or in_features)
        self.hidden_features = int(hidden_features or in_features)
        self.projection = nn.Sequential(
            nn.Linear(self.in_features, self.hidden_features),
            nn.GELU(),
            nn.Linear(self.hidden_features, self.out_features),
        )

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        return features

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)
        self.save_torch_weights(output_path, safe_serialization=safe_serialization)

    @classmethod
    def load(
        cls,
        model_name_or_path: str,
        subfolder: str = "",
        token: bool | str | None = None,
        cache_folder: str | None = None,
        revision: str | None = None,
        local_files_only: bool = False,
        **kwargs,
    ) -> Self:
        hub_kwargs = {
            "subfolder": subfolder,
            "token": token,
            "cache_folder": cache_folder,
            "revision": revision,
            "local_files_only": local_files_only,
        }
        config = cls.load_config(model_name_or_path=model_name_or_path, **hub_kwargs)
        head = cls(**{key: config[key] for key in cls.config_keys if key in config})
        return cls.load_torch_weights(model_name_or_path=model_name_or_path, model=head, **hub_kwargs)


def _encoder_shape(model: nn.Module) -> tuple[int, int]:
    """(number of layers, hidden size) of the first sentence-transformers Transformer in ``model``."""
    from sentence_transformers.base.modules import Transformer

    for module in model.modules():
        if isinstance(module, Transformer):
            config = module.model.config
            layers = getattr(config, "num_hidden_layers", None)
            hidden = getattr(config, "hidden_size", None)
            if layers is None or hidden is None:
                break
            return int(layers), int(hidden)
    raise ValueError(
        "NITPLoss needs a sentence-transformers Transformer module with a num_hidden_layers/hidden_size config "
        "(it reads a shallow layer's hidden states through all_layer_embeddings)"
    )


def _find_head(model: nn.Module) -> NITPHead | None:
    heads = [m for m in model.modules() if isinstance(m, NITPHead)]
    if len(heads) > 1:
        raise ValueError(f"the model holds {len(heads)} NITPHead modules; keep at most one")
    return heads[0] if heads else None


def remove_nitp_head(model: nn.Module) -> int:
    """Drop every :class:`NITPHead` from a SentenceTransformer pipeline (before an export). Returns how many."""
    names = [name for name, module in model.named_children() if isinstance(module, NITPHead)]
    for name in names:
        del model._modules[name]
    return len(names)


class NITPLoss(TokenRegularizer):
    needs_hidden_states = True
    #: the constructor arguments ``--regularizer nitp:...`` takes (help: the Args entries below)
    cli_options = ("weight", "shallow_layer", "hidden_features")

    def __init__(
        self,
        model: nn.Module,
        weight: float = 1.0,
        shallow_layer: int | None = None,
        hidden_features: int | None = None,
        base_loss: nn.Module | None = None,
    ) -> None:
        """
        Next Implicit Token Prediction: each position's last-layer state, through a projection head ``P``,
        predicts the next position's state in a shallow layer::

            L = weight · mean_t [1 − cos(P(h_t), sg(z_{t+1}))]

        ``h`` is the last layer's token states (``token_embeddings``), ``z`` the hidden states of a shallow
        layer (default ≈ 20% of the depth, at least layer 1) read from ``all_layer_embeddings`` and detached
        (``sg``: no gradient comes back through the target). Positions whose successor is padding (and every
        sequence's last position) are masked.

        On construction the loss finds the model's :class:`NITPHead` (e.g. one loaded with a checkpoint) or
        appends a new one to the model, so the head is optimised and saved with it.

        Args:
            model: a SentenceTransformer whose first module is a ``Transformer``.
            weight: λ (1.0 in the paper).
            shallow_layer: hidden-state index of the target (0 = the embedding output, 1 = after the
                first layer), below the last layer; unset: about 20% of the depth, at least 1.
            hidden_features: inner width of a newly created head (default: the hidden size).
            base_loss: optional sentence-transformers loss to add the term to (same forward pass); not a
                GradCache (``Cached…``) loss, which embeds without a graph.

        References:
            - NITP: Next Implicit Token Prediction for LLM Pre-training (ICML 2026): https://arxiv.org/abs/2605.24956
            - ``docs/regularisers.md`` (the head in checkpoints, :func:`remove_nitp_head` before an export)

        Requirements:
            1. A sentence-transformers ``Transformer`` module with ``num_hidden_layers`` and ``hidden_size`` in its
               config (the shallow layer is read through ``all_layer_embeddings``).
            2. A model that is a module pipeline (``SentenceTransformer``), so the head can be appended to it.

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
            - :class:`NITPHead` is the saved head; :func:`remove_nitp_head` strips it so plain sentence-transformers
              can load the exported model.

        Example:
            ::

                from datasets import Dataset
                from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
                from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

                from jtcse.losses import NITPLoss, remove_nitp_head

                model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
                train_dataset = Dataset.from_dict({
                    "question": ["What do bees make?", "How far away is the moon?"],
                    "answer": ["Bees make honey and wax.", "About 384,000 kilometres from Earth."],
                })
                loss = NITPLoss(model, weight=1.0, base_loss=MultipleNegativesRankingLoss(model))

                trainer = SentenceTransformerTrainer(model=model, train_dataset=train_dataset, loss=loss)
                trainer.train()
                remove_nitp_head(model)
                model.save("minilm-nitp")
        """
        super().__init__(model, weight, base_loss)
        num_layers, hidden = _encoder_shape(model)
        if shallow_layer is None:
            shallow_layer = max(1, round(0.2 * num_layers))
        if isinstance(shallow_layer, bool) or not isinstance(shallow_layer, int) or not 0 <= shallow_layer < num_layers:
            raise ValueError(
                f"NITPLoss: shallow_layer must be an integer in 0..{num_layers - 1} for this {num_layers}-layer "
                f"encoder (0 = embedding output), got {shallow_layer!r}"
            )
        self.shallow_layer = shallow_layer
        head = _find_head(model)
        if head is None:
            if not hasattr(model, "append"):
                raise ValueError(
                    "NITPLoss: the model is not a module pipeline, so the NITP head cannot be attached to it"
                )
            reference = next(model.parameters())
            head = NITPHead(hidden, hidden, hidden_features).to(device=reference.device, dtype=reference.dtype)
            model.append(head)
        elif head.in_features != hidden:
            raise ValueError(f"the model's NITPHead expects {head.in_features} features, the encoder has {hidden}")
        self.head = head

    def penalty(self, features: dict[str, Any]) -> Tensor:
        final = self.layer_states(features, -1)
        shallow = self.layer_states(features, self.shallow_layer)
        return nitp(final, shallow, self.token_mask(features), self.head.projection)

    def get_config_dict(self) -> dict[str, Any]:
        return {
            **super().get_config_dict(),
            "shallow_layer": self.shallow_layer,
            "head": self.head.get_config_dict(),
        }

    @property
    def citation(self) -> str:
        return """
@inproceedings{nitp2026,
    title = {NITP: Next Implicit Token Prediction for LLM Pre-training},
    booktitle = {Proceedings of the International Conference on Machine Learning (ICML)},
    year = {2026},
    eprint = {2605.24956},
    archivePrefix = {arXiv},
}
"""
