"""The JTCSE twin: two BERT-layout towers behind one sentence-transformers input module.

Inference (eval mode, what ``SentenceTransformer.encode`` returns): each tower encodes the
sentence on its own and the embedding is the **sum of the two towers' pooled last hidden states** --
no pooler, no cross-attention. ``pooling`` is ``cls`` (the last-layer CLS vector: Zong et al., JTCSE,
2025, sec. III-C, for BERT and RoBERTa) or ``mean`` (the mean over the non-padding tokens: the pooling
most pre-trained sentence encoders -- MiniLM, MPNet, GTE, E5 -- were trained with, which CLS would throw away).

Training mode adds what the JTCSE losses read: per-tower pooled vectors of the primitive stream, their
pooler outputs (the tower's pooler head, dense + tanh, applied to the pooled vector: for ``cls`` exactly
the ``pooler_output`` of BERT/RoBERTa, for ``mean`` the same head on the mean, so ICTM keeps its form,
a modulus constraint on a bounded head of the sentence vector that NCE/ICNCE read),
and -- unless ``cael_every`` is None (TNCSE) -- the pooled vectors of the *cross stream*, which equals
the primitive stream up to the first cross-attention encoder layer (CAEL) and from there on runs
through CAELs (every ``cael_every``-th layer, see :mod:`jtcse.modeling.cross_attention`) and the
towers' ordinary layers. The cross stream starts from the primitive hidden state entering the
first CAEL, so nothing below it is recomputed and its gradients reach the shared lower layers.

This file, ``cross_attention.py`` and ``portable.py`` are saved into every twin checkpoint (see
:mod:`jtcse.modeling.portable`), so they import only torch, transformers, sentence-transformers and
each other, and raise plain ``ValueError``.
"""

from __future__ import annotations

import json
import logging
import operator
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from sentence_transformers.base.modules import InputModule, Transformer
from sentence_transformers.sentence_transformer.modules import Pooling
from torch import nn

from .cross_attention import cael_forward, encoder_layers, padding_mask
from .portable import portable, write_source_files

logger = logging.getLogger(__name__)

TOWER_DIRS = ("tower_1", "tower_2")
TWIN_CONFIG_FILE = "jtcse_twin_config.json"
TWIN_POOLINGS = ("cls", "mean")
"""How a twin pools each tower's last hidden states; a twin saved before pooling was a choice pools ``cls``."""
_MODEL_INPUT_KEYS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")


def check_twin_pooling(pooling: Any) -> str:
    """``pooling`` when it is one of :data:`TWIN_POOLINGS`; a ``ValueError`` naming them otherwise."""
    if pooling not in TWIN_POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(TWIN_POOLINGS)}, not {pooling!r}.")
    return pooling


def check_cael_every(cael_every: Any, num_layers: int) -> int | None:
    """Validate the CAEL spacing ``k``: None (no CAEL, TNCSE) or a positive divisor of the layer count."""
    if cael_every is None:
        return None
    divisors = [d for d in range(1, num_layers + 1) if num_layers % d == 0]
    try:
        if isinstance(cael_every, bool):
            raise TypeError
        k = operator.index(cael_every)
    except TypeError:
        raise ValueError(
            f"cael_every must be an integer or None, not {cael_every!r}. Valid values for {num_layers}-layer "
            f"towers: {divisors} (or None for no cross-attention)."
        ) from None
    if k < 1 or num_layers % k:
        raise ValueError(
            f"cael_every={k} does not divide the towers' {num_layers} layers. Valid values: {divisors} "
            "(or None for no cross-attention)."
        )
    return k


