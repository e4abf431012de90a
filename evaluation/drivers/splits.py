"""The selection split every choice is made on (a fixed random sample of STS-B *train*, never dev), and choosing
on it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def best_on_selection(rows: dict) -> object | None:
    """The key of ``rows`` (key -> row or ``None``) whose row scores best on the selection split; ``None``
    while any row is missing."""
    if not rows or any(row is None for row in rows.values()):
        return None
    return max(rows, key=lambda key: rows[key]["select_spearman"])


def selection_sample(data: Path, size: int):
    """``size`` pairs of ``stsbenchmark/sts-train.csv`` (all of them if fewer), drawn once with seed 0 and kept in
    file order: the sample ``evaluation/UCD.md`` chose on, and ``evaluation/DEFAULTS.md`` after it."""
    import numpy as np

    from jtcse.evaluation.sts import read_stsb_file

    train = read_stsb_file(data / "stsbenchmark" / "sts-train.csv")
    return train.take(np.sort(np.random.default_rng(0).choice(len(train), size=min(size, len(train)), replace=False)))


@dataclass(frozen=True)
class Splits:
    """STS-B dev and the selection split as ``evaluation/DEFAULTS.md`` scores them.

    ``dev``: the dev pairs (every k-th, all genres, when fewer are asked for); ``select``: the selection sample
    without the pairs dev repeats (STS-B train repeats 11 of dev's pairs, 3 of them in the sample), as the pipeline
    leaves them out; ``sample_keep``: for each pair of the sample, whether ``select`` kept it (cosines saved for
    the whole sample are cut to the split with it).
    """

    dev: object
    select: object
    sample_keep: object

    def selection_cosines(self, cos):
        """``cos`` over the selection split: cosines saved for the whole sample (before the pairs it shares with dev
        were left out) are cut to the split, others are returned as they are."""
        return cos[self.sample_keep] if len(cos) == len(self.sample_keep) != len(self.select) else cos


def dev_and_selection(data: Path, select_pairs: int, dev_pairs: int | None = None) -> Splits:
    """:class:`Splits` from the STS-B files in ``data``: ``select_pairs`` drawn by :func:`selection_sample`,
    ``dev_pairs`` (``None``: all) spread over dev."""
    import numpy as np

    from jtcse.evaluation.sts import pair_keys, read_stsb_file, without_pairs_of

    dev = read_stsb_file(data / "stsbenchmark" / "sts-dev.csv")
    sample = selection_sample(data, select_pairs)
    select, _ = without_pairs_of(sample, dev)
    dev_keys = set(pair_keys(dev))
    keep = np.array([key not in dev_keys for key in pair_keys(sample)])
    if dev_pairs:  # every k-th pair: all genres
        dev = dev.take(range(0, len(dev), len(dev) // dev_pairs))
    return Splits(dev, select, keep)
