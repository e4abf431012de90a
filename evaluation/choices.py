"""Choices made from rows: a study's ``[choices.NAME]`` and an ensemble row's weights.

A choice weighs options, each a list of rows (one a seed, or one), by a rule: every rule maximises the mean over the
study's ``selection`` splits of each split's mean over the seeds (:func:`jtcse.training.selection.best_by_total`,
the pipeline's rule); ``floor`` keeps to the options with no split below the study's ``start`` row, ``genre_safe``
to those whose every selection genre, in every seed, is at least the start's less ``margin``. With ``keep``, the
option named there stays unless the winner beats it on the same seeds by more than twice the standard error of the
paired differences (:func:`paired_difference`). A study module may define rules of its own under new names.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Hashable, Mapping

from evaluation.study import Scope, Waiting
from jtcse.training.selection import best_by_total


def means(rows: list[dict], splits: list[str]) -> dict[str, float]:
    """Each split's Spearman, the mean over ``rows``."""
    return {split: statistics.fmean(row[f"{split}_spearman"] for row in rows) for split in splits}


def total(row: dict, splits: list[str]) -> float:
    """A row's mean Spearman over ``splits``."""
    return statistics.fmean(row[f"{split}_spearman"] for split in splits)


def worst_genre(rows: list[dict], start: dict, splits: list[str]) -> float:
    """How far the worst genre of the ``splits``, in the worst of ``rows``, lies above the start's (below: < 0)."""
    return min(
        row[f"{split}_genres"][genre] - value
        for row in rows
        for split in splits
        for genre, value in start[f"{split}_genres"].items()
    )


def paired_difference(rows: list[dict], base: list[dict], splits: list[str]) -> tuple[float, float]:
    """``(mean, standard error)`` of the per-seed differences of the selection total, ``rows`` less ``base`` (the
    same seeds in the same order); the error is 0 for one seed."""
    diffs = [total(a, splits) - total(b, splits) for a, b in zip(rows, base, strict=True)]
    error = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else 0.0
    return statistics.fmean(diffs), error


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
    mean, error = paired_difference(options[chosen], options[kept], scope.study.selection)
    return chosen if mean > 2 * error else kept


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
