"""Batches of about one length (``group_by_length``): every row once an epoch, far less padding than random batches,
a setting recorded only when on, and refused with the twin's batches of neighbours."""

from __future__ import annotations

import numpy as np
import pytest

from jtcse.errors import SettingError
from jtcse.training.length_batches import (
    LengthBatches,
    length_grouped_batches,
    padded_share,
    random_batches,
    token_lengths,
)


def test_the_padded_share_is_counted_by_hand():
    lengths = [2, 4, 4, 1]
    assert padded_share(lengths, [[0, 1], [2, 3]]) == pytest.approx(1 - 11 / 16)  # (2+4)/(2*4), (4+1)/(2*4)
    assert padded_share(lengths, [[1, 2], [0, 3]]) == pytest.approx(1 - 11 / 12)  # (4+4)/8, (2+1)/4
    assert padded_share(lengths, []) == 0.0


def test_length_grouped_batches_hold_every_row_once_and_pad_far_less():
    lengths = np.random.default_rng(0).integers(5, 33, size=1000).tolist()
    grouped = length_grouped_batches(lengths, 32, seed=1)
    assert sorted(i for batch in grouped for i in batch) == list(range(1000))
    assert all(len(batch) == 32 for batch in grouped[:-1])
    assert padded_share(lengths, grouped) < padded_share(lengths, random_batches(1000, 32, seed=1)) / 3
    assert length_grouped_batches(lengths, 32, seed=1) == grouped != length_grouped_batches(lengths, 32, seed=2)


def test_the_sampler_draws_other_batches_each_epoch_and_drops_a_short_last_one():
    from datasets import Dataset

    lengths = np.random.default_rng(0).integers(5, 33, size=100).tolist()
    dataset = Dataset.from_dict({"text": [f"s{i}" for i in range(100)]})
    sampler = LengthBatches(lengths)(dataset, batch_size=16, drop_last=True, seed=3)
    first = list(sampler)
    assert len(first) == len(sampler) == 6 and all(len(batch) == 16 for batch in first)
    assert len(set(i for batch in first for i in batch)) == 96
    sampler.set_epoch(1)
    assert list(sampler) != first
    keep = LengthBatches(lengths)(dataset, batch_size=16, drop_last=False, seed=3)
    assert len(keep) == 7 and sorted(i for batch in keep for i in batch) == list(range(100))
    assert repr(LengthBatches(lengths)) == "LengthBatches(100 rows)"
    with pytest.raises(ValueError, match="3 lengths for 100 rows"):
        LengthBatches([1, 2, 3])(dataset, batch_size=16, drop_last=False)


def test_token_lengths_count_special_tokens_and_stop_at_the_training_length(tiny_bert):
    from jtcse.modeling.loading import load_model

    tokenizer = load_model(tiny_bert).tokenizer
    text = "the cat sat on the mat"
    assert token_lengths(tokenizer, [text, " ".join([text] * 20)], 16) == [len(tokenizer(text)["input_ids"]), 16]


def test_group_by_length_is_recorded_only_when_on_and_not_with_batches_of_neighbours():
    from jtcse.training.settings import TrainingSettings, TwinSettings, WarmupSettings, recorded_settings

    assert "group_by_length" not in recorded_settings(WarmupSettings())  # a run made before it existed: the same
    grouped = WarmupSettings().replace(training=TrainingSettings(group_by_length=True))
    assert recorded_settings(grouped)["group_by_length"] is True
    with pytest.raises(SettingError, match=r"hard_negatives and group_by_length each decide what a batch holds"):
        TwinSettings().replace(training=TwinSettings().training.replace(group_by_length=True))
    twin = TwinSettings(hard_negatives=False, training=TwinSettings().training.replace(group_by_length=True))
    assert recorded_settings(twin)["group_by_length"] is True


@pytest.mark.slow
def test_a_warm_up_trains_on_batches_of_one_length(tiny_bert, tmp_path):
    from transformers import TrainerCallback

    from jtcse.training.simcse import train_simcse

    seen = []

    class Batches(TrainerCallback):
        def on_train_begin(self, args, state, control, train_dataloader=None, **kwargs):
            seen.extend(train_dataloader.batch_sampler)

    words = np.random.default_rng(0).integers(1, 40, size=256)
    sentences = [" ".join([f"w{i}"] + ["word"] * (n - 1)) for i, n in enumerate(words)]  # distinct, of n words
    summary = train_simcse(tiny_bert, sentences, tmp_path / "run", batch_size=8, max_steps=2, max_seq_length=64,
                           group_by_length=True, callbacks=[Batches()])  # fmt: skip
    assert summary["config"]["group_by_length"] is True
    assert sorted(i for batch in seen for i in batch) == list(range(256))
    assert padded_share(words, seen) < padded_share(words, random_batches(256, 8, seed=0)) / 3
