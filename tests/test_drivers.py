"""The formula the reproduction drivers share with the pipeline: an ensemble's cosine from its members'
(jtcse.training.selection.concat_cosine)."""

from __future__ import annotations

import numpy as np
import pytest


def test_concat_cosine_is_the_cosine_of_the_weighted_concat_of_unit_vectors():
    from jtcse.training.selection import concat_cosine

    rng = np.random.default_rng(0)
    members = [rng.normal(size=(2, 5, width)) for width in (3, 4, 6)]  # (side of the pair, pair, width)
    unit = [m / np.linalg.norm(m, axis=-1, keepdims=True) for m in members]
    weights = [1.0, 0.5, 2.0]
    concat = np.concatenate([w * u for w, u in zip(weights, unit, strict=True)], axis=-1)
    expected = (concat[0] * concat[1]).sum(-1) / np.linalg.norm(concat[0], axis=-1) / np.linalg.norm(concat[1], axis=-1)
    own = [(u[0] * u[1]).sum(-1) for u in unit]
    np.testing.assert_allclose(concat_cosine(own, weights), expected, rtol=1e-12)
    np.testing.assert_allclose(concat_cosine(own[:1], [3.0]), own[0])  # one member: its own cosines
    with pytest.raises(ValueError):
        concat_cosine(own, weights[:2])
