"""Build jtcse's composite models from checkpoints: a JTCSE twin from two towers, an ensemble from any encoders."""

from __future__ import annotations


def build_twin(tower_a=None, tower_b=None, *, cael_every: int | None = 2, max_seq_length: int | None = 64, device=None):
    """A ``SentenceTransformer`` whose only module is a :class:`~jtcse.modeling.twin.TwinTowers`.

    ``tower_a`` / ``tower_b``: anything :func:`jtcse.modeling.loading.load_cls_tower` opens (a
    sentence-transformers or ``transformers`` directory, a hub name; None: the embedded MiniLM). Only
    each tower's Transformer is used: the twin always pools CLS.
    ``cael_every``: CAEL spacing (a divisor of the layer count) or None for no cross-attention.
    ``encode`` returns the sum of the two towers' last-layer CLS vectors.
    """
    from sentence_transformers import SentenceTransformer

    from jtcse.modeling.loading import check_device, load_cls_tower
    from jtcse.modeling.twin import TwinTowers

    device = check_device(device)
    towers = [load_cls_tower(t, role="tower")[0][0] for t in (tower_a, tower_b)]
    twin = TwinTowers(towers[0], towers[1], cael_every=cael_every, max_seq_length=max_seq_length)
    return SentenceTransformer(modules=[twin], device=device)


def build_ensemble(models, combine: str = "concat", weights=None, device: str | None = None):
    """A ``SentenceTransformer`` whose only module is an :class:`~jtcse.modeling.ensemble.Ensemble` of ``models``.

    ``models``: ``SentenceTransformer`` objects or checkpoint paths/names, opened with
    :func:`jtcse.modeling.loading.load_model` as they encode (a twin as its towers' summed CLS, a hub
    encoder with its own pooling). To save it with its jtcse model card (members, weights, combination), under
    the output's lock and all at once: :func:`jtcse.training.ensemble.save_ensemble`.
    """
    from sentence_transformers import SentenceTransformer
    from torch import nn

    from jtcse.modeling.ensemble import Ensemble
    from jtcse.modeling.loading import check_device, load_model

    device = check_device(device)
    members = [model if isinstance(model, nn.Module) else load_model(model, device=device) for model in models]
    return SentenceTransformer(modules=[Ensemble(members, combine=combine, weights=weights)], device=device)
