"""Choices made on labelled *selection* inputs (e.g. STS-B train, SICK train, TREC's train split, STS-B train read
as retrieval), never on the dev file that is reported.

A selection input is anything ``jtcse eval mteb --local-task`` takes (``PATH`` or ``TYPE:PATH``: an STS file, a
classification folder or file, a BEIR folder, ``retrieval-pairs:FILE``), scored by mteb's own evaluator
(:mod:`jtcse.evaluation.selection_scoring`; a classification set on its train split alone). Each input's main score
is a fraction (Spearman, accuracy, nDCG@10), and each input counts equally.

One rule (:func:`best_by_total`) makes every choice among candidates scored once: the pipeline's twin learning-rate
probe, its ensemble weights, and the defaults measured by the studies in ``evaluation/studies/``. It maximises the
mean main score over the selection inputs; each input (and each genre of an STS file) is reported, never a
constraint. The one guard, no input below the starting model's score on it, is applied to the models that ship (a
default's students, ``floor``), not to a teacher on its way to one: an ensemble or a probe twin is distilled
afterwards, and a student can gain on an input its teacher lost (``evaluation/DEFAULTS.md`` has a case).

A default changes on paired evidence (:func:`paired_difference`, :func:`paired_choice`): a candidate and the row to
beat scored at the same seeds, the candidate replacing the row when its mean paired difference on the selection
total exceeds twice the paired standard error; otherwise the cheaper row stays. :func:`shares_kept` says how much of
its teacher's gain over the start a student keeps.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
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
REPLACE_AT = 2.0
"""How many paired standard errors a candidate's mean paired difference must exceed to replace the row to beat."""

Key = TypeVar("Key", bound=Hashable)


def total(scores: Mapping[str, float]) -> float:
    """The mean main score over the selection inputs (``{input: score}``, each a fraction): what every choice
    maximises."""
    if not scores:
        raise ValueError("no selection scores to average.")
    return sum(scores.values()) / len(scores)


def shortfall(scores: Mapping[str, float], floor: Mapping[str, float] | None) -> float:
    """How far the worst input of ``scores`` falls below ``floor`` (the starting model's score on each): 0 when
    none does."""
    if floor is None:
        return 0.0
    return max([0.0, *(floor[name] - scores[name] for name in floor)])


def best_by_total(candidates: Mapping[Key, Mapping[str, float]], floor: Mapping[str, float] | None = None) -> Key:
    """The candidate (``{key: {input: score}}``) with the highest mean over the selection inputs among those that
    score at least ``floor`` (the starting model's score) on every input; when none does, the one whose worst input
    falls least below it. Ties go to the first candidate."""
    if not candidates:
        raise ValueError("no candidates to choose from.")
    keys = list(candidates)
    for key in keys:
        if floor is not None and set(floor) - set(candidates[key]):
            raise ValueError(f"candidate {key!r} has no score on {sorted(set(floor) - set(candidates[key]))}.")
    return min(keys, key=lambda k: (shortfall(candidates[k], floor), -total(candidates[k])))


def selection_pairs(selection_file, dev_file):
    """The labelled pairs of the STS file ``selection_file`` to choose on (an :class:`~jtcse.evaluation.sts.STSPairs`;
    either layout, :func:`~jtcse.evaluation.selection_scoring.read_sts_file`), without the pairs the dev file has
    too (in either order). A few shared pairs (at most :data:`MAX_SHARED_SELECTION` of the file) are dropped with a
    warning; more is an error: a choice made on it would be made on what is reported."""
    from jtcse.evaluation.selection_scoring import read_sts_file
    from jtcse.evaluation.sts import read_sts_input, without_pairs_of

    selection = read_sts_file(Path(selection_file))  # a missing or malformed file is its own one-line error
    if dev_file is None:
        return selection
    kept, shared = without_pairs_of(selection, read_sts_input(dev_file))
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


def _check_not_dev(spec, path: Path, dev_file) -> None:
    """A selection input other than an STS file must not be the dev file (by path, or a copy of its bytes)."""
    if dev_file is None or not path.is_file():
        return
    dev = Path(dev_file)
    if path.resolve() == dev.resolve() or (dev.is_file() and path.read_bytes() == dev.read_bytes()):
        raise JTCSEError(f"the selection input {spec} is the dev file {dev_file}; choose on data that is not reported.")


