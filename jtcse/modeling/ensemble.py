"""An ensemble of sentence encoders behind one sentence-transformers input module.

Each member is a complete ``SentenceTransformer`` (a JTCSE twin, a single tower, any checkpoint)
with its own tokenizer and pooling. With member embeddings ``e_i`` and weights ``w_i`` the
ensemble embeds a sentence as

* ``concat``: ``[w_1 e_1/|e_1|, ..., w_n e_n/|e_n|]`` (any widths; width = sum of the widths),
* ``sum``: ``sum_i w_i e_i/|e_i|`` (all members of one width).

This is the "+UC" ensemble of Zong et al., JTCSE (2025), Table I: the twin combined with an
independently trained checkpoint. With equal weights, the cosine of two concatenated embeddings
is the mean of the members' cosines.

This file, ``combine.py`` and ``portable.py`` are saved into every ensemble checkpoint (see
:mod:`jtcse.modeling.portable`), so it imports only torch, sentence-transformers, ``combine`` and ``portable`` (jtcse
only inside ``try``, which transformers' remote-code import check skips) and raises plain ``ValueError``:
``SentenceTransformer(path, trust_remote_code=True)`` opens an ensemble where jtcse is not installed.
With jtcse installed, members are opened by its loader (installed classes, never code read from the
checkpoint). Building one from checkpoint paths is :func:`jtcse.modeling.build.build_ensemble`.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from sentence_transformers.base.modules import InputModule
from torch import nn

from .combine import check_combine, check_weights
from .portable import portable, write_source_files

ENSEMBLE_CONFIG_FILE = "ensemble_config.json"


def _member_loader(path: str):
    """jtcse's loader for its own checkpoints when jtcse is installed, else ``SentenceTransformer``."""
    try:
        from jtcse.modeling.checkpoint_code import sentence_transformer_loader
    except ImportError:  # opened as checkpoint code where jtcse is not installed
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer
    return sentence_transformer_loader(path)


def member_dir(index: int) -> str:
    """Sub-folder of member ``index`` (0-based) inside a saved ensemble: ``member_1``, ``member_2``, ..."""
    return f"member_{index + 1}"


def _prefix(index: int) -> str:
    return f"{member_dir(index)}."


def _is_ensemble(module: nn.Module) -> bool:
    return any(type(m).__name__ == "Ensemble" and hasattr(m, "members") for m in module.modules())


