"""The twin-default driver's choices and report, from its row files alone: ``evaluation/twin_default/results.json``
and the tables between the ``TWIN_DEFAULT`` markers of ``evaluation/DEFAULTS.md``.

The choices (the twin's settings, each variant's weight, the default) are functions of the rows, so the driver
makes them and ``--report-only`` shows them from the same rows; each is :func:`jtcse.training.selection.best_by_total`
on the two selection files: the best mean, and for the default, whose students ship, none below the shipped model.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from evaluation.drivers.grid import read_rows
from evaluation.drivers.twin_default_settings import (
    BEFORE,
    ROW_LABELS,
    SCREENED,
    SELECTION,
    SHIPPED,
    SPLIT_LABELS,
    SPLITS,
    TODAY,
    VARIANTS,
)
from jtcse.training.selection import best_by_total


# ---------------------------------------------------------------------------------------------------- choices
def selection_of(row: dict) -> dict[str, float]:
    """A row's ``{selection file: Spearman}``."""
    return {split: row[f"{split}_spearman"] for split in SELECTION}


def total(row: dict) -> float:
    """A row's mean Spearman over the selection files."""
    return statistics.fmean(selection_of(row).values())


def mean_rows(rows: list[dict]) -> dict:
    """Rows of one choice over the seeds: each split's mean and std, the selection total's mean and std."""
    out: dict = {"seeds": len(rows)}
    for split in SPLITS:
        values = [r[f"{split}_spearman"] for r in rows]
        out[f"{split}_spearman"] = statistics.fmean(values)
        out[f"{split}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
    totals = [total(r) for r in rows]
    out["total"], out["total_std"] = statistics.fmean(totals), statistics.stdev(totals) if len(totals) > 1 else 0.0
    return out


def twin_choice(rows: dict, cfg: dict) -> str | None:
    """The twin grid's setting with the best mean over the selection files (a teacher: no floor; ``None`` while a grid
    row is missing)."""
    seed = cfg["grid_seed"]
    found = {tag: rows.get(f"twin_{tag}_s{seed}") for tag in cfg["twin_grid"]}
    if any(row is None for row in found.values()):
        return None
    return best_by_total({tag: selection_of(row) for tag, row in found.items()})


def variant_weight(grids: list[dict]) -> float:
    """The one weight a variant ships with, from each seed's ``{weight: scores}``: the best mean over the selection
    files (each file's mean over the seeds), as the pipeline chooses an ensemble's weights."""
    means = {
        w: {split: statistics.fmean(g[w][f"{split}_spearman"] for g in grids) for split in SELECTION} for w in grids[0]
    }
    return best_by_total(means)


def seeded(rows: dict, prefix: str, cfg: dict) -> list[dict] | None:
    """The rows ``{prefix}_s{seed}`` of every seed, or ``None`` while one is missing."""
    found = [rows.get(f"{prefix}_s{seed}") for seed in cfg["seeds"]]
    return None if any(r is None for r in found) else found


def some_seeds(rows: dict, prefix: str, cfg: dict) -> list[dict]:
    """The rows ``{prefix}_s{seed}`` of the seeds that have one (a screened variant: the first seed alone)."""
    return [rows[f"{prefix}_s{seed}"] for seed in cfg["seeds"] if f"{prefix}_s{seed}" in rows]


def cpu_seconds(rows: dict, variant: str, cfg: dict) -> float | None:
    """A variant's CPU seconds through the pipeline: its two warm-ups, its twin (if it has one) and its ensemble and
    distillation (each the mean over the runs that were timed here)."""

    def mean(prefix: str) -> float | None:
        values = [r["cpu_seconds"] for n, r in rows.items() if n.startswith(prefix) and r.get("cpu_seconds")]
        return statistics.fmean(values) if values else None

    parts = [mean("dropout_s"), mean("dropout_s"), mean(f"student_{variant}_s")]
    if variant in SCREENED:
        parts.append(mean(f"twin_{twin_choice(rows, cfg)}_s") if twin_choice(rows, cfg) else None)
    return None if any(p is None for p in parts) else sum(parts)


def _by_total(means: dict[str, dict], rows: dict) -> str:
    """The best mean over the selection files among ``means`` with no file below the shipped model (students ship)."""
    scores = {v: {s: m[f"{s}_spearman"] for s in SELECTION} for v, m in means.items()}
    return best_by_total(scores, selection_of(rows[SHIPPED]))


def screen_choice(rows: dict, cfg: dict) -> str | None:
    """The variant with a twin carried from the first seed to every seed: the best by the rule among the first
    seed's students (``None`` while one is missing)."""
    first = cfg["seeds"][0]
    found = {v: rows.get(f"student_{v}_s{first}") for v in SCREENED}
    if any(row is None for row in found.values()):
        return None
    return _by_total({v: mean_rows([row]) for v, row in found.items()}, rows)


def default_choice(rows: dict, cfg: dict) -> str | None:
    """The default: among the students trained at every seed (today's members at the weights before and at the
    guard's weight, the variant carried past the screen) within ``time_bar`` times today's CPU time, the best mean
    over the selection files with none of them below the shipped model (the guard: students ship); it replaces the
    weights before only if it wins by more than the larger seed spread of the two totals. ``None`` while the weights
    before, the screen or the variant it carries lack a student."""
    carried = screen_choice(rows, cfg)
    if carried is None or any(seeded(rows, f"student_{v}", cfg) is None for v in (BEFORE, carried)):
        return None
    students = {v: seeded(rows, f"student_{v}", cfg) for v in [*TODAY, carried]}
    means = {v: mean_rows(found) for v, found in students.items() if found}
    today = cpu_seconds(rows, BEFORE, cfg)
    fits = {v: m for v, m in means.items() if (cpu_seconds(rows, v, cfg) or 0) <= cfg["time_bar"] * (today or 0)}
    best = _by_total(fits or {BEFORE: means[BEFORE]}, rows)
    ours, theirs = means[BEFORE], means[best]
    return best if theirs["total"] - ours["total"] > max(ours["total_std"], theirs["total_std"]) else BEFORE


def chosen_weights(rows: dict, cfg: dict) -> dict[str, list[float]]:
    """Each member set's weights as ``ENSEMBLE_WEIGHTS`` holds them (the trained members first, the start last):
    ``warmups`` those of today's members' best student (the default's when it is one of them), ``twin`` and
    ``twin_towers`` the rule's weight on their ensembles."""
    first = cfg["seeds"][0]

    def held(variant: str) -> list[float]:
        weights = rows[f"ens_{variant}_s{first}"]["weights"]
        return [*weights[1:], weights[0]]

    out = {v: held(v) for v in ("twin", "twin_towers") if f"ens_{v}_s{first}" in rows}
    today = {v: mean_rows(found) for v in TODAY if (found := seeded(rows, f"student_{v}", cfg))}
    if today:
        default = default_choice(rows, cfg)
        out["warmups"] = held(default if default in today else _by_total(today, rows))
    return out


DEFAULT_WEIGHTS_FILE = Path(__file__).resolve().parents[2] / "jtcse" / "pipeline" / "settings.py"
"""Where ``ENSEMBLE_WEIGHTS`` (``DefaultWeights``) is declared: the driver writes its choice there."""


def write_default_weights(weights: dict[str, list[float]], path: Path = DEFAULT_WEIGHTS_FILE) -> bool:
    """Write each variant's chosen weights as the default of the ``DefaultWeights`` field of the same name (the
    declaration ``    NAME: tuple[float, ...] = (...)``); returns whether the file changed."""
    import re

    text = path.read_text(encoding="utf-8")
    new = text
    for name, values in weights.items():
        line = re.compile(rf"^(    {name}: tuple\[float, \.\.\.\] = )\(.*\)$", re.M)
        new = line.sub(lambda m, v=values: m.group(1) + "(" + ", ".join(repr(float(x)) for x in v) + ")", new)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


# ---------------------------------------------------------------------------------------------------- tables
def _pm(values: list[float]) -> str:
    if not values:
        return "–"
    m = statistics.fmean(values)
    return f"{100 * m:.2f}" + (f" ± {100 * statistics.stdev(values):.2f}" if len(values) > 1 else "")


def _table(title: str, header: list[str], lines: list[list[str]], note: str = "") -> str:
    out = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(line) + " |" for line in lines]
    return "\n".join(out) + "\n\n" + (f"{note}\n\n" if note else "")


