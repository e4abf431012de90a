"""The studies (evaluation/studies/*.toml, evaluation/README.md): every committed report rebuilt from its committed
rows byte for byte, the pipeline's default weights held to the twin-default study's choice, the study file's
templates and choice rules on hand-computable cases, and the one runner end to end on a tiny study."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
STUDIES = sorted((REPO / "evaluation" / "studies").glob("*.toml"))


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


def test_every_study_of_the_write_ups_is_there():
    assert [p.stem for p in STUDIES] == ["default", "members", "repro", "student_keeps", "twin_default", "ucd"]


def _rebuilt(path: Path, tmp_path: Path, plots: bool) -> tuple[list[str], Path]:
    """``--report-only --from-results`` of the study ``path`` into ``tmp_path``: the files written, the study's
    results folder."""
    from evaluation.report import publish
    from evaluation.study import Scope, Study

    study = Study(path)
    committed, writeup = REPO / study.get("results"), REPO / study.get("writeup")
    rows = json.loads((committed / "results.json").read_text(encoding="utf-8"))["rows"]
    copy = tmp_path / "writeup.md"
    copy.write_bytes(writeup.read_bytes())
    publish(Scope(study, rows), tmp_path / "out", copy, plots=plots)
    assert copy.read_bytes() == writeup.read_bytes()
    return sorted(p.name for p in (tmp_path / "out").iterdir()), committed


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_a_report_rebuilt_from_the_committed_rows_is_the_committed_report(path, tmp_path):
    """What ``--report-only --from-results`` writes from the rows in the study's ``results.json``: the same
    ``results.json``, ``tables.md``, write-up tables (and the reproduction's CSV), byte for byte."""
    built, committed = _rebuilt(path, tmp_path, plots=False)
    assert {"results.json", "tables.md"} <= set(built)
    for name in built:
        assert (tmp_path / "out" / name).read_bytes() == (committed / name).read_bytes(), name


@pytest.mark.slow
def test_the_reproductions_plots_rebuilt_from_the_committed_rows_are_the_committed_plots(tmp_path):
    built, committed = _rebuilt(REPO / "evaluation" / "studies" / "repro.toml", tmp_path, plots=True)
    plots = [name for name in built if name.endswith(".png")]
    assert plots == ["alignment_uniformity.png", "cls_energy.png", "sts_dev_rows.png"]
    for name in plots:
        assert (tmp_path / "out" / name).read_bytes() == (committed / name).read_bytes(), name


def test_the_pipelines_default_weights_are_the_twin_default_studys_choice():
    """``ENSEMBLE_WEIGHTS`` (what ``jtcse pipeline`` uses without a selection file) holds what the twin-default study
    chose from its committed rows (each variant's weights, trained members first, the start last)."""
    from dataclasses import asdict

    from evaluation.studies.twin_default import chosen_weights
    from evaluation.study import Scope, Study
    from jtcse.pipeline.settings import ENSEMBLE_WEIGHTS

    results = json.loads((REPO / "evaluation" / "twin_default" / "results.json").read_text(encoding="utf-8"))
    study = Study(REPO / "evaluation" / "studies" / "twin_default.toml")
    assert chosen_weights(Scope(study, results["rows"])) == results["ensemble_weights"]
    held = {name: list(weights) for name, weights in asdict(ENSEMBLE_WEIGHTS).items()}
    assert held == results["ensemble_weights"]


def _study(tmp_path: Path, text: str, rows: dict | None = None):
    from evaluation.study import Scope, Study

    path = tmp_path / "study.toml"
    path.write_text(text, encoding="utf-8")
    return Scope(Study(path), rows or {})


def test_a_template_is_a_value_where_it_stands_alone_and_text_where_it_does_not(tmp_path):
    scope = _study(
        tmp_path,
        "[settings]\nseeds = [1, 2, 3]\nlrs = [1e-5, 3e-5]\ngrid = { base = {}, short = { max_steps = 25 } }\n"
        'dev_pairs = "none"\n[define]\nargs = ["{grid[tag]}", { seed = "{seed}" }]\n'
        '[imports]\nweights = "jtcse.training.selection.WEIGHT_GRID"\n',
    )
    from jtcse.training.selection import WEIGHT_GRID

    assert scope.resolve("{weights}") is WEIGHT_GRID  # imported from jtcse, never typed in the study
    names = {"tag": "short", "seed": 2}
    assert scope.resolve("{lrs}") == [1e-5, 3e-5]  # alone: the value, typed
    assert scope.resolve("twin_lr{lrs[1]:g}_s{seed}", names) == "twin_lr3e-05_s2"  # in text: formatted
    assert scope.resolve("{grid[tag]}", names) == {"max_steps": 25}  # an index that is a name is its value
    assert scope.resolve("{{seed}}") == "{seed}" and scope.study.settings["dev_pairs"] is None
    from evaluation.study import merged

    assert merged(scope.resolve("{args}", names)) == {"max_steps": 25, "seed": 2}
    assert merged([[{"a": {"x": 1}}, {"a": {"y": 2}}], {"b": 3}]) == {"a": {"x": 1, "y": 2}, "b": 3}
    with pytest.raises(KeyError):
        scope.resolve("{nothing}")


def test_an_entry_makes_one_row_a_seed_and_combination(tmp_path):
    scope = _study(
        tmp_path,
        '[settings]\nseeds = [1, 2, 3]\n[[rows]]\nname = "twin_{tag}_s{seed}"\neach = { tag = ["a", "b"] }\n'
        'from = ["w_s{seed}", "w_s{next}"]\n[[rows]]\nname = "w_s{seed}"\nseeds = "with_b"\n'
        '[[rows]]\nname = "x_s{seed}"\nseeds = "rest"\nlet = { y = "{seed}" }\n',
    )
    twins, warmups, rest = (scope.expand(entry) for entry in scope.study.entries)
    assert [r.name for r in twins] == ["twin_a_s1", "twin_b_s1", "twin_a_s2", "twin_b_s2", "twin_a_s3", "twin_b_s3"]
    assert scope.value(twins[-1], "from") == ["w_s3", "w_s1"]  # the next seed, cyclically
    assert [r.name for r in warmups] == ["w_s1", "w_s2", "w_s3", "w_s4"]  # every seed and seed + 1
    assert [r.names["y"] for r in rest] == [2, 3]


def _rows(totals: dict[str, list[float]], genres: dict[str, float] | None = None) -> dict[str, dict]:
    return {
        f"{key}_s{seed}": {"select_spearman": value, "select_genres": genres or {"g": value}}
        for key, values in totals.items()
        for seed, value in enumerate(values, start=1)
    }


CHOICE = """selection = ["select"]\nstart = "start"\n[settings]\nseeds = [1, 2, 3]\n[choices.best]
among = "{option}_s{seed}"\neach = { option = ["base", "new"] }\n"""


@pytest.mark.parametrize(
    ("new", "rule", "chosen"),
    [
        ([0.811, 0.812, 0.811], "", "new"),  # the best mean
        ([0.811, 0.812, 0.811], 'keep = "base"', "new"),  # differences 0.011, 0.012, 0.011: mean > 2 SE
        ([0.83, 0.78, 0.81], 'keep = "base"', "base"),  # 0.03, -0.02, 0.01: mean 0.0067 < 2 SE 0.029
        ([0.83, 0.78, 0.81], "", "new"),
    ],
)
def test_a_choice_is_the_best_mean_and_with_keep_only_a_paired_win_over_twice_its_error(tmp_path, new, rule, chosen):
    scope = _study(tmp_path, CHOICE + rule, _rows({"base": [0.8, 0.8, 0.8], "new": new}))
    assert scope.lookup("best", {}) == chosen


def test_the_paired_difference_and_its_standard_error_are_those_of_the_seeds_differences():
    """Rows' selection totals over splits of any kind (an STS split's Spearman, another's score), paired by jtcse's
    rule."""
    from evaluation.choices import paired

    rows = [{"a_spearman": a, "b_score": b} for a, b in ((0.5, 0.7), (0.6, 0.6), (0.7, 0.9))]
    base = [{"a_spearman": 0.5, "b_score": 0.5}] * 3
    difference = paired(rows, base, ["a", "b"])  # totals 0.6, 0.6, 0.8 less 0.5: 0.1, 0.1, 0.3
    assert difference.mean == pytest.approx(0.5 / 3)
    assert difference.stderr == pytest.approx(np.std([0.1, 0.1, 0.3], ddof=1) / 3**0.5) and difference.n == 3


def test_a_guarded_choice_keeps_to_the_options_losing_no_genre_to_the_start(tmp_path):
    text = CHOICE
    rows = {
        **_rows({"base": [0.80, 0.80, 0.80]}, {"g": 0.6, "h": 0.9}),
        **_rows({"new": [0.85, 0.85, 0.85]}, {"g": 0.4, "h": 0.95}),
        "start": {"select_spearman": 0.7, "select_genres": {"g": 0.5, "h": 0.5}},
    }
    assert _study(tmp_path, text + 'rule = "genre_safe"', rows).lookup("best", {}) == "base"
    assert _study(tmp_path, text + 'rule = "floor"', rows).lookup("best", {}) == "new"  # the floor is per split
    text += 'rule = "genre_safe"\nmargin = 0.2'  # new's worst genre is 0.1 below the start's: within the margin
    assert _study(tmp_path, text, rows).lookup("best", {}) == "new"


def test_a_choice_waits_for_its_rows(tmp_path):
    from evaluation.study import Waiting

    scope = _study(tmp_path, CHOICE, _rows({"base": [0.8, 0.8, 0.8], "new": [0.9, 0.9]}))
    with pytest.raises(Waiting, match="new_s3"):
        scope.lookup("best", {})


def test_a_report_only_run_without_rows_says_where_they_are_missing(tmp_path):
    import typer
    from typer.testing import CliRunner

    from evaluation.run import main

    app = typer.Typer()
    app.command()(main)
    result = CliRunner().invoke(app, [str(STUDIES[0]), "--report-only", "--work", str(tmp_path)])
    assert result.exit_code == 2 and f"Error: no row files in {tmp_path}/results" in result.output
    assert not list(tmp_path.iterdir())


TINY = """
title = "A tiny study: two distillation objectives through jtcse pipeline, the warm-ups and the twin shared"
start = "start"
selection = ["sts"]

[settings]
seeds = [1, 2]
corpus_lines = 40
eval_max_seq_length = 16

[define]
tower = "TOWER"
small = { max_steps = 2, batch_size = 4, max_seq_length = 16 }
base = { tower_a = "{tower}", precision = "fp32", warmup = "{small}", twin = ["{small}", { mini_batch_size = 2 }], ensemble = { enabled = true }, distill = "{small}" }

[splits]
dev = { file = "dev.csv" }
sts = { file = "selection.csv", without = "dev.csv" }

[[rows]]
name = "start"
kind = "model"
from = ["{tower}"]

[[rows]]
name = "base_s{seed}"
kind = "pipeline"
values = "{base}"

[[rows]]
name = "mse_s{seed}"
kind = "pipeline"
reuse = { tower_a = "base_s{seed}/tower_a", tower_b = "base_s{seed}/tower_b", twin = "base_s{seed}/twin" }
values = ["{base}", { distill = { objective = "mse" } }]

[[rows]]
name = "teacher_s{seed}"
kind = "pipeline_part"
from = ["base_s{seed}"]
args = { folder = "ensemble" }

[choices.objective]
among = "{objective}_s{seed}"
each = { objective = ["base", "mse"] }
keep = "base"

[tables.students]
title = "The students against the row to beat"
rows = [{ label = "the start", row = "start" }, { label = "similarity", row = "base_s{seed}" }, { label = "mse", row = "mse_s{seed}" }]
beat = "base_s{seed}"
kept = { teacher = "teacher_s{seed}", start = "start" }
"""


@pytest.mark.slow
def test_the_runner_trains_scores_resumes_and_reports_a_tiny_study(tmp_path, shared_data, tiny_bert):
    """Pipeline rows with tiny towers and a few steps: the second objective's runs reuse the first's warm-ups and
    twin (copied in, found done), every row is scored, the table holds the paired difference against the row to
    beat and the share of the teacher's gain kept; a second run trains nothing and ``--report-only`` writes the
    same report."""
    data = tmp_path / "data"
    data.mkdir()
    lines = (shared_data / "wiki12k.txt").read_text(encoding="utf-8").splitlines()[:60]
    (data / "wiki12k.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name, source, picks in (
        ("dev.csv", "sts-dev.csv", (0, 700, 1200)),
        ("selection.csv", "sts-train.csv", (0, 3000, 5000)),
    ):
        pairs = (shared_data / "stsbenchmark" / source).read_text(encoding="utf-8").splitlines()
        (data / name).write_text("\n".join(line for i in picks for line in pairs[i : i + 10]) + "\n", encoding="utf-8")
    study = tmp_path / "tiny.toml"
    study.write_text(TINY.replace("TOWER", tiny_bert), encoding="utf-8")
    work, out = tmp_path / "work", tmp_path / "out"
    command = [study, "--data", data, "--work", work, "-o", out]

    first = _study_run(*command, "--threads", "1")
    assert first.exit_code == 0, first.output[-3000:]
    rows = json.loads((out / "results.json").read_text(encoding="utf-8"))["rows"]
    assert sorted(rows) == ["base_s1", "base_s2", "mse_s1", "mse_s2", "start", "teacher_s1", "teacher_s2"]
    for name, row in rows.items():
        assert set(row) >= {"dev_spearman", "sts_spearman", "sts_genres"}, name
    summary = json.loads((work / "mse_s1" / "pipeline_summary.json").read_text(encoding="utf-8"))
    status = {r["stage"]: r["status"] for r in summary["table"]}
    assert status["warmup_a"] == status["twin"] == "skipped (done)" and status["distill"] == "ran"
    assert rows["mse_s1"]["settings"]["distill"]["objective"] == "mse" and "distill" in rows["mse_s1"]["stage_seconds"]
    tables = (out / "tables.md").read_text(encoding="utf-8")
    assert "| similarity | 2 |" in tables and "+0.00 ± 0.00 |" in tables  # the row to beat against itself
    assert json.loads((out / "results.json").read_text(encoding="utf-8"))["choices"]["objective"] in ("base", "mse")

    assert not {"warmup_a", "warmup_b", "twin"} & set(rows["mse_s1"]["stage_seconds"])  # reused: base_s1's
    assert {"warmup_a", "twin", "distill"} <= set(rows["base_s1"]["stage_seconds"])

    (work / "results" / "base_s1.json").unlink()  # a row made again on its finished folder keeps its seconds
    files = {p: p.stat().st_mtime_ns for p in (work / "results").iterdir()}
    again = _study_run(*command)
    assert again.exit_code == 0, again.output[-3000:]
    assert {p: p.stat().st_mtime_ns for p in (work / "results").iterdir() if p.name != "base_s1.json"} == files
    remade = json.loads((out / "results.json").read_text(encoding="utf-8"))["rows"]["base_s1"]
    assert remade["stage_seconds"] == rows["base_s1"]["stage_seconds"]  # the seconds of the run that made them
    shutil.copy(out / "tables.md", tmp_path / "first.md")
    rebuilt = _study_run(*command, "--report-only")
    assert rebuilt.exit_code == 0 and (out / "tables.md").read_bytes() == (tmp_path / "first.md").read_bytes()


def _study_run(*args: object):
    """``python -m evaluation.run ARGS`` from the repository root, in this process (typer's ``CliRunner``: the
    runner trains its rows in its own process as well, so a child would add only its seconds of imports)."""
    import os

    import torch
    import typer
    from typer.testing import CliRunner

    from evaluation.run import main

    app = typer.Typer()
    app.command()(main)
    cwd, threads = os.getcwd(), torch.get_num_threads()
    os.chdir(REPO)
    try:
        return CliRunner().invoke(app, [str(a) for a in args])
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)  # (the runner sets the study's)


