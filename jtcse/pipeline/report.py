"""The pipeline's report: every model's dev Spearman over all pairs and per genre, with selection inputs every
model's score on each of them, and the summary table (``pipeline_summary.md``) of
:func:`~jtcse.pipeline.run.run_pipeline`, the models the run started from (:func:`~jtcse.pipeline.plan.starting_models`)
first: the rows to beat."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def dev_scores(dev_file, models: dict[str, Any], device=None, precision: str = "fp32") -> dict[str, dict]:
    """Dev Spearman per genre and over all pairs (:func:`~jtcse.evaluation.sts.genre_spearman`) of each of
    ``models`` (``{row label: model}``: the starting models as they are, with their own pooling, and the models the
    stages built), each encoding under ``precision``'s autocast (:func:`jtcse.devices.autocast`)."""
    from jtcse.devices import autocast
    from jtcse.evaluation.sts import genre_spearman, read_sts_input
    from jtcse.modeling.loading import load_model

    pairs = read_sts_input(dev_file)
    scores = {}
    for label, model in models.items():
        encoder = load_model(model, role="encode", device=device)
        with autocast(precision, str(encoder.device)):
            scores[label] = genre_spearman(encoder, pairs)
    return scores


def selection_report(
    selection: dict[str, Any], models: dict[str, Any], device=None, student: str | None = None, teachers=()
) -> dict[str, Any]:
    """The eval stage's selection fields for ``models`` (``{row label: model}``) on the ``selection`` inputs
    (``{spec: input}``): ``selection_inputs`` (``{spec: {"kind", "metric"}}``), ``selection_scores`` (``{label:
    {spec: {"all": main score, genre: ...}}}``, fractions), ``selection_total`` (``{label: mean main score}``), and
    with a ``student`` and the start scored, ``selection_kept``: ``{teacher: {"inputs": {spec: share}, "total":
    share}}``, the share of each of ``teachers``' gain over the start the student keeps
    (:func:`~jtcse.training.selection.shares_kept`; ``None`` where the teacher does not gain)."""
    from jtcse.training.selection import overall, selection_scores, shares_kept, total

    scores = {label: selection_scores(model, selection, device=device) for label, model in models.items()}
    main = {label: overall(files) for label, files in scores.items()}
    report: dict[str, Any] = {
        "selection_inputs": {
            spec: {"kind": item.kind, "metric": item.task.metadata.main_score} for spec, item in selection.items()
        },
        "selection_scores": scores,
        "selection_total": {label: total(files) for label, files in main.items()},
    }
    if student in main and "start" in main:
        kept = {teacher: shares_kept(main[student], main[teacher], main["start"]) for teacher in teachers}
        report["selection_kept"] = {teacher: shares for teacher, shares in kept.items() if teacher in main}
    return report


def summary_table(rows: list[dict[str, Any]], starting: dict[str, Any], evaluated: dict[str, Any]) -> list[dict]:
    """The summary's rows: each starting model the eval stage scored (the rows to beat), then each stage's row
    with its dev score (the eval stage's, else the stage's own final one) and genres. ``seconds`` is this run's time
    (0 for a stage done before); ``stage_seconds`` what the stage took when it ran: a training stage's as its run
    recorded it, so a stage done before keeps its own; else this run's (``None`` when done before, and for a
    starting model)."""
    from jtcse.modeling.loading import describe_source

    scores = evaluated.get("dev_spearman", {})
    genres = evaluated.get("dev_spearman_by_genre", {})
    selection = evaluated.get("selection_scores")

    def selected(label: str) -> dict[str, Any]:  # a run with selection inputs: each row's main scores and mean
        if selection is None:
            return {}
        files = selection.get(label)
        main = {spec: s["all"] for spec, s in files.items()} if files else None
        kept = evaluated.get("selection_kept", {}).get(label)  # a teacher's row: what the student keeps of its gain
        return {"selection": main, "selection_total": evaluated["selection_total"].get(label), "student_keeps": kept}

    table = [
        {
            "stage": label,
            "status": "starting model (its own pooling)",
            "seconds": 0.0,
            "stage_seconds": None,
            "output": describe_source(model),
            "dev_spearman": scores.get(label),
            "dev_genres": genres.get(label),
            **selected(label),
        }
        for label, model in starting.items()
        if label in scores
    ]
    return table + [
        {
            "stage": row["stage"],
            "status": row["status"],
            "seconds": row["seconds"],
            "stage_seconds": row["stage_seconds"],
            "output": row["output"],
            "dev_spearman": scores.get(row["stage"], row["summary"].get("final_dev_spearman")),
            "dev_genres": genres.get(row["stage"]),
            **selected(row["stage"]),
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
    return "\n".join(lines + _selection_lines(table)) + "\n"


def _short(spec: str) -> str:
    """A selection input's column name: the ``NAME`` of ``NAME=PATH``, else its file or folder name, after its
    ``TYPE:`` when one is given."""
    from jtcse.evaluation.mteb_local_tasks import split_task_name

    name, spec = split_task_name(spec)
    if name:
        return name
    kind, sep, rest = spec.partition(":")
    return f"{kind}:{Path(rest).name}" if sep and kind.replace("-", "").isalpha() else Path(spec).name


def _selection_lines(table: list[dict[str, Any]]) -> list[str]:
    """With selection inputs: each model's main score on each and their mean (×100, Δ vs the start), then the share
    of each teacher's gain over the start that the student keeps."""
    rows = [row for row in table if row.get("selection")]
    if not rows:
        return []
    specs = list(rows[0]["selection"])
    start = next((row for row in rows if row["stage"] == "start"), None)

    def cell(value: float, base: float | None) -> str:
        return f"{100 * value:.2f}" + (f" ({100 * (value - base):+.2f})" if base is not None else "")

    lines = [
        "",
        "| stage | "
        + " | ".join(f"{_short(spec)} ×100 (Δ vs start)" for spec in specs)
        + " | mean ×100 (Δ vs start) |",
        "| --- |" + " ---: |" * (len(specs) + 1),
    ]
    for row in rows:
        base = start if start is not None and row is not start else None
        cells = [cell(row["selection"][spec], base["selection"][spec] if base else None) for spec in specs]
        cells.append(cell(row["selection_total"], base["selection_total"] if base else None))
        lines.append(f"| {row['stage']} | " + " | ".join(cells) + " |")
    lines.append(
        "\nSelection inputs, each counting equally in the mean: main scores are Spearman (STS), accuracy "
        "(classification, on a held-out half of the train split) and nDCG@10 (retrieval)."
    )
    teachers = [row for row in table if row.get("student_keeps")]
    if teachers:

        def share(value: float | None) -> str:
            return "– (no gain)" if value is None else f"{100 * value:.0f}%"

        lines += [
            "",
            "| the student keeps, of the gain over the start of | "
            + " | ".join(_short(spec) for spec in specs)
            + " | mean |",
            "| --- |" + " ---: |" * (len(specs) + 1),
        ]
        for row in teachers:
            kept = row["student_keeps"]
            cells = [share(kept["inputs"][spec]) for spec in specs] + [share(kept["total"])]
            lines.append(f"| {row['stage']} | " + " | ".join(cells) + " |")
    return lines