@portable
class Ensemble(InputModule):
    """Several sentence encoders whose L2-normalised embeddings are concatenated or summed.

    Args:
        members: two or more ``SentenceTransformer`` models (none of them an ensemble).
        combine: ``concat`` (default, any widths) or ``sum`` (equal widths).
        weights: one positive weight per member (default all 1.0), applied after normalisation.

    ``preprocess`` runs every member's own tokenizer and stores its features under the prefix
    ``member_<i>.``; ``forward`` gives each member its features back. Saved layout: one full
    sentence-transformers checkpoint per member in ``member_1/``, ``member_2/``, ... and
    ``ensemble_config.json``.
    """

    config_file_name = ENSEMBLE_CONFIG_FILE
    config_keys = ["combine", "weights"]
    save_in_root = True

    def __init__(self, members: list[nn.Module], combine: str = "concat", weights: list[float] | None = None) -> None:
        super().__init__()
        members = list(members)
        if len(members) < 2:
            raise ValueError(f"An ensemble needs at least two members; got {len(members)}.")
        for i, member in enumerate(members):
            if _is_ensemble(member):
                raise ValueError(
                    f"Member {i + 1} is itself an ensemble; nested ensembles are not supported. "
                    "List its members directly instead."
                )
        check_combine(combine)
        self.widths = [member.get_embedding_dimension() for member in members]
        if any(width is None for width in self.widths):
            raise ValueError(f"Every member must report its embedding width; got {self.widths}.")
        if combine == "sum" and len(set(self.widths)) > 1:
            raise ValueError(
                f"Members of widths {self.widths} cannot be summed; use combine='concat' "
                "(--combine concat) to concatenate them instead."
            )
        self.members = nn.ModuleList(members)
        self.combine = combine
        self.weights = check_weights(weights, len(members))

    # -- configuration -------------------------------------------------------------------------

    def get_config_dict(self) -> dict[str, Any]:
        members = [member_dir(i) for i in range(len(self.members))]
        return {"combine": self.combine, "weights": self.weights, "members": members}

    def get_embedding_dimension(self) -> int:
        return sum(self.widths) if self.combine == "concat" else self.widths[0]

    @property
    def tokenizer(self):
        """The first member's tokenizer (each member tokenises for itself; see ``preprocess``)."""
        return self.members[0].tokenizer

    @property
    def processor(self):
        return self.members[0].processor

    @property
    def modalities(self) -> list[str]:
        return ["text"]

    @property
    def max_seq_length(self) -> int | None:
        """The longest of the members' token limits."""
        lengths = [member.max_seq_length for member in self.members if member.max_seq_length is not None]
        return max(lengths, default=None)

    @max_seq_length.setter
    def max_seq_length(self, value: int | None) -> None:
        for member in self.members:
            member.max_seq_length = value

    def tower_models(self) -> list[nn.Module]:
        """Every ``transformers`` model inside the members (for position-capacity checks)."""
        from transformers import PreTrainedModel

        return [m for member in self.members for m in member.modules() if isinstance(m, PreTrainedModel)]

    def __repr__(self) -> str:
        return f"Ensemble(combine={self.combine!r}, weights={self.weights}, widths={self.widths})"

    # -- input and forward ---------------------------------------------------------------------

    def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict[str, Any]:
        """Each member's own features, keys prefixed with ``member_<i>.``."""
        features: dict[str, Any] = {}
        for i, member in enumerate(self.members):
            prefix = _prefix(i)
            for key, value in member.preprocess(inputs, prompt=prompt, **kwargs).items():
                features[prefix + key] = value
        return features

    def member_embeddings(self, features: dict[str, Any]) -> list[torch.Tensor]:
        """The members' raw (unnormalised) sentence embeddings for prefixed ``features``."""
        outputs = []
        for i, member in enumerate(self.members):
            prefix = _prefix(i)
            own = {key[len(prefix) :]: value for key, value in features.items() if key.startswith(prefix)}
            if not own:
                raise ValueError(f"Ensemble features hold nothing for {member_dir(i)}; use the ensemble's preprocess.")
            outputs.append(member(own)["sentence_embedding"])
        return outputs

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        """``sentence_embedding``: weighted, L2-normalised member embeddings, concatenated or summed."""
        parts = [
            w * nn.functional.normalize(e.float(), p=2, dim=-1)
            for w, e in zip(self.weights, self.member_embeddings(features), strict=True)
        ]
        embedding = torch.cat(parts, dim=-1) if self.combine == "concat" else torch.stack(parts).sum(dim=0)
        features["sentence_embedding"] = embedding
        return features

    # -- persistence ---------------------------------------------------------------------------

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        for i, member in enumerate(self.members):
            member.save(
                os.path.join(output_path, member_dir(i)),
                create_model_card=False,
                safe_serialization=safe_serialization,
            )
        self.save_config(output_path)
        write_source_files(type(self), output_path)

    @classmethod
    def load(
        cls,
        model_name_or_path: str,
        subfolder: str = "",
        token: bool | str | None = None,
        cache_folder: str | None = None,
        revision: str | None = None,
        local_files_only: bool = False,
        trust_remote_code: bool = False,
        model_kwargs: dict[str, Any] | None = None,
        processor_kwargs: dict[str, Any] | None = None,
        config_kwargs: dict[str, Any] | None = None,
        backend: str = "torch",
        **kwargs,
    ) -> Ensemble:
        hub = dict(token=token, cache_folder=cache_folder, revision=revision, local_files_only=local_files_only)
        config = cls.load_config(model_name_or_path, subfolder=subfolder, **hub)
        names = config.get("members")
        if not isinstance(names, list) or len(names) < 2 or not all(isinstance(n, str) for n in names):
            raise ValueError(f"{ENSEMBLE_CONFIG_FILE} of {model_name_or_path} lists no members.")
        members = []
        for name in names:
            if os.path.basename(name) != name or name in ("", ".", ".."):
                raise ValueError(f"Ensemble member folder {name!r} must be a plain sub-folder name.")
            local = cls.load_dir_path(model_name_or_path, subfolder=f"{subfolder}/{name}" if subfolder else name, **hub)
            members.append(
                _member_loader(local)(
                    local,
                    trust_remote_code=trust_remote_code,
                    model_kwargs=model_kwargs,
                    processor_kwargs=processor_kwargs,
                    config_kwargs=config_kwargs,
                    backend=backend,
                    local_files_only=True,
                )
            )
        return cls(members, **{key: config[key] for key in cls.config_keys if key in config})
