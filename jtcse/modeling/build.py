"""Build jtcse's composite models from checkpoints: a JTCSE twin from two towers, an ensemble from any encoders."""

from __future__ import annotations


def cael_every_setting(cael_every, num_layers: int) -> int | None:
    """:func:`~jtcse.modeling.twin.check_cael_every`, its error a :class:`~jtcse.errors.SettingError` naming
    ``cael_every`` (so whoever knows the setting by another name says it in that: ``--twin-cael-every``). Here, not
    in ``twin.py``: a checkpoint's own code imports nothing of jtcse."""
    from jtcse.errors import SettingError
    from jtcse.modeling.twin import check_cael_every

    try:
        return check_cael_every(cael_every, num_layers)
    except ValueError as err:
        raise SettingError.naming(str(err), "cael_every") from None


def build_twin(
    tower_a=None,
    tower_b=None,
    *,
    cael_every: int | None = 2,
    max_seq_length: int | None = None,
    pooling: str | None = None,
    device=None,
):
    """A ``SentenceTransformer`` whose only module is a :class:`~jtcse.modeling.twin.TwinTowers`.

    ``tower_a`` / ``tower_b``: anything :func:`jtcse.modeling.loading.load_tower` opens (a
    sentence-transformers or ``transformers`` directory, a hub name; None: the embedded MiniLM). Only
    each tower's Transformer is used.
    ``pooling``: ``cls`` or ``mean``; ``None`` takes the towers' own (:func:`~jtcse.modeling.loading.load_tower`:
    a sentence-transformers model's ``cls``/``mean`` Pooling, CLS for a plain ``transformers`` model; any other
    pooling is refused). Towers pooling differently need it given.
    ``cael_every``: CAEL spacing (a divisor of the layer count) or None for no cross-attention.
    ``max_seq_length``: both towers' length; ``None`` (default): tower I's own, so the twin encodes as long inputs
    as the model it starts from (training sets it back to this before saving).
    ``encode`` returns the sum of the two towers' pooled last hidden states.
    """
    from sentence_transformers import SentenceTransformer

    from jtcse.errors import JTCSEError
    from jtcse.modeling.cross_attention import encoder_layers
    from jtcse.modeling.loading import check_device, describe_source, load_tower
    from jtcse.modeling.twin import TwinTowers

    device = check_device(device)
    loaded = [load_tower(t, pooling=pooling, role="tower") for t in (tower_a, tower_b)]
    poolings = [chosen for _, chosen, _ in loaded]
    if poolings[0] != poolings[1]:
        raise JTCSEError(
            f"the towers pool differently (tower I {describe_source(tower_a)!r}: {poolings[0]}, tower II "
            f"{describe_source(tower_b)!r}: {poolings[1]}); the twin pools both one way: give pooling='cls' or 'mean'."
        )
    cael_every_setting(cael_every, len(encoder_layers(loaded[0][0][0].auto_model)))  # its error names the setting
    twin = TwinTowers(
        loaded[0][0][0], loaded[1][0][0], cael_every=cael_every, max_seq_length=max_seq_length, pooling=poolings[0]
    )
    return SentenceTransformer(modules=[twin], device=device)


def build_ensemble(models, combine: str = "concat", weights=None, device: str | None = None):
    """A ``SentenceTransformer`` whose only module is an :class:`~jtcse.modeling.ensemble.Ensemble` of ``models``.

    ``models``: ``SentenceTransformer`` objects or checkpoint paths/names, opened with
    :func:`jtcse.modeling.loading.load_model` as they encode (a twin as its towers' summed pooled vectors, a hub
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
