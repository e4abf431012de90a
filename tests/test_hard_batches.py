"""Batches of neighbours (jtcse/training/hard_batches.py): close rows share a batch, paraphrases never do, every row
is in one batch; the sampler makes each group a batch, in an order drawn anew each epoch; a twin trains on them."""

from __future__ import annotations

import numpy as np
import pytest

from jtcse.training.hard_batches import GroupBatchSampler, group_labels, neighbour_groups


def _clusters(seed=0):
    """Four tight clusters of 8 rows each around orthogonal directions, no two rows alike."""
    rng = np.random.default_rng(seed)
    centres = np.eye(16)[:4] * 10
    return np.concatenate([c + rng.normal(0, 1, (8, 16)) for c in centres]), np.repeat(np.arange(4), 8)


def _cos(x):
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return x @ x.T


def test_neighbours_share_a_batch_and_paraphrases_do_not():
    vectors, cluster = _clusters()
    groups = neighbour_groups(vectors, 8, threshold=0.999, seed=1)
    assert sorted(i for g in groups for i in g) == list(range(32)) and all(len(g) == 8 for g in groups)
    assert all(len(set(cluster[g])) == 1 for g in groups)  # each batch one cluster: its negatives are the hard ones
    assert neighbour_groups(vectors, 8, 0.999, seed=1) == groups  # the seed decides, again alike
    cos = _cos(vectors)
    strict = neighbour_groups(vectors, 8, threshold=0.9, seed=1)  # rows this close count as paraphrases
    close = [i for i, g in enumerate(strict) if (cos[np.ix_(g, g)][~np.eye(len(g), dtype=bool)] >= 0.9).any()]
    assert close == list(range(len(strict) - len(close), len(strict)))  # only the leftovers' mixed batches, last
    assert len(close) < len(strict)
    assert sorted(i for g in strict for i in g) == list(range(32))
    assert group_labels([[2, 0], [1]], 3) == [0, 1, 0]


def test_the_sampler_makes_each_group_a_batch_in_an_order_of_the_epoch():
    from datasets import Dataset

    data = Dataset.from_dict({"text": [f"s{i}" for i in range(10)], "label": [0, 0, 1, 1, 2, 2, 3, 3, 4, 5]})
    sampler = GroupBatchSampler(data, 2, drop_last=True, seed=3)
    first = list(sampler)
    assert len(sampler) == 4 and sorted(map(sorted, first)) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    sampler.set_epoch(1)
    orders = {tuple(map(tuple, first)), tuple(map(tuple, sampler))}
    sampler.set_epoch(2)
    orders.add(tuple(map(tuple, sampler)))
    assert len(orders) > 1  # another epoch, another order
    assert len(GroupBatchSampler(data, 2, drop_last=False, seed=3)) == 6  # the short groups kept


@pytest.mark.slow
def test_a_twin_trains_on_batches_of_neighbours(tiny_bert, tiny_bert_b, tmp_path):
    from jtcse.defaults import default_corpus_sentences
    from jtcse.training.twin import train_twin

    seen = []

    from transformers import TrainerCallback

    class Batches(TrainerCallback):
        def on_train_begin(self, args, state, control, train_dataloader=None, **kwargs):
            seen.append(type(train_dataloader.batch_sampler).__name__)

    summary = train_twin(tiny_bert, tiny_bert_b, default_corpus_sentences(limit=40), tmp_path / "twin", max_steps=2,
                         batch_size=8, hard_negatives=True, paraphrase_threshold=0.99, callbacks=[Batches()],
                         show_progress=False, plot=False)  # fmt: skip
    assert summary["steps"] == 2 and summary["data"]["hard_negative_batches"] == 5
    assert summary["config"]["hard_negatives"] is True and seen == ["GroupBatchSampler"]
