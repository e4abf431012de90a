"""Run studies: ``python -m evaluation.run evaluation/studies/NAME.toml [...]`` from the repository root trains,
scores and resumes every row of each study, then rebuilds its report (``evaluation/README.md``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from evaluation.report import publish
from evaluation.runner import Runner, read_rows
from evaluation.study import REPO, Scope, Study

DATA = REPO.parent / "shared" / "data"


def _listed(text: str) -> list[str]:
    return [item for item in text.split(",") if item]


def run_study(
    path: Path,
    quick: bool,
    report_only: bool,
    from_results: bool,
    rows: str,
    seeds: str,
    threads: int | None,
    data: Path,
    work: Path | None,
    output: Path | None,
) -> None:
    """One study: its rows made (unless ``report_only``), then its report written."""
    study = Study(path, quick)
    work = work or Path(study.get("work", f"runs/{study.name}") + ("_quick" if quick else ""))
    results = REPO / study.get("results", f"evaluation/{study.name}")
    out = output or (work / "report" if quick else results)
    writeup = REPO / study.get("writeup", "") if study.get("writeup") and not quick and output is None else None
    if from_results:
        found = json.loads((results / "results.json").read_text(encoding="utf-8"))["rows"]
    elif report_only:
        found = read_rows(work)
        if not found:
            typer.echo(f"Error: no row files in {work}/results: run the study, or add --from-results.", err=True)
            raise typer.Exit(2)
    else:
        threads = threads or int(os.environ.get("OMP_NUM_THREADS", study.get("threads", 2)))
        runner = Runner(study, work, data, threads, [int(s) for s in _listed(seeds)], _listed(rows))
        runner.run()
        found = runner.rows
    print(publish(Scope(study, found), out, writeup), end="")
    print(f"[{study.name}] {len(found)} rows: report in {out}" + (f" and {writeup}" if writeup else ""))


def main(
    studies: list[Path] = typer.Argument(..., help="Study files (evaluation/studies/NAME.toml), run in turn."),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="The study's [quick] settings: a smoke run of every row, "
        "rows in runs/NAME_quick, the report in its report/ (the write-up is left alone).",
    ),
    report_only: bool = typer.Option(
        False,
        "--report-only",
        help="Train nothing: rebuild results.json, tables.md, the write-up's tables (and figures) from the row files.",
    ),
    from_results: bool = typer.Option(
        False,
        "--from-results",
        help="The rows recorded in the study's results.json "
        "instead of the row files (implies --report-only; a checkout has no runs/).",
    ),
    rows: str = typer.Option("", help="Make only these rows: comma-separated globs over row names and stages."),
    seeds: str = typer.Option(
        "", help="Make only the rows of these seeds (comma-separated): other processes make the rest."
    ),
    threads: int = typer.Option(None, help="torch CPU threads (default: OMP_NUM_THREADS, else the study's)."),
    data: Path = typer.Option(DATA, help="Folder of the data files the study names (default ../shared/data)."),
    work: Path = typer.Option(None, help="Checkpoints and row files (default runs/NAME[_quick])."),
    output: Path = typer.Option(
        None, "--output", "-o", help="Results folder (default the study's results; with it the write-up is left alone)."
    ),
) -> None:
    """Train, score and resume every row of each study, then write its report."""
    for path in studies:
        run_study(path, quick, report_only, from_results, rows, seeds, threads, data, work, output)


if __name__ == "__main__":
    typer.run(main)
