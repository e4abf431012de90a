"""Run studies: ``python -m evaluation.run evaluation/studies/NAME.toml [...]`` from the repository root trains,
scores and resumes every row of each study, then rebuilds its report (``evaluation/README.md``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from evaluation.report import publish
from evaluation.runner import Runner, finished_rows
from evaluation.study import REPO, Scope, Study


def main(
    studies: list[Path] = typer.Argument(..., help="Study files (evaluation/studies/NAME.toml), run in turn."),
    quick: bool = typer.Option(
        False,
        help="The study's quick settings (its quick table): a smoke run of every row in "
        "runs/NAME_quick, its report in runs/NAME_quick/report (the write-up left alone).",
    ),
    report_only: bool = typer.Option(
        False,
        help="Train nothing: rebuild results.json, tables.md, the write-up's tables (and figures) from the row files.",
    ),
    from_results: bool = typer.Option(
        False, help="Rebuild from the rows recorded in the study's results.json instead (a checkout has no runs/)."
    ),
    rows: str = typer.Option(
        "",
        help="Make only these rows: comma-separated globs over row names and stages (default_s1,bf16_s1; levers).",
    ),
    seeds: str = typer.Option("", help="Make only the rows of these seeds (comma-separated): others make the rest."),
    dry_run: bool = typer.Option(
        False, help="Train nothing: list the rows this run would make (not made yet, of --rows and --seeds)."
    ),
    threads: int = typer.Option(None, help="torch CPU threads (default: OMP_NUM_THREADS, else the study's)."),
    data: Path = typer.Option(REPO.parent / "shared" / "data", help="Folder of the files the study names."),
    work: Path = typer.Option(None, help="Checkpoints and row files (default runs/NAME[_quick])."),
    output: Path = typer.Option(
        None, "--output", "-o", help="Results folder (default the study's; the write-up is then left alone)."
    ),
) -> None:
    """Train, score and resume every row of each study, then write its report."""
    for path in studies:
        study = Study(path, quick)
        folder = work or Path(study.get("work", f"runs/{study.name}") + ("_quick" if quick else ""))
        results = REPO / study.get("results", f"evaluation/{study.name}")
        out = output or (folder / "report" if quick else results)
        writeup = REPO / study.get("writeup") if study.get("writeup") and not quick and output is None else None
        if from_results:
            found = json.loads((results / "results.json").read_text(encoding="utf-8"))["rows"]
        elif report_only:
            found = finished_rows(study, folder)
            if not found:
                typer.echo(f"Error: no row files in {folder}/results: run the study, or add --from-results.", err=True)
                raise typer.Exit(2)
        else:
            threads = threads or int(os.environ.get("OMP_NUM_THREADS", study.get("threads", 2)))
            listed = [int(s) for s in seeds.split(",") if s], [r for r in rows.split(",") if r]
            runner = Runner(study, folder, data, threads, *listed)
            runner.run(dry_run)
            if dry_run:
                continue
            found = finished_rows(study, folder)  # this process's and others' (as --report-only reads them)
        print(publish(Scope(study, found), out, writeup), end="")
        print(f"[{study.name}] {len(found)} rows: report in {out}" + (f" and {writeup}" if writeup else ""))


if __name__ == "__main__":
    typer.run(main)
