"""Choices made from rows: a study's ``[choices.NAME]`` and an ensemble row's weights.

A choice weighs options, each a list of rows (one a seed, or one), by a rule: every rule maximises the mean over the
study's ``selection`` splits of each split's mean over the seeds (:func:`jtcse.training.selection.best_by_total`,
the pipeline's rule); ``floor`` keeps to the options with no split below the study's ``start`` row, ``genre_safe``
to those whose every selection genre, in every seed, is at least the start's less ``margin``. With ``keep``, the
option named there stays unless the winner beats it on the same seeds by more than twice the standard error of the
paired differences (:func:`paired`). A study module may define rules of its own under new names.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Hashable, Mapping

from evaluation.scoring import main_score
from evaluation.study import Scope, Waiting
from jtcse.training.selection import PairedDifference, best_by_total, paired_difference


def means(rows: list[dict], splits: list[str]) -> dict[str, float]:
    """Each split's main score, the mean over ``rows``."""
    return {split: statistics.fmean(main_score(row, split) for row in rows) for split in splits}


def total(row: dict, splits: list[str]) -> float:
    """A row's mean main score over ``splits``."""
    return statistics.fmean(main_score(row, split) for split in splits)


def worst_genre(rows: list[dict], start: dict, splits: list[str]) -> float:
    """How far the worst genre of the ``splits`` (an STS split's genres; another split is one), in the worst of
    ``rows``, lies above the start's (below: < 0)."""
    genres = lambda row, split: row.get(f"{split}_genres", {"all": main_score(row, split)})  # noqa: E731
    return min(genres(r, s)[genre] - value for r in rows for s in splits for genre, value in genres(start, s).items())


def paired(rows: list[dict], base: list[dict], splits: list[str]) -> PairedDifference:
    """The paired difference of the selection total, ``rows`` less ``base`` (the same seeds in the same order):
    :func:`jtcse.training.selection.paired_difference` (its standard error NaN for one seed)."""
    return paired_difference(*({i: means([r], splits) for i, r in enumerate(side)} for side in (rows, base)))


def best(options: Mapping[Hashable, list[dict]], scope: Scope, spec: Mapping) -> Hashable:
    """The best mean over the selection splits."""
    return best_by_total({key: means(rows, scope.study.selection) for key, rows in options.items()})


def floor(options: Mapping[Hashable, list[dict]], scope: Scope, spec: Mapping) -> Hashable:
    """The best mean among the options with no selection split below the start's; else the least below."""
    splits = scope.study.selection
    start = means([scope.rows[scope.study.get("start")]], splits)
    return best_by_total({key: means(rows, splits) for key, rows in options.items()}, start)


def genre_safe(options: Mapping[Hashable, list[dict]], scope: Scope, spec: Mapping) -> Hashable:
    """The best mean among the options keeping every selection genre within ``margin`` (default 0) of the start's
    in every seed; else (``fallback``) the best mean, or with ``"least_worst"`` the option whose worst genre falls
    least."""
    splits, start = scope.study.selection, scope.rows[scope.study.get("start")]
    worst = {key: worst_genre(rows, start, splits) for key, rows in options.items()}
    safe = {key: means(rows, splits) for key, rows in options.items() if worst[key] >= -spec.get("margin", 0.0)}
    if safe:
        return best_by_total(safe)
    if spec.get("fallback", "best") == "least_worst":
        return max(worst, key=worst.get)
    return best(options, scope, spec)


def rule(scope: Scope, name: str):
    """The rule ``name``: the study module's, else this module's."""
    found = scope.study.hook(name, sys.modules[__name__])
    if found is None:
        raise ValueError(f"{scope.study.path}: no choice rule {name!r}")
    return found


def choose(options: Mapping[Hashable, list[dict]], scope: Scope, spec: Mapping) -> Hashable:
    """The key of ``options`` (key -> rows) chosen by ``spec``'s ``rule`` (default ``best``) and ``keep``."""
    chosen = rule(scope, spec.get("rule", "best"))(options, scope, spec)
    kept = spec.get("keep")
    if kept is None or chosen == kept:
        return chosen
    return chosen if paired(options[chosen], options[kept], scope.study.selection).beats else kept


def choice(scope: Scope, name: str):
    """The value of the study's choice ``name``: the ``each`` value (a table of them, for several variables) whose
    rows (``among``, one a seed when it names ``{seed}``) ``choose`` prefers; :class:`Waiting` while one is missing."""
    spec = scope.study.choices[name]
    combos = scope.combos(spec.get("each", {}), scope.seed_names(None))
    options, missing = {}, []
    for i, combo in enumerate(combos):
        names = scope.seeded(spec["among"], combo)
        options[i] = [scope.rows.get(n) for n in names]
        missing += [n for n, row in zip(names, options[i], strict=True) if row is None]
    if missing:
        raise Waiting(f"choice {name} needs rows {missing}")
    keep = spec.get("keep")
    keys = {next(iter(c.values())) if len(c) == 1 else tuple(c.values()): i for i, c in enumerate(combos)}
    best_index = choose(options, scope, {**spec, "keep": keys[keep] if keep is not None else None})
    combo = combos[best_index]
    return next(iter(combo.values())) if len(combo) == 1 else combo
