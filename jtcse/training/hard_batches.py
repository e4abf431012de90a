"""Batches of neighbours: hard in-batch negatives for a twin whose towers already tell random sentences apart.

A guide model (the twin's tower I as training starts) embeds the corpus once; each batch then gathers a sentence
and its nearest neighbours, so every sentence's in-batch negatives are the ones it is most easily confused with.
A neighbour the guide scores as a paraphrase of one already in the batch (cosine at or above ``threshold``) is kept
out of that batch: a paraphrase as a negative would teach the twin to push apart what means the same (the guide's
role in sentence-transformers' ``GISTEmbedLoss``). The nearest neighbours come from
``sentence_transformers.util.semantic_search``.

The groups ride along the training data as its ``label`` column, which the twin's losses do not read, and
:class:`GroupBatchSampler` makes each group one batch, in an order drawn anew each epoch from the seed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from sentence_transformers.base.sampler import DefaultBatchSampler

GROUP_COLUMN = "label"
"""The training data's column holding each sentence's group (the collator keeps a ``label`` out of the inputs)."""


def neighbour_groups(embeddings: np.ndarray, batch_size: int, threshold: float, seed: int) -> list[list[int]]:
    """Rows of ``embeddings`` in groups of ``batch_size`` (the last ones may be mixed, and shorter): taking the rows
    in an order drawn from ``seed``, each unplaced row starts a group and its nearest unplaced rows fill it, except a
    row at cosine ``threshold`` or more to one already in the group. Every row is in exactly one group."""
    import torch
    from sentence_transformers.util import semantic_search

    vectors = torch.nn.functional.normalize(torch.as_tensor(np.asarray(embeddings, dtype=np.float32)), dim=1)
    count = len(vectors)
    hits = semantic_search(vectors, vectors, top_k=min(count, 4 * batch_size))
    placed = np.zeros(count, dtype=bool)
    groups: list[list[int]] = []
    for start in np.random.default_rng(seed).permutation(count):
        if placed[start]:
            continue
        group = [int(start)]
        placed[start] = True
        for hit in hits[start]:
            candidate = hit["corpus_id"]
            if len(group) == batch_size:
                break
            if placed[candidate] or bool((vectors[group] @ vectors[candidate] >= threshold).any()):
                continue
            group.append(candidate)
            placed[candidate] = True
        groups.append(group)
    full = [g for g in groups if len(g) == batch_size]
    rest = [i for g in groups if len(g) < batch_size for i in g]  # the leftovers, mixed in the batches they fill
    return full + [rest[i : i + batch_size] for i in range(0, len(rest), batch_size)]


def group_labels(groups: Sequence[Sequence[int]], count: int) -> list[int]:
    """Each of ``count`` rows' group number: the training data's ``label`` column."""
    labels = [-1] * count
    for number, group in enumerate(groups):
        for row in group:
            labels[row] = number
    return labels


class GroupBatchSampler(DefaultBatchSampler):
    """One batch a group of the data's ``label`` column (:func:`neighbour_groups`), the groups in an order drawn
    from the seed and the epoch; a short last group is dropped with ``drop_last``. Pass the class as the trainer's
    ``batch_sampler``."""

    def __init__(self, dataset, batch_size: int, drop_last: bool, valid_label_columns=None, generator=None, seed=0):
        super().__init__(dataset, batch_size, drop_last, valid_label_columns, generator, seed)
        members: dict[int, list[int]] = {}
        for row, group in enumerate(dataset[GROUP_COLUMN]):
            members.setdefault(int(group), []).append(row)
        self.groups = [g for g in members.values() if len(g) == batch_size or not drop_last]

    def __len__(self) -> int:
        return len(self.groups)

    def __iter__(self) -> Iterator[list[int]]:
        order = np.random.default_rng([self.seed, getattr(self, "epoch", 0)]).permutation(len(self.groups))
        for index in order:
            yield list(self.groups[index])