def selection_input(spec: str | Path, dev_file=None):
    """One selection input (:class:`~jtcse.evaluation.selection_scoring.SelectionInput`) of ``PATH`` or
    ``TYPE:PATH``, read and checked now: an STS file's pairs less the dev file's (:func:`selection_pairs`), scores
    to correlate with (not all one); any
    other kind, not the dev file, as its mteb task (a classification set's train split alone, divided:
    :func:`~jtcse.evaluation.selection_scoring.train_split_only`)."""
    from jtcse.evaluation.mteb_local_tasks import local_sts_task
    from jtcse.evaluation.selection_scoring import SelectionInput, choosing_task, input_kind
    from jtcse.evaluation.sts import check_correlatable

    kind, path = input_kind(spec)
    if kind == "sts":
        pairs = selection_pairs(path, dev_file)
        check_correlatable(pairs, spec)  # before mteb is imported: a bad file costs nothing
        return SelectionInput(str(spec), kind, path, local_sts_task(path), pairs)
    _check_not_dev(spec, path, dev_file)
    return SelectionInput(str(spec), kind, path, choosing_task(kind, path))


def selection_sets(selection_files: Sequence[str | Path], dev_file) -> dict[str, object]:
    """``{spec: input}`` of every selection input (:func:`selection_input`), each read and checked now; one given
    twice (the same kind of the same path) is an error."""
    from jtcse.evaluation.selection_scoring import input_kind
    from jtcse.text_inputs import input_name

    seen: dict[tuple[str, str], str] = {}
    for spec in selection_files:
        kind, path = input_kind(spec)
        key = (kind, input_name(path))
        if key in seen:
            raise JTCSEError(f"the selection file {spec} is given twice (also as {seen[key]}); give each once.")
        seen[key] = str(spec)
    return {str(spec): selection_input(spec, dev_file) for spec in selection_files}


def selection_fingerprint(spec: str | Path) -> str:
    """``sha256:<16 hex digits>`` of a selection input's kind and content (:func:`jtcse.output_paths.fingerprint`, the
    one fingerprint of every input: a file's bytes, a folder's files by name and content): how a stage records what
    it chose or scored on, so an input edited in place is another input."""
    import hashlib

    from jtcse.evaluation.selection_scoring import input_kind
    from jtcse.output_paths import fingerprint

    kind, path = input_kind(spec)
    return "sha256:" + hashlib.sha256(f"{kind}\n{fingerprint(path)}".encode()).hexdigest()[:16]


def selection_scores(model, selections: Mapping[str, object], device=None) -> dict[str, dict[str, float]]:
    """``{spec: {"all": main score, ...}}`` of one model on the selection inputs (:func:`selection_sets`): an STS
    file's Spearman over all its pairs and per genre, any other input's main score (fractions); each text encoded
    once. ``model``: a ``SentenceTransformer``, or a path or Hub name (``None``: the embedded MiniLM) loaded as
    ``jtcse eval mteb`` loads it (at the checkpoint's own length), so the scores are its scores."""
    from jtcse.evaluation.selection_scoring import CachedEncoder, score_inputs
    from jtcse.modeling.loading import load_model

    if model is None or isinstance(model, (str, Path)):
        model = load_model(model, role="encode", device=device)
    return score_inputs(CachedEncoder(model), selections)


