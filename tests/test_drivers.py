"""The reproduction drivers (evaluation/drivers): the formula they share with the pipeline (an ensemble's cosine
from its members', jtcse.training.selection.concat_cosine), their reports rebuilt from the committed rows, their
shared options."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def test_concat_cosine_is_the_cosine_of_the_weighted_concat_of_unit_vectors():
    from jtcse.training.selection import concat_cosine

    rng = np.random.default_rng(0)
    members = [rng.normal(size=(2, 5, width)) for width in (3, 4, 6)]  # (side of the pair, pair, width)
    unit = [m / np.linalg.norm(m, axis=-1, keepdims=True) for m in members]
    weights = [1.0, 0.5, 2.0]
    concat = np.concatenate([w * u for w, u in zip(weights, unit, strict=True)], axis=-1)
    expected = (concat[0] * concat[1]).sum(-1) / np.linalg.norm(concat[0], axis=-1) / np.linalg.norm(concat[1], axis=-1)
    own = [(u[0] * u[1]).sum(-1) for u in unit]
    np.testing.assert_allclose(concat_cosine(own, weights), expected, rtol=1e-12)
    np.testing.assert_allclose(concat_cosine(own[:1], [3.0]), own[0])  # one member: its own cosines
    with pytest.raises(ValueError):
        concat_cosine(own, weights[:2])


def _rows_from(results: Path, work: Path) -> Path:
    """The row files a driver's committed ``results.json`` was built from, written back into ``work/results``."""
    rows = json.loads(results.read_text(encoding="utf-8"))["rows"]
    (work / "results").mkdir(parents=True)
    for name, row in rows.items():
        (work / "results" / f"{name}.json").write_text(json.dumps(row, indent=2, default=str), encoding="utf-8")
    return work


# (driver, its results folder, its write-up: None where the committed tables predate the report's code, the
# write-up's markers around the driver's tables)
DRIVERS = [
    ("repro_cpu", "repro", "REPRODUCTION.md", "TABLES"),
    ("repro_ucd", "ucd", "UCD.md", "TABLES"),
    ("repro_default", "default", None, "TABLES"),
    ("members", "members", "DEFAULTS.md", "MEMBERS"),
    ("twin_default", "twin_default", "DEFAULTS.md", "TWIN_DEFAULT"),
]


@pytest.mark.parametrize(("driver", "results", "writeup", "marker"), DRIVERS)
def test_a_report_rebuilt_from_the_committed_rows_is_the_committed_report(driver, results, writeup, marker, tmp_path):
    """What ``--report-only`` writes from the rows in ``evaluation/<results>/results.json``: the same
    ``results.json``, ``tables.md`` and write-up tables, byte for byte (the result files keep their keys)."""
    import importlib

    from evaluation.drivers.cli import Places, publish

    module = importlib.import_module(f"evaluation.drivers.{driver}")
    committed = REPO / "evaluation" / results
    work = _rows_from(committed / "results.json", tmp_path / "work")
    report = tmp_path / "writeup.md"
    if writeup:
        report.write_bytes((REPO / "evaluation" / writeup).read_bytes())
    built, tables = module.build_report(work, module.FULL)
    publish(Places(work, tmp_path / "out", report if writeup else None), built, tables, marker=marker)
    assert (tmp_path / "out" / "results.json").read_bytes() == (committed / "results.json").read_bytes()
    if writeup:
        assert (tmp_path / "out" / "tables.md").read_bytes() == (committed / "tables.md").read_bytes()
        assert report.read_bytes() == (REPO / "evaluation" / writeup).read_bytes()


def test_the_pipelines_default_weights_are_the_twin_default_drivers_choice():
    """``ENSEMBLE_WEIGHTS`` (what ``jtcse pipeline`` uses without a selection file) holds what the twin-default
    driver chose from its committed rows (each variant's weights, trained members first, the start last)."""
    from dataclasses import asdict

    from evaluation.drivers.twin_default_report import chosen_weights
    from evaluation.drivers.twin_default_settings import FULL
    from jtcse.pipeline.settings import ENSEMBLE_WEIGHTS

    results = json.loads((REPO / "evaluation" / "twin_default" / "results.json").read_text(encoding="utf-8"))
    assert chosen_weights(results["rows"], FULL) == results["ensemble_weights"]
    held = {name: list(weights) for name, weights in asdict(ENSEMBLE_WEIGHTS).items()}
    assert held == results["ensemble_weights"]


def test_every_driver_takes_the_shared_options():
    import importlib

    from evaluation.drivers.cli import driver_parser, places

    for driver in ("repro_cpu", "repro_ucd", "repro_default", "members", "twin_default"):
        module = importlib.import_module(f"evaluation.drivers.{driver}")
        args = driver_parser(module.__doc__, module.STAGES, threads=1).parse_args(["--quick", "--out", "x"])
        assert (args.quick, args.out, args.report_only, args.stages) == (
            True,
            Path("x"),
            False,
            ",".join(module.STAGES),
        )
        assert places(args, "ucd", "UCD.md").writeup is None  # a quick run leaves the write-up alone