def _genre_cells(found: list[dict], split: str) -> list[str]:
    genres = sorted(found[0][f"{split}_genres"])
    return [_pm([r[f"{split}_genres"][g] for r in found]) for g in genres]


def _score_cells(found: list[dict]) -> list[str]:
    return [_pm([r["sts_spearman"] for r in found]), _pm([r["sick_spearman"] for r in found]),
            _pm([total(r) for r in found]), _pm([r["dev_spearman"] for r in found])]  # fmt: skip


def _retrieval_cell(found: list[dict]) -> str:
    """nDCG@10 of the retrieval check (STS-B train pairs >= 4), mean ± std; "–" where a row has none."""
    values = [r["retrieval"]["ndcg_at_10"] for r in found if "retrieval" in r]
    return _pm(values) if len(values) == len(found) else "–"


SCORE_HEADER = [SPLIT_LABELS["sts"], SPLIT_LABELS["sick"], "selection mean", SPLIT_LABELS["dev"]]
RETRIEVAL_HEADER = "retrieval nDCG@10 (STS-B train pairs ≥ 4)"


def _student_order(rows: dict, cfg: dict) -> list[str]:
    """The students' rows in the lead table's order: the default, today's members, the variant carried past the
    screen, the screened ones."""
    choice, carried = default_choice(rows, cfg), screen_choice(rows, cfg)
    order = [choice, *TODAY, carried, *SCREENED]
    return [v for i, v in enumerate(order) if v is not None and v not in order[:i]]


