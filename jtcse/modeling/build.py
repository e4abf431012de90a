"""Build a JTCSE twin ``SentenceTransformer`` from two tower checkpoints."""

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
