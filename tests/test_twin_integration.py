"""A saved twin checkpoint flows through the other stages: evaluation loading and per-tower diagnostics."""

from __future__ import annotations

import numpy as np
import pytest

SENTENCES = ["A man plays a guitar.", "Two dogs run in the snow.", "It rains.", "The market fell sharply today."]


@pytest.mark.slow
def test_eval_loader_opens_a_twin_and_encodes_the_same(twin_dir):
    from jtcse.modeling.loading import load_model

    reference = load_model(twin_dir).encode(SENTENCES, convert_to_numpy=True)
    loaded = load_model(twin_dir, max_seq_length=32)
    np.testing.assert_allclose(loaded.encode(SENTENCES, convert_to_numpy=True), reference, atol=1e-5)


@pytest.mark.slow  # layer statistics of both towers
def test_diagnostics_inspect_each_tower_of_a_real_twin(twin_dir):
    from jtcse.evaluation.diagnostics import encoders_of, layer_statistics
    from jtcse.modeling.loading import load_model

    model = load_model(twin_dir)
    encoders = encoders_of(model)
    assert len(encoders) == 2
    stats = [layer_statistics(encoder, SENTENCES) for encoder in encoders]
    assert len(stats[0].cls_energy) == len(stats[1].cls_energy) == 5  # embeddings + 4 layers
    assert stats[0].cls_energy != stats[1].cls_energy  # different weights, inspected separately


def test_plain_sentence_transformers_names_the_flag_it_needs(twin_dir):
    """Without jtcse's loader, sentence-transformers >= 6 asks for trust_remote_code (documented)."""
    from sentence_transformers import SentenceTransformer

    with pytest.raises(ValueError, match="trust_remote_code"):
        SentenceTransformer(twin_dir)
    model = SentenceTransformer(twin_dir, trust_remote_code=True)
    assert model.encode(SENTENCES[:1]).shape == (1, 32)