def overall(scores: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """``{input: main score}`` of per-input ``scores`` (``{input: {"all": ..., genre: ...}}``): what
    :func:`best_by_total` reads."""
    return {name: genres["all"] for name, genres in scores.items()}


def choose_weights(
    members: Sequence[str | Path],
    start_index: int,
    selections: Mapping[str, object],
    grid: Sequence[float] = WEIGHT_GRID,
    device=None,
    combine: str = "concat",
):
    """``(weights, {weight: {input: {"all": score, ...}}}, the start's {input: {...}})``: the weights of the
    ``combine`` ensemble of ``members`` with the best mean over the selection inputs (``{spec: input}``,
    :func:`best_by_total`), the member at ``start_index`` (the starting model) at 1 and every other member at one
    common weight from ``grid``; the start alone is scored too, for the report.

    Each member encodes each input's texts once; every weight is then scored from those vectors exactly as the
    ensemble embeds (:class:`~jtcse.evaluation.selection_scoring.EnsembleEncoder`), so the weight chosen is the one
    the ensemble saved with it scores best with.
    """
    from jtcse.evaluation.selection_scoring import CachedEncoder, EnsembleEncoder, score_inputs
    from jtcse.modeling.combine import check_combine
    from jtcse.modeling.loading import load_model

    check_combine(combine)
    encoders = [CachedEncoder(load_model(member, role="encode", device=device)) for member in members]
    rows = {w: [1.0 if i == start_index else w for i in range(len(members))] for w in grid}
    scores = {w: score_inputs(EnsembleEncoder(encoders, row, combine), selections) for w, row in rows.items()}
    start = score_inputs(encoders[start_index], selections)  # the start alone, as it encodes: reported
    best = best_by_total({w: overall(s) for w, s in scores.items()})  # a teacher: the mean alone
    return rows[best], scores, start


# ---------------------------------------------------------------------------------------------------- paired rules
@dataclass(frozen=True)
class PairedDifference:
    """A candidate's selection total minus the row to beat's, seed by seed: the ``mean`` of the ``n`` differences
    and its ``stderr`` (their standard deviation, ddof=1, over sqrt(n); NaN from one seed, which decides nothing)."""

    mean: float
    stderr: float
    n: int

    @property
    def beats(self) -> bool:
        """The candidate beats the row: its mean exceeds :data:`REPLACE_AT` paired standard errors."""
        return not math.isnan(self.stderr) and self.mean > REPLACE_AT * self.stderr

    @property
    def loses(self) -> bool:
        """The row beats the candidate by the same rule."""
        return not math.isnan(self.stderr) and -self.mean > REPLACE_AT * self.stderr


def paired_difference(
    candidate: Mapping[Hashable, Mapping[str, float]], row_to_beat: Mapping[Hashable, Mapping[str, float]]
) -> PairedDifference:
    """The paired difference of ``candidate`` over ``row_to_beat``, each ``{seed: {input: score}}`` scored at the
    same seeds on the same inputs: per seed, :func:`total` of the candidate minus the row's."""
    import numpy as np

    if not row_to_beat or set(candidate) != set(row_to_beat):
        raise ValueError(
            f"a paired difference needs scores at the same seeds: the candidate has {sorted(candidate, key=str)}, "
            f"the row to beat {sorted(row_to_beat, key=str)}."
        )
    for seed in row_to_beat:
        if set(candidate[seed]) != set(row_to_beat[seed]):
            raise ValueError(f"seed {seed!r}: the candidate and the row to beat were scored on other inputs.")
    differences = np.array([total(candidate[seed]) - total(row_to_beat[seed]) for seed in row_to_beat])
    n = len(differences)
    stderr = float(differences.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
    return PairedDifference(float(differences.mean()), stderr, n)


def paired_choice(
    scores: Mapping[Key, Mapping[Hashable, Mapping[str, float]]],
    candidate: Key,
    row_to_beat: Key,
    cost: Mapping[Key, float],
) -> Key:
    """The row that stays of ``candidate`` and ``row_to_beat`` (``scores``: ``{row: {seed: {input: score}}}``;
    ``cost``: each row's cost, e.g. CPU seconds): the candidate when it beats the row by the paired rule
    (:attr:`PairedDifference.beats`), the row when the row beats it so, otherwise the cheaper of the two (the row to
    beat at an equal cost)."""
    difference = paired_difference(scores[candidate], scores[row_to_beat])
    if difference.beats:
        return candidate
    if difference.loses:
        return row_to_beat
    return candidate if cost[candidate] < cost[row_to_beat] else row_to_beat


def share_kept(student: float, teacher: float, start: float) -> float | None:
    """``(student − start) / (teacher − start)``: the share of its teacher's gain over the start a student keeps
    (1: all of it; above 1: more; below 0: the student fell below the start). ``None`` where the teacher does not
    gain (``teacher <= start``): there is no gain to keep, and the student's own difference is what to read."""
    gain = teacher - start
    return (student - start) / gain if gain > 0 else None


def shares_kept(
    student: Mapping[str, float], teacher: Mapping[str, float], start: Mapping[str, float]
) -> dict[str, object]:
    """:func:`share_kept` on each input and on the total (``{input: score}`` each, on the same inputs):
    ``{"inputs": {input: share or None}, "total": share or None}``."""
    if not set(student) == set(teacher) == set(start):
        raise ValueError("the student, the teacher and the start must be scored on the same inputs.")
    return {
        "inputs": {name: share_kept(student[name], teacher[name], start[name]) for name in start},
        "total": share_kept(total(student), total(teacher), total(start)),
    }
