"""The twin-default study's own (``twin_default.toml``): the default it chose (a time bar and the seeds' spread) and
the layout of its tables between the ``TWIN_DEFAULT`` markers of ``evaluation/DEFAULTS.md``."""

from __future__ import annotations

import statistics

from evaluation.choices import total
from evaluation.report import chosen, mean_std_text, titled
from evaluation.study import Scope
from jtcse.training.selection import best_by_total


def _all_seeds(scope: Scope, prefix: str) -> list[dict] | None:
    """The rows ``{prefix}_s{seed}`` of every seed, or ``None`` while one is missing."""
    found = [scope.rows.get(f"{prefix}_s{seed}") for seed in scope.study.seeds]
    return None if any(r is None for r in found) else found


def _some_seeds(scope: Scope, prefix: str) -> list[dict]:
    return [scope.rows[f"{prefix}_s{seed}"] for seed in scope.study.seeds if f"{prefix}_s{seed}" in scope.rows]


def _spread(scope: Scope, rows: list[dict]) -> tuple[float, float]:
    """The selection total's mean and std over ``rows``."""
    totals = [total(r, scope.study.selection) for r in rows]
    return statistics.fmean(totals), statistics.stdev(totals) if len(totals) > 1 else 0.0


def cpu_seconds(scope: Scope, variant: str) -> float | None:
    """A variant's CPU seconds through the pipeline: its two warm-ups, its twin (if it has one) and its ensemble and
    distillation (each the mean over the runs that were timed here)."""

    def mean(prefix: str) -> float | None:
        values = [r["cpu_seconds"] for n, r in scope.rows.items() if n.startswith(prefix) and r.get("cpu_seconds")]
        return statistics.fmean(values) if values else None

    parts = [mean("dropout_s"), mean("dropout_s"), mean(f"student_{variant}_s")]
    if variant in scope.study.define["screened"]:
        twin = chosen(scope, "twin_choice")
        parts.append(mean(f"twin_{twin}_s") if twin else None)
    return None if any(p is None for p in parts) else sum(parts)


def default_choice(scope: Scope, names: dict | None = None) -> str | None:
    """The default: among the students trained at every seed (today's members at the weights before and at the
    guard's weight, the variant the screen carries) within ``time_bar`` times today's CPU time, the best mean over
    the selection files with none below the start (students ship); it replaces the weights before only if it wins
    by more than the larger seed spread of the two totals. ``None`` while a student it needs is missing."""
    carried, selection = chosen(scope, "screen_choice"), scope.study.selection
    if carried is None or any(_all_seeds(scope, f"student_{v}") is None for v in ("before", carried)):
        return None
    students = {v: _all_seeds(scope, f"student_{v}") for v in [*scope.study.define["today"], carried]}
    students = {v: found for v, found in students.items() if found}
    today = cpu_seconds(scope, "before") or 0
    fits = [v for v in students if (cpu_seconds(scope, v) or 0) <= scope.study.settings["time_bar"] * today] or [
        "before"
    ]
    floor = {s: scope.rows[scope.study.get("start")][f"{s}_spearman"] for s in selection}
    best = best_by_total(
        {v: {s: statistics.fmean(r[f"{s}_spearman"] for r in students[v]) for s in selection} for v in fits}, floor
    )
    (ours, our_std), (theirs, their_std) = _spread(scope, students["before"]), _spread(scope, students[best])
    return best if theirs - ours > max(our_std, their_std) else "before"


def chosen_weights(scope: Scope) -> dict[str, list[float]]:
    """Each member set's weights as ``ENSEMBLE_WEIGHTS`` holds them (the trained members first, the start last):
    ``warmups`` those of today's members' best student (the default's when it is one of them), ``twin`` and
    ``twin_towers`` the rule's weight on their ensembles."""
    first = scope.study.seeds[0]

    def held(variant: str) -> list[float]:
        weights = scope.rows[f"ens_{variant}_s{first}"]["weights"]
        return [*weights[1:], weights[0]]

    out = {v: held(v) for v in ("twin", "twin_towers") if f"ens_{v}_s{first}" in scope.rows}
    today = {v: found for v in scope.study.define["today"] if (found := _all_seeds(scope, f"student_{v}"))}
    if today:
        default = default_choice(scope)
        if default not in today:
            floor = {s: scope.rows[scope.study.get("start")][f"{s}_spearman"] for s in scope.study.selection}
            scores = {
                v: {s: statistics.fmean(r[f"{s}_spearman"] for r in rows) for s in scope.study.selection}
                for v, rows in today.items()
            }
            default = best_by_total(scores, floor)
        out["warmups"] = held(default)
    return out


# ---------------------------------------------------------------------------------------------------- tables
def _pm(values: list[float]) -> str:
    return mean_std_text(values, empty="–")


def _genre_cells(found: list[dict], split: str) -> list[str]:
    return [_pm([r[f"{split}_genres"][g] for r in found]) for g in sorted(found[0][f"{split}_genres"])]


def _score_cells(scope: Scope, found: list[dict]) -> list[str]:
    cells = [_pm([r[f"{split}_spearman"] for r in found]) for split in scope.study.selection]
    return [*cells, _pm([total(r, scope.study.selection) for r in found]), _pm([r["dev_spearman"] for r in found])]