TABLE = """selection = ["sts", "trec"]\nstart = "start"\n[settings]\nseeds = [1, 2]
[splits]\nsts = { file = "sts.csv", label = "STS" }\ntrec = { file = "trec", label = "TREC" }
[tables.t]\ntitle = "Students (seed {first})"\nbeat = "base_s{seed}"\nkept = { teacher = "teacher_s{seed}", start = "start" }
columns = [["distill s", "stage_seconds.distill"], ["CPU s", "pipeline_seconds"], ["CPU ×", "pipeline_seconds", "ratio"]]
rows = [{ label = "the start", row = "start" }, { label = "{option}", row = "{option}_s{seed}", each = { option = ["base", "new"] } },
    { label = "new, seed {s}", row = "new_s{s}", beat = "base_s{s}", each = { s = "{seeds}" } },
    { label = "waits", row = "{pick}_s{seed}" }]
[choices.pick]
among = "{o}_s{seed}"
each = { o = ["base", "other"] }
"""


def test_a_scores_table_reads_splits_of_any_kind_and_pairs_the_seeds_by_hand(tmp_path):
    """Each split's main score ×100 (an STS split's Spearman, TREC's accuracy), the selection mean, the paired
    difference against the row to beat (± its SE over the seeds; one seed: none), the share of the teacher's gain
    kept on the selection mean, a field's mean, the seconds of the stages and their ratio to the row to beat's; a
    line whose rows are missing, or that waits on a choice, is left out."""
    from evaluation.report import scores_table

    def row(sts, trec, seconds=None):
        return {"sts_spearman": sts, "sts_genres": {}, "trec_score": trec, "pipeline_seconds": seconds or {}}

    rows = {
        "start": row(0.80, 0.50),  # selection mean 0.65
        "base_s1": row(0.81, 0.55, {"a": 100, "distill": 50}),  # 0.68
        "base_s2": row(0.82, 0.56, {"a": 100, "distill": 50}),  # 0.69
        "new_s1": row(0.83, 0.57, {"a": 100, "distill": 150}),  # 0.70: +0.02
        "new_s2": row(0.82, 0.60, {"a": 100, "distill": 150}),  # 0.71: +0.02
        "teacher_s1": row(0.84, 0.60),  # 0.72
        "teacher_s2": row(0.84, 0.62),  # 0.73: teacher mean 0.725, gain 0.075 over the start
    }
    rows["new_s1"]["stage_seconds"], rows["new_s2"]["stage_seconds"] = {"distill": 140}, {"distill": 160}
    scope = _study(tmp_path, TABLE, rows)
    lines = scores_table(scope, scope.study.get("tables")["t"]).splitlines()
    assert lines[0] == "### Students (seed 1)"
    assert lines[2] == (
        "| model | seeds | STS | TREC | selection mean | Δ vs the row to beat ± SE | share of the teacher's gain kept | "
        "distill s | CPU s | CPU × |"
    )
    assert lines[4] == "| the start | 1 | 80.00 | 50.00 | 65.00 | -3.50 ± 0.50 | 0% | – | – | – |"
    assert lines[5] == "| base | 2 | 81.50 ± 0.71 | 55.50 ± 0.71 | 68.50 ± 0.71 | +0.00 ± 0.00 | 47% | – | 150 | 1.00 |"
    # new: selection mean 0.705, 0.055 of the teacher's 0.075 kept; 250 s a seed against base's 150
    assert (
        lines[6] == "| new | 2 | 82.50 ± 0.71 | 58.50 ± 2.12 | 70.50 ± 0.71 | +2.00 ± 0.00 | 73% | 150 | 250 | 1.67 |"
    )
    assert lines[7] == "| new, seed 1 | 1 | 83.00 | 57.00 | 70.00 | +2.00 | 67% | 140 | 250 | 1.67 |"
    assert lines[8].startswith("| new, seed 2 | 1 | 82.00 | 60.00 | 71.00 | +2.00 | ") and len(lines) == 10


