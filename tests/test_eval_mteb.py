"""MTEB path, offline: a custom STS task defined from a local file, and registry tasks failing cleanly."""

from __future__ import annotations

import json

import pytest

from jtcse.errors import JTCSEError

pytestmark = pytest.mark.slow  # every test here imports mteb (seconds on its own)

ROWS = [
    ("A man is playing a guitar.", "A person plays the guitar.", 4.6),
    ("A woman is slicing onions.", "The stock market fell today.", 0.2),
    ("Kids play in the park.", "Children are playing outside.", 4.0),
    ("The cat sleeps on the sofa.", "A dog barks at the mailman.", 0.8),
    ("He is reading a book.", "A man reads a novel.", 3.7),
    ("It is raining heavily.", "The sun is shining.", 1.1),
]


@pytest.fixture
def local_tsv(tmp_path):
    path = tmp_path / "my_sts.tsv"
    path.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in ROWS), encoding="utf-8")
    return path


def test_local_task_score_matches_our_spearman(local_tsv, tiny_bert, tmp_path):
    import numpy as np

    from jtcse.evaluation.mteb_runner import run_mteb
    from jtcse.evaluation.sts import STSPairs, cosine_spearman
    from jtcse.modeling.loading import load_model

    model = load_model(tiny_bert, max_seq_length="max")
    summary = run_mteb(model, (), tmp_path / "out", local_tasks=[local_tsv], batch_size=4, cache_dir=tmp_path / "cache")
    entry = summary["tasks"]["Local_my_sts"]
    pairs = STSPairs([a for a, _, _ in ROWS], [b for _, b, _ in ROWS], np.array([s for *_, s in ROWS]))
    assert entry["main_score"] == pytest.approx(cosine_spearman(model, pairs), abs=1e-6)
    saved = json.loads((tmp_path / "out" / entry["file"]).read_text())
    assert saved["task_name"] == "Local_my_sts"
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary


def test_stsb_format_local_file(tmp_path):
    from jtcse.evaluation.mteb_runner import local_sts_task

    path = tmp_path / "dev.csv"
    path.write_text("".join(f"g\tf\t2012\t{i}\t{s}\t{a}\t{b}\n" for i, (a, b, s) in enumerate(ROWS)), encoding="utf-8")
    task = local_sts_task(path)
    task.load_data()
    assert task.dataset["test"]["sentence1"] == [a for a, _, _ in ROWS]
    assert (task.min_score, task.max_score) == (0.2, 4.6)


def test_unavailable_registry_task_is_reported_not_raised(local_tsv, tiny_bert, tmp_path):
    from typer.testing import CliRunner

    from jtcse.cli import app

    result = CliRunner().invoke(
        app,
        [
            "eval",
            "mteb",
            tiny_bert,
            "--tasks",
            "STS17:en-en",
            "--local-task",
            str(local_tsv),
            "-o",
            str(tmp_path / "out"),
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert "error" in summary["tasks"]["STS17"] and "Traceback" not in summary["tasks"]["STS17"]["error"]
    assert "STS17: not run" in result.output
    assert "ran 1 of 2 tasks: Local_my_sts; not run: STS17" in result.output
    assert "main_score" in summary["tasks"]["Local_my_sts"]


def test_a_run_where_no_task_ran_fails_in_one_line(tiny_bert, tmp_path, monkeypatch, capsys):
    """Offline, a registry task cannot load its data: when nothing ran the command must not exit 0."""
    from jtcse.cli import main

    monkeypatch.setattr("sys.argv", ["jtcse", "eval", "mteb", tiny_bert, "--tasks", "STS17:en-en",
                                     "-o", str(tmp_path), "--cache-dir", str(tmp_path / "cache")])  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    [error] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Error")]
    assert "none of the 1 requested MTEB tasks ran (STS17)" in error
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary["tasks"]) == ["STS17"] and "error" in summary["tasks"]["STS17"]


def test_bad_inputs(tmp_path):
    from jtcse.evaluation.mteb_runner import local_sts_task, run_mteb

    with pytest.raises(JTCSEError, match="not found"):
        local_sts_task(tmp_path / "missing.tsv")
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence1\tsentence2\tscore\na\tb\thigh\n", encoding="utf-8")
    with pytest.raises(JTCSEError, match="line 2: score 'high' is not a number"):
        local_sts_task(bad)
    with pytest.raises(JTCSEError, match="unknown MTEB task"):
        run_mteb(None, ["NoSuchTask"], tmp_path / "out")


def test_two_checkpoints_at_one_path_get_two_result_sets(local_tsv, tmp_path):
    """Same path, other weights: a new revision (weight hash), never the cached results of the first."""
    from jtcse.evaluation.mteb_runner import run_mteb
    from jtcse.modeling.loading import load_model
    from jtcse.testing import make_tiny_tower

    path, cache = tmp_path / "model", tmp_path / "cache"
    summaries = []
    for seed in (0, 1, 0):  # the same path rewritten with other weights, then the first weights again
        make_tiny_tower(path, "bert", seed=seed)
        model = load_model(str(path), max_seq_length="max")
        summaries.append(
            run_mteb(
                model, (), tmp_path / f"out{seed}", local_tasks=[local_tsv], batch_size=4, name=path, cache_dir=cache
            )
        )
    first, second, again = summaries
    assert first["model"]["name"] == second["model"]["name"] == str(path.resolve())
    assert first["model"]["revision"] != second["model"]["revision"]
    assert again["model"] == first["model"]
    scores = [s["tasks"]["Local_my_sts"]["main_score"] for s in summaries]
    assert scores[0] != scores[1] and scores[2] == pytest.approx(scores[0], abs=1e-6)  # cached: 6 digits
    revisions = {p.name for p in (cache / "results").glob("*/*") if p.is_dir()}
    assert revisions == {first["model"]["revision"], second["model"]["revision"]}


def test_changed_local_task_file_is_not_served_from_the_cache(local_tsv, tiny_bert, tmp_path):
    from jtcse.evaluation.mteb_runner import run_mteb
    from jtcse.modeling.loading import load_model

    model = load_model(tiny_bert, max_seq_length="max")

    def run() -> float:
        result = run_mteb(
            model,
            (),
            tmp_path / "out",
            local_tasks=[local_tsv],
            batch_size=4,
            name=tiny_bert,
            cache_dir=tmp_path / "cache",
        )
        return result["tasks"]["Local_my_sts"]["main_score"]

    before = run()
    rows = ROWS[:3] + [(a, b, 5.0 - s) for a, b, s in ROWS[3:]]
    local_tsv.write_text(
        "sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in rows), encoding="utf-8"
    )
    assert run() != before