def _line(scope: Scope, label: str, found: list[dict], ratio: str = "–") -> list[str]:
    """A lead-table line: the seeds, the scores, the dev genres, the retrieval check (mean ± std, "–" where a row has
    none) and ``ratio``."""
    retrieval = [r["retrieval"]["ndcg_at_10"] for r in found if "retrieval" in r]
    checked = _pm(retrieval) if len(retrieval) == len(found) else "–"
    seeds = str(len(found)) if label != "the start (shipped MiniLM)" else "–"
    return [label, seeds, *_score_cells(scope, found), *_genre_cells(found, "dev"), checked, ratio]


def _students(scope: Scope) -> list[str]:
    """The students in the lead table's order: the default, today's members, the carried variant, the screened."""
    define = scope.study.define
    order = [default_choice(scope), *define["today"], chosen(scope, "screen_choice"), *define["screened"]]
    return [v for i, v in enumerate(order) if v is not None and v not in order[:i]]


def _twin_line(scope: Scope, label: str, row: dict) -> list[str]:
    agreement = row.get("tower_agreement")
    cells = [f"{agreement:.3f}" if agreement is not None else "–", f"{row.get('cpu_seconds', 0):.0f}"]
    return [label, *_score_cells(scope, [row]), *cells]


def _tables(scope: Scope, names: dict) -> str:
    rows, settings, labels = scope.rows, scope.study.settings, scope.study.define["labels"]
    choice, today, first = default_choice(scope), cpu_seconds(scope, "before"), scope.study.seeds[0]
    lead = [_line(scope, "the start (shipped MiniLM)", [rows["shipped"]])]
    if control := _all_seeds(scope, "dropout"):
        lead.append(_line(scope, "same-budget control (warm-up I alone)", control))
    genres = [["the start", "–", *_genre_cells([rows["shipped"]], "sts"), *_genre_cells([rows["shipped"]], "sick")]]
    for variant in _students(scope):
        if found := _some_seeds(scope, f"student_{variant}"):
            label = f"**{labels[variant]} (the default)**" if variant == choice else labels[variant]
            weights = "/".join(f"{w:g}" for w in rows[f"ens_{variant}_s{first}"]["weights"])
            cpu = cpu_seconds(scope, variant)
            lead.append(
                _line(
                    scope,
                    f"{label}, weights {weights} (start first)",
                    found,
                    f"{cpu / today:.2f}" if cpu and today else "–",
                )
            )
            genres.append([variant, str(len(found)), *_genre_cells(found, "sts"), *_genre_cells(found, "sick")])
    note = "" if choice is not None else "The default is not chosen yet: a student of the screen or a seed is missing."
    out = titled(scope, "lead", lead, note, **names) + titled(scope, "genres", genres, **names)
    twin, twins = chosen(scope, "twin_choice"), []
    for tag, change in settings["twin_grid"].items():
        if (row := rows.get(f"twin_{tag}_s{first}")) is not None:
            moved = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in change.items()) or "–"
            line = _twin_line(scope, f"**{tag}** (chosen)" if tag == twin else tag, row)
            twins.append([line[0], moved, *line[1:]])
    skipped = ["; ".join(f"{k} {v:g}" for k, v in change.items()) for change in settings["not_measured"].values()]
    note = (
        f"Planned and not run (the CPU time went to the seeds and the students): {', '.join(skipped)}."
        if skipped
        else ""
    )
    note += (
        " ICTM's weight was moved from the chosen twin afterwards (the follow-up below)."
        if settings["followup"]
        else ""
    )
    out += titled(scope, "twin", twins, note, **names)
    found = {tag: rows.get(f"twin_{tag}_s{first}") for tag in settings["followup"]}
    if twin is not None and any(found.values()):
        followup = [(twin, rows[f"twin_{twin}_s{first}"]), *found.items()]
        out += titled(
            scope, "followup", [_twin_line(scope, tag, row) for tag, row in followup if row is not None], **names
        )
    ensembles = []
    for variant in [*scope.study.define["members"], *scope.study.define["today"]]:
        if found := _all_seeds(scope, f"ens_{variant}"):
            ensembles.append([variant, "/".join(f"{w:g}" for w in found[0]["weights"]), *_score_cells(scope, found)])
    return out + titled(scope, "ensembles", ensembles, **names)


def report(scope: Scope) -> tuple[dict, str]:
    results = {
        "twin_choice": chosen(scope, "twin_choice"),
        "screen_choice": chosen(scope, "screen_choice"),
        "default": default_choice(scope),
        "ensemble_weights": chosen_weights(scope),
        "rows": scope.rows,
    }
    shipped = scope.rows.get("shipped")
    if shipped is None:
        return results, "not run yet\n"
    labels = {name: spec["label"] for name, spec in scope.study.splits.items()}
    names = {
        "scores": [*(labels[s] for s in scope.study.selection), "selection mean", labels["dev"]],
        "dev_genres": [f"dev {g}" for g in sorted(shipped["dev_genres"])],
        "sts_genres": [f"STS-B train {g}" for g in sorted(shipped["sts_genres"])],
        "base": ", ".join(f"{k} {v}" for k, v in scope.study.settings["twin"].items()),
    }
    return results, _tables(scope, names)