def lead_table(rows: dict, cfg: dict) -> str:
    """The default's student first, then every row it is measured against (a screened variant: its first seed)."""
    choice = default_choice(rows, cfg)
    shipped = rows[SHIPPED]
    genres = sorted(shipped["dev_genres"])
    today = cpu_seconds(rows, BEFORE, cfg)
    lines = [["the start (shipped MiniLM)", "–", *_score_cells([shipped]), *_genre_cells([shipped], "dev"),
              _retrieval_cell([shipped]), "–"]]  # fmt: skip
    control = seeded(rows, "dropout", cfg)
    if control:
        lines.append(["same-budget control (warm-up I alone)", str(len(control)), *_score_cells(control),
                      *_genre_cells(control, "dev"), _retrieval_cell(control), "–"])  # fmt: skip
    for variant in _student_order(rows, cfg):
        found = some_seeds(rows, f"student_{variant}", cfg)
        if not found:
            continue
        label = VARIANTS.get(variant) or ROW_LABELS[variant]
        label = f"**{label} (the default)**" if variant == choice else label
        weights = "/".join(f"{w:g}" for w in rows[f"ens_{variant}_s{cfg['seeds'][0]}"]["weights"])
        cpu = cpu_seconds(rows, variant, cfg)
        ratio = f"{cpu / today:.2f}" if cpu and today else "–"
        lines.append([f"{label}, weights {weights} (start first)", str(len(found)), *_score_cells(found),
                      *_genre_cells(found, "dev"), _retrieval_cell(found), ratio])  # fmt: skip
    header = ["model", "seeds", *SCORE_HEADER, *[f"dev {g}" for g in genres], RETRIEVAL_HEADER, "CPU time vs today's"]
    title = "The default's student and the rows it is measured against (students through `jtcse pipeline`)"
    note = "" if choice is not None else "The default is not chosen yet: a student of the screen or a seed is missing."
    return _table(title, header, lines, note)


