"""The pipeline's report: every model's dev Spearman over all pairs and per genre, and the summary table
(``pipeline_summary.md``) of :func:`~jtcse.pipeline.run.run_pipeline`, the models the run started from
(:func:`~jtcse.pipeline.plan.starting_models`) first: the rows to beat."""

from __future__ import annotations

from typing import Any


def dev_scores(dev_file, models: dict[str, Any], device=None, precision: str = "fp32") -> dict[str, dict]:
    """Dev Spearman per genre and over all pairs (:func:`~jtcse.evaluation.sts.genre_spearman`) of each of
    ``models`` (``{row label: model}``: the starting models as they are, with their own pooling, and the models the
    stages built), each encoding under ``precision``'s autocast (:func:`jtcse.devices.autocast`)."""
    from jtcse.devices import autocast
    from jtcse.evaluation.sts import genre_spearman, read_stsb_file
    from jtcse.modeling.loading import load_model

    pairs = read_stsb_file(dev_file)
    scores = {}
    for label, model in models.items():
        encoder = load_model(model, role="encode", device=device)
        with autocast(precision, str(encoder.device)):
            scores[label] = genre_spearman(encoder, pairs)
    return scores


def summary_table(rows: list[dict[str, Any]], starting: dict[str, Any], evaluated: dict[str, Any]) -> list[dict]:
    """The summary's rows: each starting model the eval stage scored (the rows to beat), then each stage's row
    with its dev score (the eval stage's, else the stage's own final one) and genres."""
    from jtcse.modeling.loading import describe_source

    scores = evaluated.get("dev_spearman", {})
    genres = evaluated.get("dev_spearman_by_genre", {})
    table = [
        {
            "stage": label,
            "status": "starting model (its own pooling)",
            "seconds": 0.0,
            "output": describe_source(model),
            "dev_spearman": scores.get(label),
            "dev_genres": genres.get(label),
        }
        for label, model in starting.items()
        if label in scores
    ]
    return table + [
        {
            "stage": row["stage"],
            "status": row["status"],
            "seconds": row["seconds"],
            "output": row["output"],
            "dev_spearman": scores.get(row["stage"], row["summary"].get("final_dev_spearman")),
            "dev_genres": genres.get(row["stage"]),
        }
        for row in rows
    ]


def format_table(table: list[dict[str, Any]]) -> str:
    """The summary table as Markdown (dev Spearman ×100, as papers report it; Δ against the ``start`` row)."""
    base = next((row["dev_spearman"] for row in table if row["stage"] == "start"), None)
    lines = [
        "| stage | status | seconds | dev Spearman ×100 | Δ vs start | output |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for row in table:
        score = row["dev_spearman"]
        scored = isinstance(score, (int, float))
        shown = f"{100 * score:.2f}" if scored else "–"
        delta = (
            f"{100 * (score - base):+.2f}"
            if scored and isinstance(base, (int, float)) and row["stage"] != "start"
            else "–"
        )
        lines.append(
            f"| {row['stage']} | {row['status']} | {row['seconds']:.1f} | {shown} | {delta} | {row['output']} |"
        )
    genres = list(dict.fromkeys(g for row in table for g in (row.get("dev_genres") or {})))
    if genres:  # a second table: the same models per genre, so no kind of text is traded for another
        start = next((row.get("dev_genres") or {} for row in table if row["stage"] == "start"), {})
        lines += [
            "",
            "| stage | " + " | ".join(f"{g} ×100 (Δ vs start)" for g in genres) + " |",
            "| --- |" + " ---: |" * len(genres),
        ]
        for row in table:
            scores = row.get("dev_genres")
            if not scores:
                continue
            cells = []
            for g in genres:
                value, base_g = scores.get(g), start.get(g)
                delta = (
                    f" ({100 * (value - base_g):+.2f})"
                    if value is not None and base_g is not None and row["stage"] != "start"
                    else ""
                )
                cells.append("–" if value is None else f"{100 * value:.2f}{delta}")
            lines.append(f"| {row['stage']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