def check_towers_compatible(tower_1: Transformer, tower_2: Transformer) -> None:
    """Raise :class:`ValueError` unless the towers share tokenizer (vocabulary and normalisation), layer layout, count and width."""
    layers = [encoder_layers(tower.model) for tower in (tower_1, tower_2)]
    c1, c2 = tower_1.model.config, tower_2.model.config
    for what, a, b in (
        ("model type", c1.model_type, c2.model_type),
        ("layer count", len(layers[0]), len(layers[1])),
        ("hidden size", c1.hidden_size, c2.hidden_size),
        ("attention head count", c1.num_attention_heads, c2.num_attention_heads),
    ):
        if a != b:
            raise ValueError(f"The towers differ in {what} ({a} vs {b}); JTCSE needs two towers of the same shape.")
    tok_1, tok_2 = tower_1.tokenizer, tower_2.tokenizer
    if tok_1 is None or tok_2 is None:
        raise ValueError("Both towers need a text tokenizer.")
    if type(tok_1) is not type(tok_2) or tok_1.get_vocab() != tok_2.get_vocab():
        raise ValueError(
            f"The towers use different tokenizers ({type(tok_1).__name__}, {len(tok_1)} tokens vs "
            f"{type(tok_2).__name__}, {len(tok_2)} tokens); JTCSE feeds both towers the same token ids."
        )
    norm_1, norm_2 = tokenizer_normalisation(tok_1), tokenizer_normalisation(tok_2)
    if norm_1 != norm_2:
        differ = {
            key: (norm_1.get(key), norm_2.get(key))
            for key in sorted(set(norm_1) | set(norm_2))
            if norm_1.get(key) != norm_2.get(key)
        }
        shown = ", ".join(f"{key} {a!r} vs {b!r}" for key, (a, b) in differ.items())
        raise ValueError(
            f"The towers' tokenizers normalise text differently ({shown}), e.g. a cased and an uncased "
            "tower; JTCSE feeds both towers the same token ids, so both must be cased or both uncased."
        )


def tokenizer_normalisation(tokenizer) -> dict[str, Any]:
    """What a tokenizer does to text before splitting it: lower-casing, accent stripping, unicode form.

    Fast tokenizers: their ``normalizer`` settings, flattened (``normalizer.lowercase``, ...); others:
    their ``do_lower_case`` / ``strip_accents`` / ``tokenize_chinese_chars`` options.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        keys = ("do_lower_case", "strip_accents", "tokenize_chinese_chars")
        return {key: getattr(tokenizer, key, tokenizer.init_kwargs.get(key)) for key in keys}
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}.{key}")
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{prefix}.{i}")
        else:
            flat[prefix] = node

    # the normalizer's own JSON (what pickling it writes): the same as tokenizer.json's "normalizer" entry,
    # without serialising and parsing the whole vocabulary
    normalizer = backend.normalizer
    walk(None if normalizer is None else json.loads(normalizer.__getstate__()), "normalizer")
    return flat


def position_capacity(hf_model: nn.Module) -> int | None:
    """Longest input the model's learned position table accepts, or None when it has none.

    RoBERTa-style embeddings start positions at ``padding_idx + 1``, so those slots are unusable.
    """
    limit = getattr(getattr(hf_model, "config", None), "max_position_embeddings", None)
    if limit is None or limit < 0:
        return None
    for module in hf_model.modules():
        padding_idx = getattr(module, "padding_idx", None)
        if isinstance(padding_idx, int) and isinstance(getattr(module, "position_embeddings", None), nn.Embedding):
            return limit - (padding_idx + 1)
    return limit


def assemble_tower(transformer: Transformer, pooling: str = "cls", device: str | None = None):
    """``SentenceTransformer(modules=[transformer, Pooling(pooling)])`` on ``device`` (default: where the
    transformer's weights are).

    The one place a tower is put together from a ``Transformer`` module (twin export here; CLS towers and
    pooling overrides in :mod:`jtcse.modeling.loading`). It lives in this module because twin
    checkpoints carry this file, which must not import jtcse.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    if device is None:
        device = str(next(transformer.parameters()).device)
    pooling_module = Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling)
    return SentenceTransformer(modules=[transformer, pooling_module], device=device)


