"""Choices made on labelled *selection* files (e.g. STS-B train and SICK train), never on the dev file that is
reported.

One rule (:func:`best_by_total`) makes every choice: the pipeline's twin learning-rate probe, its ensemble weights,
and the defaults measured by the studies in ``evaluation/studies/``. It maximises the mean Spearman over the selection
files; each file and each of its genres is reported, never a constraint. The one guard, no file below the starting
model's score on it, is applied to the models that ship (a default's students, ``floor``), not to a teacher on its
way to one: an ensemble or a probe twin is distilled afterwards, and a student can gain on a file its teacher lost
(``evaluation/DEFAULTS.md`` has a case).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from jtcse.errors import JTCSEError

logger = logging.getLogger(__name__)

MAX_SHARED_SELECTION = 0.01
"""Largest share of a selection file's pairs that may also be dev pairs (then dropped, with a warning): the
STS Benchmark repeats 11 of its 5,749 train pairs in dev, so STS-B train is a fair selection file for STS-B dev;
more than that means the selection file holds the reported data."""
WEIGHT_GRID = (0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)
"""The weights tried for the trained members of an ensemble with the starting model (whose weight is 1); the small
ones leave room for the guard (no selection file below the start) where a file the trained members lose on caps it."""

Key = TypeVar("Key", bound=Hashable)


def total(scores: Mapping[str, float]) -> float:
    """The mean Spearman over the selection files (``{file: Spearman}``): what every choice maximises."""
    if not scores:
        raise ValueError("no selection scores to average.")
    return sum(scores.values()) / len(scores)


def shortfall(scores: Mapping[str, float], floor: Mapping[str, float] | None) -> float:
    """How far the worst file of ``scores`` falls below ``floor`` (the starting model's score on each file): 0 when
    none does."""
    if floor is None:
        return 0.0
    return max([0.0, *(floor[name] - scores[name] for name in floor)])


def best_by_total(candidates: Mapping[Key, Mapping[str, float]], floor: Mapping[str, float] | None = None) -> Key:
    """The candidate (``{key: {file: Spearman}}``) with the highest mean over the selection files among those that
    score at least ``floor`` (the starting model's score) on every file; when none does, the one whose worst file
    falls least below it. Ties go to the first candidate."""
    if not candidates:
        raise ValueError("no candidates to choose from.")
    keys = list(candidates)
    for key in keys:
        if floor is not None and set(floor) - set(candidates[key]):
            raise ValueError(f"candidate {key!r} has no score on {sorted(set(floor) - set(candidates[key]))}.")
    return min(keys, key=lambda k: (shortfall(candidates[k], floor), -total(candidates[k])))


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


def selection_sets(selection_files: Sequence[str | Path], dev_file) -> dict[str, object]:
    """``{file: pairs}`` of every selection file (:func:`selection_pairs`: less the pairs the dev file has too), each
    read and checked now; a file given twice is an error."""
    seen: dict[Path, str] = {}
    for path in selection_files:
        resolved = Path(path).resolve()
        if resolved in seen:
            raise JTCSEError(f"the selection file {path} is given twice (also as {seen[resolved]}); give each once.")
        seen[resolved] = str(path)
    return {str(path): selection_pairs(path, dev_file) for path in selection_files}


def spearman_of(cosines, pairs) -> dict[str, float]:
    """``{"all": Spearman, genre: Spearman ...}`` of ``cosines`` against the gold scores of ``pairs``."""
    from jtcse.evaluation.sts import ALL_GENRES, spearman_by_genre

    genres = spearman_by_genre(cosines, pairs)
    return {"all": genres.pop(ALL_GENRES), **genres}


def encode_pairs(model, pairs):
    """``(firsts, seconds)``: ``model``'s embeddings of each pair's two sentences (each distinct sentence once)."""
    import numpy as np

    from jtcse.evaluation.sts import encode_unique

    table = encode_unique(model, pairs.sentences1 + pairs.sentences2)
    return np.stack([table[s] for s in pairs.sentences1]), np.stack([table[s] for s in pairs.sentences2])


def model_scores(model, selections: Mapping[str, object]) -> dict[str, dict[str, float]]:
    """``{file: {"all": Spearman, genre: ...}}`` of one ``model`` (a ``SentenceTransformer``) on the selection sets."""
    import numpy as np

    out = {}
    for name, pairs in selections.items():
        firsts, seconds = encode_pairs(model, pairs)
        unit = [x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12) for x in (firsts, seconds)]
        out[name] = spearman_of(np.einsum("pd,pd->p", *unit), pairs)
    return out


def overall(scores: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """``{file: Spearman over all its pairs}`` of per-file, per-genre ``scores``: what :func:`best_by_total` reads."""
    return {name: genres["all"] for name, genres in scores.items()}


def choose_weights(
    members: Sequence[str | Path],
    start_index: int,
    selections: Mapping[str, object],
    grid: Sequence[float] = WEIGHT_GRID,
    device=None,
    combine: str = "concat",
):
    """``(weights, {weight: {file: {"all": Spearman, genre: ...}}}, the start's {file: {...}})``: the weights of the
    ``combine`` ensemble of ``members`` with the best mean over the selection sets (``{file: pairs}``,
    :func:`best_by_total`), the member at ``start_index`` (the starting model) at 1 and every other member at one
    common weight from ``grid``; the start alone is scored too, for the report.

    Each member encodes each file's sentences once; every weight is then scored exactly as the ensemble embeds
    (:func:`ensemble_cosines`), so the weight chosen is the one the ensemble saved with it scores best with.
    """
    import numpy as np

    from jtcse.modeling.combine import check_combine
    from jtcse.modeling.loading import load_model

    check_combine(combine)
    encoded = {name: ([], []) for name in selections}
    for member in members:
        model = load_model(member, role="encode", device=device)
        for name, pairs in selections.items():
            firsts, seconds = encode_pairs(model, pairs)
            encoded[name][0].append(firsts)
            encoded[name][1].append(seconds)
    rows = [[1.0 if i == start_index else w for i in range(len(members))] for w in grid]
    rows.append([1.0 if i == start_index else 0.0 for i in range(len(members))])  # the start alone, reported
    scores: dict[float, dict] = {w: {} for w in grid}
    start: dict[str, dict[str, float]] = {}
    for name, pairs in selections.items():
        cosines = ensemble_cosines(*encoded[name], np.array(rows), combine)
        for w, cos in zip(grid, cosines, strict=False):
            scores[w][name] = spearman_of(cos, pairs)
        start[name] = spearman_of(cosines[-1], pairs)
    best = best_by_total({w: overall(s) for w, s in scores.items()})  # a teacher: the mean alone
    return [1.0 if i == start_index else best for i in range(len(members))], scores, start


def ensemble_cosines(firsts: Sequence, seconds: Sequence, weights, combine: str):
    """``(weight rows, pairs)`` cosines between the ensemble embeddings of each pair's two sentences, for every row
    of ``weights`` (one weight per member), from the members' embeddings of the first and second sentences
    (``firsts[i]``, ``seconds[i]``: member ``i``, one row per pair).

    The ensemble (:class:`~jtcse.modeling.ensemble.Ensemble`) embeds a sentence from its members' unit vectors
    ``n_i`` as ``Σ_i w_i n_i`` (sum) or ``[w_1 n_1, ..., w_k n_k]`` (concat). So with per-pair Gram terms
    ``G_ij = n_i(a)·n_j(b)`` (and ``A``, ``B`` for ``a`` and ``b`` with themselves) the cosine is
    ``wᵀGw / sqrt(wᵀAw · wᵀBw)``: every weight row scored at once, exactly. A concat's members fill their own
    coordinates, so only its ``i = j`` terms count: it is :func:`concat_cosine` of the members' own cosines.
    """
    import numpy as np

    def unit(x):
        x = np.asarray(x, dtype=np.float64)
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return x / np.where(norms == 0, 1, norms)  # a zero vector stays zero, as torch's normalize leaves it

    firsts, seconds = [unit(x) for x in firsts], [unit(x) for x in seconds]
    if combine == "concat":  # each member's own cosines are all it takes (concat_cosine)
        own = [np.einsum("pd,pd->p", a, b) for a, b in zip(firsts, seconds, strict=True)]
        return np.stack([concat_cosine(own, row) for row in np.asarray(weights, dtype=np.float64)])
    widths = {x.shape[1] for x in firsts}
    if len(widths) > 1:
        raise JTCSEError(f"Members of widths {sorted(widths)} cannot be summed; use combine='concat' instead.")
    count, rows = len(firsts), len(firsts[0])
    terms = [(i, j) for i in range(count) for j in range(count)]
    gram = np.zeros((3, count, count, rows))  # a·b, a·a, b·b per member pair (i, j) and sentence pair
    for i, j in terms:
        gram[:, i, j] = [
            np.einsum("pd,pd->p", firsts[i], seconds[j]),
            np.einsum("pd,pd->p", firsts[i], firsts[j]),
            np.einsum("pd,pd->p", seconds[i], seconds[j]),
        ]
    weights = np.asarray(weights, dtype=np.float64)
    cross, first, second = np.einsum("wi,gijp,wj->gwp", weights, gram, weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(cross / np.sqrt(first * second))
