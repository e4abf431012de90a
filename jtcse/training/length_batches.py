"""Batches of sentences of about one length: less padding, the ``group_by_length`` training setting.

A batch is padded to its longest sentence, so random batches of short and long sentences spend much of their
compute on padding (:func:`padded_share` measures it; ``scripts/bench_pipeline.py`` prints it). The HF Trainer's
``group_by_length`` orders the data by ``transformers.trainer_pt_utils.get_length_grouped_indices``: a random
permutation cut into mega-batches of 50 batches, each sorted by length, the longest batch first; consecutive
slices of that order are the batches. sentence-transformers' trainer draws its batches from a batch sampler
instead, and has none that groups by length, so :class:`LengthGroupedBatchSampler` takes that order into one
(its lengths: the tokens of the data's first text column, :func:`token_lengths`). Grouping changes which sentences
are each other's in-batch negatives (all of about one length), which may change quality either way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from sentence_transformers.base.sampler import DefaultBatchSampler


def token_lengths(tokenizer, texts: Sequence[str], max_length: int, chunk: int = 4096) -> list[int]:
    """How many tokens each of ``texts`` is in training: its token count (special tokens included) up to
    ``max_length``, where it is truncated."""
    lengths: list[int] = []
    for start in range(0, len(texts), chunk):
        ids = tokenizer(list(texts[start : start + chunk]), truncation=True, max_length=max_length)["input_ids"]
        lengths.extend(len(row) for row in ids)
    return lengths


def padded_share(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> float:
    """The share of padding among the tokens ``batches`` (rows of ``lengths``) compute on, each batch padded to its
    longest row: 1 - real tokens / (rows × longest row), over all batches."""
    lengths = np.asarray(lengths)
    padded = sum(len(batch) * int(lengths[list(batch)].max()) for batch in batches if len(batch))
    real = sum(int(lengths[list(batch)].sum()) for batch in batches)
    return 1.0 - real / padded if padded else 0.0


def random_batches(count: int, batch_size: int, seed: int) -> list[list[int]]:
    """``count`` rows in random batches of ``batch_size`` (the last one shorter): the batches a trainer draws."""
    order = np.random.default_rng(seed).permutation(count)
    return [order[i : i + batch_size].tolist() for i in range(0, count, batch_size)]


def length_grouped_batches(lengths: Sequence[int], batch_size: int, seed: int) -> list[list[int]]:
    """The rows in batches of about one length: the HF Trainer's ``group_by_length`` order
    (``get_length_grouped_indices``, drawn from ``seed``) cut into batches of ``batch_size``."""
    import torch
    from transformers.trainer_pt_utils import get_length_grouped_indices

    generator = torch.Generator().manual_seed(int(seed))
    order = get_length_grouped_indices(list(lengths), batch_size, generator=generator)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


class LengthGroupedBatchSampler(DefaultBatchSampler):
    """Batches of about one length (:func:`length_grouped_batches`), drawn anew each epoch from the seed and the
    epoch, in a random order of batches; a short last batch is dropped with ``drop_last``. Built by
    :class:`LengthBatches`, which knows the lengths."""

    def __init__(
        self,
        dataset,
        batch_size: int,
        drop_last: bool,
        valid_label_columns=None,
        generator=None,
        seed: int = 0,
        *,
        lengths: Sequence[int] = (),
    ) -> None:
        super().__init__(dataset, batch_size, drop_last, valid_label_columns, generator, seed)
        if len(lengths) != len(dataset):
            raise ValueError(f"{len(lengths)} lengths for {len(dataset)} rows")
        self.lengths = list(lengths)

    def _batches(self) -> list[list[int]]:
        rng = np.random.default_rng([self.seed, getattr(self, "epoch", 0)])
        batches = length_grouped_batches(self.lengths, self.batch_size, int(rng.integers(2**62)))
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches = batches[:-1]
        return [batches[i] for i in rng.permutation(len(batches))]  # not the longest first every epoch

    def __len__(self) -> int:
        full, rest = divmod(len(self.lengths), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self) -> Iterator[list[int]]:
        yield from self._batches()


class LengthBatches:
    """The trainer's ``batch_sampler`` for ``group_by_length``: the trainer calls it with its dataset and batch
    settings, and it returns a :class:`LengthGroupedBatchSampler` over ``lengths`` (one a row, :func:`token_lengths`)."""

    def __init__(self, lengths: Sequence[int]) -> None:
        self.lengths = list(lengths)

    def __call__(self, dataset, batch_size, drop_last, valid_label_columns=None, generator=None, seed=0):
        return LengthGroupedBatchSampler(
            dataset, batch_size, drop_last, valid_label_columns, generator, seed, lengths=self.lengths
        )

    def __repr__(self) -> str:
        return f"LengthBatches({len(self.lengths)} rows)"
