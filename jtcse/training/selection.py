"""Choices made on a labelled *selection* file (e.g. STS-B train), never on the dev file that is reported.

The pipeline's twin learning-rate probe and its ensemble weights are chosen here (``evaluation/DEFAULTS.md``
measured the same rules with ``evaluation/drivers/repro_default.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from jtcse.errors import JTCSEError

logger = logging.getLogger(__name__)

MAX_SHARED_SELECTION = 0.01
"""Largest share of a selection file's pairs that may also be dev pairs (then dropped, with a warning): the
STS Benchmark repeats 11 of its 5,749 train pairs in dev, so STS-B train is a fair selection file for STS-B dev;
more than that means the selection file holds the reported data."""
WEIGHT_GRID = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)
"""The weights tried for the trained members of an ensemble with the starting model (whose weight is 1)."""


def selection_pairs(selection_file, dev_file):
    """The labelled pairs of ``selection_file`` to choose on (an :class:`~jtcse.evaluation.sts.STSPairs`), without
    the pairs the dev file has too (in either order). A few shared pairs (at most :data:`MAX_SHARED_SELECTION`
    of the file) are dropped with a warning; more is an error: a choice made on it would be made on what is
    reported."""
    from jtcse.evaluation.sts import read_stsb_file, without_pairs_of

    selection = read_stsb_file(selection_file)  # a missing or malformed file is its own one-line error
    if dev_file is None:
        return selection
    kept, shared = without_pairs_of(selection, read_stsb_file(dev_file))
    if shared > MAX_SHARED_SELECTION * len(selection):
        raise JTCSEError(
            f"the selection file {selection_file} shares {shared} of its {len(selection)} sentence pairs with the dev "
            f"file {dev_file}; choose on data that is not reported (e.g. STS-B train for STS-B dev)."
        )
    if shared:
        logger.warning(
            "%d of the %d pairs of the selection file %s are also in the dev file %s; they are left out of "
            "every choice.",
            shared,
            len(selection),
            selection_file,
            dev_file,
        )
    return kept


def concat_cosine(cosines: Sequence, weights: Sequence[float]):
    """The cosines of the concat of L2-normalised members weighted ``weights``, from each member's own ``cosines``
    (arrays over the same pairs): ``cos = Σ w_i² cos_i / Σ w_i²``, exact without encoding anything again."""
    total = sum(w * w for w in weights)
    return sum(w * w * c for w, c in zip(weights, cosines, strict=True)) / total


def choose_weights(
    members: Sequence[str | Path], start_index: int, pairs, grid: Sequence[float] = WEIGHT_GRID, device=None
):
    """``(weights, {weight: Spearman})``: the concat-ensemble weights of ``members`` best on ``pairs``, the member at
    ``start_index`` (the starting model) at 1 and every other member at one common weight from ``grid``.

    A concat of L2-normalised members has ``cos = Σ w_i² cos_i / Σ w_i²``, so each member encodes the pairs once
    and every weight is scored exactly from the members' cosines.
    """
    from scipy.stats import spearmanr

    from jtcse.evaluation.sts import encode_unique, paired_cosine
    from jtcse.modeling.loading import load_model

    sentences = pairs.sentences1 + pairs.sentences2
    cosines = [
        paired_cosine(encode_unique(load_model(m, role="encode", device=device), sentences), pairs) for m in members
    ]
    scores = {}
    for w in grid:
        weights = [1.0 if i == start_index else w for i in range(len(members))]
        scores[w] = float(spearmanr(concat_cosine(cosines, weights), pairs.scores).statistic)
    best = max(grid, key=lambda w: scores[w])
    return [1.0 if i == start_index else best for i in range(len(members))], scores