KEEPS = REPO / "evaluation" / "studies" / "student_keeps.toml"


def _flat(values: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in values.items():
        out.update(_flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return out


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_the_student_keeps_study_expands_and_each_lever_moves_one_thing_from_jtcses_defaults(quick):
    """Issue 45's study file: its rows expand (the confirmation waits for the best lever at the first seed, then
    carries it to the other seeds on their own warm-ups and twin); today's default sets nothing but the dev file
    (the corpus and the seed are the runner's); each lever's pipeline settings differ from today's default's in
    what it names alone; its values are jtcse's defaults moved (twice the epochs, twice the twin's steps)."""
    from evaluation.study import Row, Scope, Study, Waiting
    from jtcse.pipeline.settings import PipelineConfig

    study = Study(KEEPS, quick)
    scope, seeds, levers = Scope(study, {}), study.seeds, list(study.define["levers"])
    made = {}
    for entry in study.entries:
        try:
            made.update({row.name: row for row in scope.expand(entry)})
        except Waiting:
            assert entry["stage"] == "confirm"
    parts = ["twin_start_chosen_ensemble_s1", "twin50_twin_s1", "twin50_ensemble_s1"]
    assert list(made) == [
        "shipped",
        *(f"default_s{s}" for s in seeds),
        *(f"default_{part}_s{s}" for s in seeds for part in ("tower_a", "twin", "ensemble")),
        *(f"bf16_s{s}" for s in seeds),
        *(f"bf16_grouped_s{s}" for s in seeds),
        *(f"{lever}_s1" for lever in levers),
        *parts,
    ]
    inputs = {split: f"/data/{split}" for split in study.splits}

    def config(name: str) -> dict:
        row = made[name]
        values = scope.value(Row(name, row.entry, {**row.names, "inputs": inputs}), "values")
        return _flat(PipelineConfig.from_values(values).values())

    today, defaults = config("default_s1"), _flat(PipelineConfig.from_values({"dev_file": "/data/dev"}).values())
    # today's default: jtcse's own (a quick run's: a few steps of each stage), in fp32 as the study began
    assert today["precision"] == "fp32" and (
        quick or {key for key in today if today[key] != defaults[key]} == {"precision"}
    )
    assert {key for key in today if today[key] != config("bf16_s1")[key]} == {"precision"}
    grouped = {key for key in today if today[key] != config("bf16_grouped_s1")[key]}
    assert grouped == {"precision", "warmup.group_by_length", "distill.group_by_length"}
    for lever in levers:
        moved, run = _flat(study.define["levers"][lever]["move"]), config(f"{lever}_s1")
        assert {key for key in today if today[key] != run[key]} == set(moved), lever
    assert config("epochs4_s1")["distill.epochs"] == 2 * defaults["distill.epochs"]
    assert config("twin50_s1")["twin.max_steps"] == (3 if quick else 2 * defaults["twin.max_steps"])
    assert config("lr5e-5_s1")["distill.learning_rate"] != defaults["distill.learning_rate"]
    assert config("twin_start_chosen_s1")["selection_files"] == tuple(inputs[s] for s in study.selection)
    assert scope.value(made["twin50_s1"], "reuse") == {"tower_a": "default_s1/tower_a", "tower_b": "default_s1/tower_b"}

    # the confirmation: the lever whose first-seed student has the best selection total, at the other seeds
    rows = {f"{lever}_s1": {f"{s}_spearman": 0.5 for s in study.selection} for lever in levers}
    rows["twin50_s1"] = {f"{s}_spearman": 0.6 for s in study.selection}
    scope = Scope(study, rows)
    confirm = [row for entry in study.entries if entry.get("stage") == "confirm" for row in scope.expand(entry)]
    later = seeds[1:]
    assert [row.name for row in confirm] == [
        *(f"twin50_s{s}" for s in later),
        *(f"twin50_{part}_s{s}" for s in later for part in ("twin", "ensemble")),
    ]
    assert scope.value(confirm[0], "reuse") == {
        "tower_a": f"default_s{later[0]}/tower_a",
        "tower_b": f"default_s{later[0]}/tower_b",
    }


def test_a_run_makes_only_its_rows_and_seeds_and_reads_the_rows_other_processes_saved(tmp_path, capsys):
    """``--rows`` (globs over names and stages) and ``--seeds`` pick what a process makes, a row already made is not
    listed again, and before each entry the runner reads the row files saved since it started: the confirmation
    that waited for the levers at seed 1 expands once another process has saved them (dry runs: nothing trained)."""
    from evaluation.runner import Runner
    from evaluation.study import Study

    study, work = Study(KEEPS, True), tmp_path / "work"

    def listed(*wanted) -> list[str]:
        Runner(study, work, tmp_path, 1, *wanted).run(dry=True)
        return [line.split()[-1] for line in capsys.readouterr().out.splitlines() if " would make " in line]

    def save(name: str, score: float = 0.5) -> None:  # a row file as another process writes it
        row = {"name": name, **{f"{split}_spearman": score for split in study.splits}}
        (work / "results" / f"{name}.json").write_text(json.dumps(row), encoding="utf-8")

    assert listed((), ["default_s1", "bf16_s1"]) == ["default_s1", "bf16_s1"]
    assert listed([2], ["default", "precision"]) == [
        f"default{p}_s2" for p in ("", "_tower_a", "_twin", "_ensemble")
    ] + ["bf16_s2", "bf16_grouped_s2"]
    levers = [f"{lever}_s1" for lever in study.define["levers"]]
    assert listed((), ["start", "default*_s1", "levers"])[:5] == [
        "shipped",
        "default_s1",
        "default_tower_a_s1",
        "default_twin_s1",
        "default_ensemble_s1",
    ]
    save("default_s1")
    made = listed((), ["start", "default*_s1", "levers"])
    assert "default_s1" not in made and set(levers) < set(made)  # made: not made again
    assert not [name for name in made if not name.endswith("_s1") and name != "shipped"]

    runner = Runner(study, work, tmp_path, 1, [2], ["confirm"])
    runner.run(dry=True)
    assert "waits: choice best_lever" in capsys.readouterr().out
    for lever in levers:
        save(lever, 0.6 if lever == "mse_s1" else 0.5)
    runner.run(dry=True)  # the same runner: it reads the levers saved since it started
    assert [line.split()[-1] for line in capsys.readouterr().out.splitlines()] == ["mse_s2"]


def test_a_row_another_process_is_still_scoring_is_left_out_of_its_report(tmp_path):
    """A row is saved after each split it is scored on (a rerun scores only what it lacks). A process of the same
    study that publishes meanwhile leaves that row out until its last split is in, rather than failing on the split
    it lacks (seen with two processes making issue 43's rows: KeyError 'trec_score')."""
    from evaluation.report import publish
    from evaluation.runner import finished_rows
    from evaluation.study import Scope, Study

    study, results = Study(KEEPS, True), tmp_path / "work" / "results"
    results.mkdir(parents=True)
    for name, splits in (("shipped", study.splits), ("default_s1", study.splits), ("bf16_s1", ["dev", "sts"])):
        row = {"name": name, **{f"{split}_spearman": 0.5 for split in splits}}
        (results / f"{name}.json").write_text(json.dumps(row), encoding="utf-8")
    rows = finished_rows(study, tmp_path / "work")
    assert list(rows) == ["default_s1", "shipped"]
    tables = publish(Scope(study, rows), tmp_path / "out", None, plots=False)
    assert "today's default, seed 1" in tables and "bf16, seed 1" not in tables


KINDS = """start = "start"\nselection = ["sts", "cls", "ret"]\n[settings]\nseeds = [1]\neval_max_seq_length = 16
[splits]\nsts = { file = "sts.csv" }\ncls = { file = "cls" }\nret = { file = "retrieval-pairs:sts.csv" }
[[rows]]\nname = "start"\nkind = "model"\nfrom = ["TOWER"]
"""


@pytest.mark.slow  # imports mteb
def test_a_row_is_scored_once_on_each_split_of_any_kind_as_jtcse_scores_a_selection_input(tmp_path, tiny_bert):
    """An STS file (Spearman, its genres, cosines cached), a classification folder (accuracy on a held-out half of
    its train split) and ``retrieval-pairs:`` (nDCG@10), each the score jtcse's selection scoring gives the same
    model; a split added later is scored alone (the others' scores and cosines are not made again), and a row with
    every split is not made again."""
    import torch
    from helpers.mteb_tasks import TEST, TRAIN
    from helpers.sts import write_stsb

    from evaluation.runner import Runner
    from evaluation.study import Study
    from jtcse.modeling.loading import load_model
    from jtcse.training.selection import selection_scores, selection_sets

    data, work = tmp_path / "data", tmp_path / "work"
    write_stsb(data / "sts.csv")
    write_stsb(data / "dev.csv")
    (data / "cls").mkdir()
    rows = [{"text": text, "label": label} for text, label in TRAIN + TEST]
    (data / "cls" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (data / "cls" / "test.jsonl").write_text("the reported split: never read\n", encoding="utf-8")
    study = tmp_path / "kinds.toml"
    study.write_text(KINDS.replace("TOWER", tiny_bert), encoding="utf-8")
    threads = torch.get_num_threads()
    try:
        runner = Runner(Study(study), work, data, threads=1)
        runner.run()
        row = json.loads((work / "results" / "start.json").read_text(encoding="utf-8"))
        model = load_model(tiny_bert, device="cpu")
        model.max_seq_length = 16
        specs = [str(data / "sts.csv"), str(data / "cls"), f"retrieval-pairs:{data / 'sts.csv'}"]
        expected = selection_scores(model, selection_sets(specs, None))
        assert row["sts_spearman"] == pytest.approx(expected[specs[0]]["all"], abs=1e-6)
        assert row["sts_genres"] == {"main-captions": pytest.approx(expected[specs[0]]["main-captions"], abs=1e-6)}
        assert row["cls_score"] == pytest.approx(expected[specs[1]]["all"], abs=1e-6)
        assert row["ret_score"] == pytest.approx(expected[specs[2]]["all"], abs=1e-6)
        cosines = work / "cos" / "start.sts.npy"
        stamp, seconds = cosines.stat().st_mtime_ns, row["eval_seconds"]

        study.write_text(KINDS.replace("TOWER", tiny_bert) + '\n[splits.dev]\nfile = "dev.csv"\n', encoding="utf-8")
        runner = Runner(Study(study), work, data, threads=1)
        assert not runner.done(runner.find("start"))  # a split is missing
        runner.run()
        again = json.loads((work / "results" / "start.json").read_text(encoding="utf-8"))
        assert again["dev_spearman"] == pytest.approx(row["sts_spearman"])  # the same pairs
        assert {k: again[k] for k in row if k != "eval_seconds"} == {
            k: v for k, v in row.items() if k != "eval_seconds"
        }
        assert again["eval_seconds"] > seconds
        assert cosines.stat().st_mtime_ns == stamp
        file = work / "results" / "start.json"
        before = file.stat().st_mtime_ns
        Runner(Study(study), work, data, threads=1).run()
        assert file.stat().st_mtime_ns == before  # every split scored: not made again
    finally:
        torch.set_num_threads(threads)
