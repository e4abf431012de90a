"""Load any sentence-transformers checkpoint for evaluation, optionally with another pooling.

Evaluation follows SimCSE's SentEval batcher, which does not truncate: by default the encoder's
``max_seq_length`` is raised to what its position table holds (see :func:`position_capacity`).
"""

from __future__ import annotations

POOLING_CHOICES = ("cls", "mean")


def position_capacity(hf_model) -> int | None:
    """Longest input the model's learned position table accepts, or ``None`` when it has none.

    RoBERTa-style embeddings start positions at ``padding_idx + 1``, so those slots are unusable.
    """
    import torch

    config = getattr(hf_model, "config", None)
    limit = getattr(config, "max_position_embeddings", None)
    if limit is None:
        return None
    for module in hf_model.modules():
        padding_idx = getattr(module, "padding_idx", None)
        if isinstance(padding_idx, int) and isinstance(getattr(module, "position_embeddings", None), torch.nn.Embedding):
            return limit - (padding_idx + 1)
    return limit


def load_sentence_encoder(
    model_name_or_path: str,
    pooling: str | None = None,
    max_seq_length: int | None = None,
    device: str | None = None,
):
    """A :class:`SentenceTransformer` for ``model_name_or_path``.

    ``pooling`` (``cls`` | ``mean``) replaces the checkpoint's own pooling: the checkpoint's first
    module (its Transformer) is kept and a new Pooling module put after it. ``max_seq_length``
    ``None`` means the model's full position capacity (no truncation below it), as in SimCSE's evaluation.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    from jtcse.errors import JTCSEError
    from jtcse.modeling.loading import load_model

    if pooling is not None and pooling not in POOLING_CHOICES:
        raise JTCSEError(f"--pooling must be one of {', '.join(POOLING_CHOICES)}, not {pooling!r}")
    try:
        model = load_model(model_name_or_path, device=device)
    except (OSError, ValueError, KeyError, JTCSEError) as err:
        raise JTCSEError(f"cannot load sentence-transformers model {model_name_or_path!r}: {err}") from None
    first = model[0]
    if pooling is not None:
        if not isinstance(first, Transformer):
            raise JTCSEError(
                f"--pooling needs a checkpoint whose first module is a Transformer; {model_name_or_path!r} "
                f"starts with {type(first).__name__}, which pools by itself."
            )
        pool = Pooling(first.get_embedding_dimension(), pooling_mode=pooling)
        model = SentenceTransformer(modules=[first, pool], device=device)
    if isinstance(first, Transformer):
        if max_seq_length is None:
            max_seq_length = position_capacity(first.auto_model)
        if max_seq_length is not None:
            model.max_seq_length = int(max_seq_length)
    elif hasattr(first, "max_seq_length"):  # e.g. the JTCSE twin: the tightest of its towers
        if max_seq_length is None and hasattr(first, "tower_models"):
            capacities = [position_capacity(m) for m in first.tower_models()]
            max_seq_length = min((c for c in capacities if c is not None), default=None)
        if max_seq_length is not None:
            first.max_seq_length = int(max_seq_length)
    model.eval()
    return model
