"""What every driver's command line shares: the options, the folders it works and writes in, and writing its
results (``results.json``, ``tables.md`` and the generated part of its write-up)."""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
"""Default ``--data``: the shared data folder beside the repository (``../shared/data``)."""

_TABLES = re.compile(r"<!-- TABLES START -->.*<!-- TABLES END -->", flags=re.S)


def driver_parser(doc: str, stages: Sequence[str], threads: int) -> argparse.ArgumentParser:
    """The options of every driver (``threads``: the default of ``--threads`` unless ``OMP_NUM_THREADS`` is set)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny settings: a smoke run of the whole driver")
    parser.add_argument(
        "--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", threads)), help="torch CPU threads"
    )
    parser.add_argument(
        "--stages", default=",".join(stages), help="comma-separated subset of the stages (run in this order)"
    )
    parser.add_argument("--report-only", action="store_true", help="rebuild the results from the row files only")
    parser.add_argument(
        "--data", type=Path, default=DATA, help="folder with wiki12k.txt and stsbenchmark/ (default ../shared/data)"
    )
    parser.add_argument(
        "--work", type=Path, default=None, help="checkpoints and row files (default runs/<results>[_quick])"
    )
    parser.add_argument(
        "-o",
        "--output",
        dest="out",
        metavar="OUTPUT",
        type=Path,
        default=None,
        help="results folder (default evaluation/<results>; quick: <work>/report)",
    )
    parser.add_argument("--out", dest="out", type=Path, help=argparse.SUPPRESS)  # the old spelling
    return parser


def chosen_stages(args: argparse.Namespace, stages: Sequence[str]) -> list[str]:
    """The stages of ``--stages``, in the driver's order; an unknown one stops the driver."""
    wanted = args.stages.split(",")
    unknown = sorted(set(wanted) - set(stages))
    if unknown:
        raise SystemExit(f"unknown stages {unknown}; choose from {', '.join(stages)}")
    return [stage for stage in stages if stage in wanted]


def run_stages(runner, args: argparse.Namespace, stages: Sequence[str], tag: str) -> None:
    """Run :func:`chosen_stages` in order: each is the ``runner`` method of that name."""
    for stage in chosen_stages(args, stages):
        print(f"[{tag}] stage {stage}", flush=True)
        getattr(runner, stage)()


@dataclass(frozen=True)
class Places:
    """Where a driver works and writes: ``work`` (checkpoints, ``work/results`` row files), ``out`` (its results)
    and ``writeup`` (the ``evaluation/*.md`` whose tables it refreshes; ``None``: leave it alone)."""

    work: Path
    out: Path
    writeup: Path | None


def places(args: argparse.Namespace, results: str, writeup: str) -> Places:
    """``runs/<results>`` and ``evaluation/<results>`` (quick: ``runs/<results>_quick`` and its ``report``); the
    write-up ``evaluation/<writeup>`` is refreshed only by a full run writing to the default folder."""
    work = args.work or Path(f"runs/{results}_quick" if args.quick else f"runs/{results}")
    out = args.out or (work / "report" if args.quick else Path(f"evaluation/{results}"))
    report = Path("evaluation") / writeup
    return Places(work, out, report if not args.quick and args.out is None and report.exists() else None)


def refresh_tables(report: Path, tables: str, marker: str = "TABLES") -> None:
    """Replace what stands between ``<!-- {marker} START -->`` and ``<!-- {marker} END -->`` in the write-up
    ``report`` with ``tables`` (the generated part of ``evaluation/*.md``; a write-up holding two drivers' tables
    marks each with its own ``marker``)."""
    text = report.read_text(encoding="utf-8")
    pattern = _TABLES if marker == "TABLES" else re.compile(rf"<!-- {marker} START -->.*<!-- {marker} END -->", re.S)
    text = pattern.sub(lambda _: f"<!-- {marker} START -->\n{tables}<!-- {marker} END -->", text)
    report.write_text(text, encoding="utf-8")


def publish(where: Places, results: dict, tables: str, marker: str = "TABLES") -> None:
    """Write ``results.json`` and ``tables.md`` into ``where.out`` and the tables into the write-up (between its
    ``marker`` comments)."""
    where.out.mkdir(parents=True, exist_ok=True)
    (where.out / "results.json").write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    (where.out / "tables.md").write_text(tables, encoding="utf-8")
    if where.writeup is not None:
        refresh_tables(where.writeup, tables, marker)