def selection_genre_table(rows: dict, cfg: dict) -> str:
    """Every student per genre of the selection files: reported, never a constraint."""
    shipped = rows[SHIPPED]
    lines = [["the start", "–", *_genre_cells([shipped], "sts"), *_genre_cells([shipped], "sick")]]
    for variant in _student_order(rows, cfg):
        found = some_seeds(rows, f"student_{variant}", cfg)
        if found:
            lines.append([variant, str(len(found)), *_genre_cells(found, "sts"), *_genre_cells(found, "sick")])
    header = ["student", "seeds", *[f"STS-B train {g}" for g in sorted(shipped["sts_genres"])], "SICK train"]
    return _table("Per genre of the selection files (reported, never a constraint)", header, lines)


def twin_table(rows: dict, cfg: dict) -> str:
    seed = cfg["grid_seed"]
    choice = twin_choice(rows, cfg)
    lines = []
    for tag, change in cfg["twin_grid"].items():
        row = rows.get(f"twin_{tag}_s{seed}")
        if row is None:
            continue
        moved = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in change.items()) or "–"
        label = f"**{tag}** (chosen)" if tag == choice else tag
        agreement = row.get("tower_agreement")
        lines.append([label, moved, *_score_cells([row]), f"{agreement:.3f}" if agreement is not None else "–",
                      f"{row.get('cpu_seconds', 0):.0f}"])  # fmt: skip
    base = ", ".join(f"{k} {v}" for k, v in cfg["twin"].items())
    skipped = ["; ".join(f"{k} {v:g}" for k, v in change.items()) for change in cfg.get("not_measured", {}).values()]
    note = (
        f"Planned and not run (the CPU time went to the seeds and the students): {', '.join(skipped)}."
        if skipped
        else ""
    )
    if cfg.get("followup"):
        note += " ICTM's weight was moved from the chosen twin afterwards (the follow-up below)."
    return _table(f"The twin, one setting moved at a time (seed {seed}; from: {base})",
                  ["setting", "moved", *SCORE_HEADER, "towers' error agreement", "CPU s"], lines, note)  # fmt: skip


def followup_table(rows: dict, cfg: dict) -> str:
    """ICTM's weight moved from the chosen twin after the default was chosen: reported, not chosen on."""
    seed, choice = cfg["grid_seed"], twin_choice(rows, cfg)
    found = {tag: rows.get(f"twin_{tag}_s{seed}") for tag in cfg.get("followup", {})}
    if choice is None or not any(found.values()):
        return ""
    lines = []
    for tag, row in [(choice, rows[f"twin_{choice}_s{seed}"]), *found.items()]:
        if row is not None:
            agreement = row.get("tower_agreement")
            lines.append([tag, *_score_cells([row]), f"{agreement:.3f}" if agreement is not None else "–",
                          f"{row.get('cpu_seconds', 0):.0f}"])  # fmt: skip
    return _table(f"Follow-up: ICTM's weight moved from the chosen twin (seed {seed}; measured after the default was "
                  "chosen: reported, not chosen on)", ["twin", *SCORE_HEADER, "towers' error agreement", "CPU s"],
                  lines)  # fmt: skip


def ensemble_table(rows: dict, cfg: dict) -> str:
    lines = []
    for variant in [*VARIANTS, *TODAY]:
        found = seeded(rows, f"ens_{variant}", cfg)
        if found:
            weights = "/".join(f"{w:g}" for w in found[0]["weights"])
            lines.append([variant, weights, *_score_cells(found)])
    return _table("Ensembles (the teachers), weight chosen by the rule on the mean over the seeds",
                  ["variant", "weights (start first)", *SCORE_HEADER], lines)  # fmt: skip


def build_report(work: Path, cfg: dict) -> tuple[dict, str]:
    rows = read_rows(work)
    results = {
        "twin_choice": twin_choice(rows, cfg),
        "screen_choice": screen_choice(rows, cfg),
        "default": default_choice(rows, cfg),
        "ensemble_weights": chosen_weights(rows, cfg),
        "rows": rows,
    }
    if SHIPPED not in rows:
        return results, "not run yet\n"
    tables = (
        lead_table(rows, cfg)
        + selection_genre_table(rows, cfg)
        + twin_table(rows, cfg)
        + followup_table(rows, cfg)
        + ensemble_table(rows, cfg)
    )
    return results, tables