@dataclass
class TwinStreams:
    """Per-layer hidden states of one twin forward: index 0 is the embedding output, index L the last layer.

    ``cross[t]`` aliases ``primitive[t]`` below the first CAEL (same tensors) and is computed from it on.
    """

    primitive: tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]
    cross: tuple[list[torch.Tensor], list[torch.Tensor]] | None


@portable
class TwinTowers(InputModule):
    """Two towers (sentence-transformers ``Transformer`` modules) encoded jointly; see the module docstring.

    Args:
        tower_1, tower_2: ``Transformer`` modules of the same BERT-layout architecture and tokenizer.
        cael_every: CAEL spacing ``k`` (a divisor of the layer count; the CAELs are layers k, 2k, ..., L),
            or None for no cross stream (TNCSE). Changes training only, never ``encode``.
        max_seq_length: truncation length of the shared tokenizer, for both towers (None: tower 1's own, the
            length of the model the twin starts from); a length beyond the towers' position table is clamped
            to it, with a warning.
        pooling: ``cls`` or ``mean`` (:data:`TWIN_POOLINGS`), for each tower's last hidden states, in
            ``encode`` and in every stream the losses read. A checkpoint without it pools ``cls``.

    Saved layout (inside a SentenceTransformer directory): ``tower_1/`` and ``tower_2/`` (each a
    ``Transformer`` folder: HF config, weights, tokenizer), ``jtcse_twin_config.json`` and this
    module's source files (``twin.py``, ``cross_attention.py``, ``portable.py``); ``modules.json``
    names the class ``twin.TwinTowers``, so ``SentenceTransformer(path, trust_remote_code=True)``
    loads it without jtcse.
    """

    config_file_name = TWIN_CONFIG_FILE
    config_keys = ["cael_every", "max_seq_length", "pooling"]
    save_in_root = True

    def __init__(
        self,
        tower_1: Transformer,
        tower_2: Transformer,
        cael_every: int | None = 2,
        max_seq_length: int | None = None,
        pooling: str = "cls",
    ) -> None:
        super().__init__()
        check_towers_compatible(tower_1, tower_2)
        self.pooling = check_twin_pooling(pooling)
        self._pool = Pooling(tower_1.get_embedding_dimension(), pooling_mode=pooling)  # no parameters
        self.towers = nn.ModuleList([tower_1, tower_2])
        self.num_layers = len(encoder_layers(tower_1.model))
        self.cael_every = cael_every
        self.max_seq_length = tower_1.max_seq_length if max_seq_length is None else max_seq_length

    # -- configuration -------------------------------------------------------------------------

    @property
    def cael_every(self) -> int | None:
        return self._cael_every

    @cael_every.setter
    def cael_every(self, value: int | None) -> None:
        self._cael_every = check_cael_every(value, self.num_layers)

    @property
    def cael_layers(self) -> list[int]:
        """1-based indices of the CAELs (empty without a cross stream)."""
        if self.cael_every is None:
            return []
        return list(range(self.cael_every, self.num_layers + 1, self.cael_every))

    @property
    def max_seq_length(self) -> int | None:
        return self.towers[0].max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int | None) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 2):
            raise ValueError(f"max_seq_length must be an integer >= 2, not {value!r}.")
        capacity = self.position_capacity()
        if value is not None and capacity is not None and value > capacity:
            logger.warning(
                f"max_seq_length={value} exceeds the {capacity} positions of the towers' position table; "
                f"using max_seq_length={capacity}."
            )
            value = capacity
        for tower in self.towers:
            tower.max_seq_length = value

    @property
    def tokenizer(self):
        """The tokenizer shared by both towers (tower 1's instance)."""
        return self.towers[0].tokenizer

    @property
    def processor(self):
        return self.towers[0].processor

    @property
    def modalities(self) -> list[str]:
        return ["text"]

    def tower_models(self) -> list[nn.Module]:
        """The two ``transformers`` models, ``[tower_1, tower_2]``."""
        return [tower.model for tower in self.towers]

    def position_capacity(self) -> int | None:
        """Longest input both towers accept (:func:`position_capacity`), None when unbounded."""
        capacities = [c for c in map(position_capacity, self.tower_models()) if c is not None]
        return min(capacities, default=None)

    def get_embedding_dimension(self) -> int:
        return self.towers[0].get_embedding_dimension()

    def get_config_dict(self) -> dict[str, Any]:
        return {"cael_every": self.cael_every, "max_seq_length": self.max_seq_length, "pooling": self.pooling}

    def __repr__(self) -> str:
        arch = type(self.towers[0].model).__name__
        return f"TwinTowers({dict(self.get_config_dict(), architecture=arch, num_layers=self.num_layers)})"

    # -- input ---------------------------------------------------------------------------------

    def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict[str, Any]:
        """Tokenise once with the shared tokenizer; both towers read the same features."""
        return self.towers[0].preprocess(inputs, prompt=prompt, **kwargs)

    # -- forward -------------------------------------------------------------------------------

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``(B, d)``: ``hidden`` (``(B, T, d)``) pooled as :attr:`pooling` says (``mean`` skips padding),
        by sentence-transformers' own ``Pooling``, so an exported tower pools exactly the same."""
        return self._pool({"token_embeddings": hidden, "attention_mask": attention_mask})["sentence_embedding"]

    def pooler_heads(self, pooled: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Each tower's pooler head (BERT/RoBERTa: dense + tanh of the first position) applied to its pooled
        vector; for ``cls`` this is the model's ``pooler_output``. ``None`` when a tower has no pooler."""
        poolers = [getattr(model, "pooler", None) for model in self.tower_models()]
        if any(pooler is None for pooler in poolers):
            return None
        return tuple(pooler(vector.unsqueeze(1)) for pooler, vector in zip(poolers, pooled, strict=True))

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        """Eval mode: ``sentence_embedding`` = pool(H_1) + pool(H_2) and ``token_embeddings`` = H_1 + H_2.

        Training mode adds ``pooled_1``, ``pooled_2`` (each tower's pooled last hidden state),
        ``pooler_1``, ``pooler_2`` (:meth:`pooler_heads`, when the towers have a pooler),
        ``cross_pooled_1``, ``cross_pooled_2`` (the cross stream pooled, only when ``cael_every`` is
        set) and the per-tower last hidden states ``token_embeddings_1``, ``token_embeddings_2``.
        ``token_embeddings`` is the sum of the towers' last hidden states, so pooling it gives
        ``sentence_embedding`` (both poolings are linear in the hidden states).
        """
        with_cross = self.training and self.cael_every is not None
        streams = self.run_streams(features, cross=with_cross, keep_all=False)
        mask = features["attention_mask"]
        last_1, last_2 = streams.primitive[0][-1], streams.primitive[1][-1]
        pooled = (self.pool(last_1, mask), self.pool(last_2, mask))
        features["token_embeddings"] = last_1 + last_2
        features["sentence_embedding"] = pooled[0] + pooled[1]
        if self.training:
            features["pooled_1"], features["pooled_2"] = pooled
            features["token_embeddings_1"], features["token_embeddings_2"] = last_1, last_2
            heads = self.pooler_heads(pooled)
            if heads is not None:
                features["pooler_1"], features["pooler_2"] = heads
            if streams.cross is not None:
                features["cross_pooled_1"] = self.pool(streams.cross[0][-1], mask)
                features["cross_pooled_2"] = self.pool(streams.cross[1][-1], mask)
        return features

    def run_streams(self, features: dict[str, Any], *, cross: bool = True, keep_all: bool = True) -> TwinStreams:
        """Run both towers; with ``cross`` (and ``cael_every`` set) also the cross stream.

        ``keep_all`` asks for every layer's hidden state (for inspection and tests); otherwise only
        what the cross stream needs is requested from the towers.
        """
        inputs = {key: features[key] for key in _MODEL_INPUT_KEYS if key in features}
        if "input_ids" not in inputs or "attention_mask" not in inputs:
            raise ValueError("TwinTowers needs tokenised features with input_ids and attention_mask.")
        cross = cross and self.cael_every is not None
        outputs = [
            tower.model(**inputs, output_hidden_states=cross or keep_all, return_dict=True) for tower in self.towers
        ]
        primitive = tuple(
            out.hidden_states if out.hidden_states is not None else (out.last_hidden_state,) for out in outputs
        )
        cross_states = self._cross_stream(primitive, inputs["attention_mask"]) if cross else None
        return TwinStreams(primitive=primitive, cross=cross_states)

    def _cross_stream(self, primitive, attention_mask: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        from transformers.masking_utils import create_bidirectional_mask

        models = self.tower_models()
        layers = [encoder_layers(model) for model in models]
        first = self.cael_every  # 1-based index of the first CAEL
        states = [list(primitive[0][:first]), list(primitive[1][:first])]
        key_mask = padding_mask(attention_mask)
        layer_masks: list[Any] = [None, None]  # the towers' own mask format, built on first use
        cael_set = set(self.cael_layers)
        for j in range(first, self.num_layers + 1):
            c_1, c_2 = states[0][-1], states[1][-1]
            if j in cael_set:
                new_1 = cael_forward(layers[0][j - 1], layers[1][j - 1], c_1, c_2, key_mask)
                new_2 = cael_forward(layers[1][j - 1], layers[0][j - 1], c_2, c_1, key_mask)
            else:
                for t, c in enumerate((c_1, c_2)):
                    if layer_masks[t] is None:
                        layer_masks[t] = create_bidirectional_mask(
                            config=models[t].config, inputs_embeds=c, attention_mask=attention_mask
                        )
                new_1 = layers[0][j - 1](c_1, layer_masks[0])
                new_2 = layers[1][j - 1](c_2, layer_masks[1])
            states[0].append(new_1)
            states[1].append(new_2)
        return states[0], states[1]

    # -- persistence ---------------------------------------------------------------------------

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        for tower, sub in zip(self.towers, TOWER_DIRS, strict=True):
            tower_dir = os.path.join(output_path, sub)
            os.makedirs(tower_dir, exist_ok=True)
            tower.save(tower_dir, safe_serialization=safe_serialization)
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
        model_kwargs: dict[str, Any] | None = None,
        processor_kwargs: dict[str, Any] | None = None,
        config_kwargs: dict[str, Any] | None = None,
        backend: str = "torch",
        **kwargs,
    ) -> TwinTowers:
        hub = dict(token=token, cache_folder=cache_folder, revision=revision, local_files_only=local_files_only)
        config = cls.load_config(model_name_or_path, subfolder=subfolder, **hub)
        towers = [
            Transformer.load(
                model_name_or_path,
                subfolder=f"{subfolder}/{sub}" if subfolder else sub,
                model_kwargs=model_kwargs,
                processor_kwargs=processor_kwargs,
                config_kwargs=config_kwargs,
                backend=backend,
                **hub,
            )
            for sub in TOWER_DIRS
        ]
        return cls(*towers, **{key: config[key] for key in cls.config_keys if key in config})

    def export_tower(self, index: int, out_dir: str | Path) -> str:
        """Write tower ``index`` (0 or 1) as a plain SentenceTransformer (Transformer + the twin's Pooling).

        The result loads with sentence-transformers alone; it does not need jtcse.
        """
        if index not in (0, 1):
            raise ValueError(f"Tower index must be 0 or 1, not {index!r}.")
        assemble_tower(self.towers[index], self.pooling).save(str(out_dir))
        return str(out_dir)

    def export_towers(self, out_dir: str | Path) -> list[str]:
        """Write both towers as plain SentenceTransformer checkpoints in ``out_dir/tower_1`` and ``out_dir/tower_2``."""
        return [self.export_tower(i, Path(out_dir) / sub) for i, sub in enumerate(TOWER_DIRS)]
