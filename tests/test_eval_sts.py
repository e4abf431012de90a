"""SentEval-protocol STS: file layouts, the 'all' Spearman per year, reporting, the CLI."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from helpers.cli import invoke_cli
from helpers.sts import LETTERS, LetterCounts, write_senteval_dir
from scipy.stats import spearmanr

from jtcse.errors import JTCSEError
from jtcse.evaluation.senteval_data import load_task, read_sick_file, read_sts_input_gold
from jtcse.evaluation.senteval_sts import percent, run_senteval_sts
from jtcse.evaluation.sts import STSDevEvaluator, read_stsb_file


@pytest.fixture
def senteval_dir(tmp_path):
    root = tmp_path / "senteval"
    return root, write_senteval_dir(root)


def test_all_seven_tasks_match_direct_spearman(senteval_dir):
    root, expected = senteval_dir
    report = run_senteval_sts(LetterCounts(), root)
    assert report.missing == {}
    for task, rho in expected.items():
        assert report.results[task].spearman == pytest.approx(rho, abs=1e-12), task
    out = report.to_json()
    assert set(expected) | {"avg"} <= set(out)
    assert out["STS13"] == float(f"{expected['STS13'] * 100:.2f}")
    assert out["avg"] == pytest.approx(round(sum(out[t] for t in expected) / 7, 2), abs=1e-9)
    # blank gold lines dropped: 5 scored pairs per subset
    assert report.results["STS14"].n_pairs == 5 * 6
    assert out["sentences_per_second"] > 0 and out["details"]["STS12"]["sentences_per_second"] > 0


def test_reader_normalises_whitespace_and_ignores_extra_columns(tmp_path):
    inp, gold = tmp_path / "STS.input.x.txt", tmp_path / "STS.gs.x.txt"
    inp.write_text("  two   spaces\there \t\tthird\nkeep\tme\r\ndrop\tthis\nlast\tone\n", encoding="utf-8")
    gold.write_text("1.5\n2\n\n4.25\n", encoding="utf-8")
    pairs = read_sts_input_gold(inp, gold)
    assert pairs.sentences1 == ["two spaces", "keep", "last"]
    assert pairs.sentences2 == ["here", "me", "one"]
    assert pairs.scores.tolist() == [1.5, 2.0, 4.25]


def test_sick_reader_uses_header_columns(tmp_path):
    path = tmp_path / "SICK_test_annotated.txt"
    path.write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n1\tA  dog\tA cat\t3.6\tNEUTRAL\n\n",
        encoding="utf-8",
    )
    pairs = read_sick_file(path)
    assert (pairs.sentences1, pairs.sentences2, pairs.scores.tolist()) == (["A dog"], ["A cat"], [3.6])


def test_each_unique_sentence_encoded_once_sorted_by_length(senteval_dir):
    root, _ = senteval_dir
    model = LetterCounts()
    run_senteval_sts(model, root, tasks=["STS12"])
    assert len(model.calls) == 1
    sentences = model.calls[0]
    assert len(sentences) == len(set(sentences))
    assert [len(s) for s in sentences] == sorted(len(s) for s in sentences)
    task = load_task(root, "STS12")
    expected = {s for p in task.subsets.values() for s in p.sentences1 + p.sentences2}
    assert set(sentences) == expected


def test_missing_file_and_bad_bytes_are_reported_not_fatal(senteval_dir):
    root, expected = senteval_dir
    (root / "STS" / "STS13-en-test" / "STS.gs.FNWN.txt").unlink()
    bad = root / "STS" / "STS15-en-test" / "STS.input.belief.txt"
    bad.write_bytes(bad.read_bytes().replace(b"\n", b"\xff\n", 2))
    (root / "SICK" / "SICK_test_annotated.txt").unlink()
    report = run_senteval_sts(LetterCounts(), root)
    assert set(report.missing) == {"STS13", "STS15", "SICKR"}
    assert "STS.gs.FNWN.txt" in report.missing["STS13"]
    assert "line 1 is not valid UTF-8" in report.missing["STS15"]
    out = report.to_json()
    assert out["STS13"] is None and out["SICKR"] is None
    present = ["STS12", "STS14", "STS16", "STSB"]
    assert out["avg_over"] == present
    assert out["avg"] == pytest.approx(round(sum(percent(expected[t]) for t in present) / 4, 2))
    assert "STS13: not evaluated" in report.table()


@pytest.mark.parametrize(
    "inp, gold, message",
    [
        ("a\tb\nc\td\n", "1\n", "has 2 lines but"),
        ("a b\n", "1\n", "line 1 has no tab"),
        ("a\tb\n", "high\n", "is not a number"),
        ("a\tb\n", "\n", "no scored pairs"),
    ],
)
def test_input_gold_errors(tmp_path, inp, gold, message):
    (tmp_path / "i.txt").write_text(inp, encoding="utf-8")
    (tmp_path / "g.txt").write_text(gold, encoding="utf-8")
    with pytest.raises(JTCSEError, match=message):
        read_sts_input_gold(tmp_path / "i.txt", tmp_path / "g.txt")


@pytest.mark.parametrize(
    "reader, text, message",
    [
        ("stsb", "g\tf\ty\t1\thigh\ta\tb\n", r"s.csv: line 1: score 'high' is not a number\."),
        ("stsb", "\n\n", r"STS-B file .*s.csv has no scored pairs\."),
        (
            "sick",
            "pair_ID\tsentence_A\tsentence_B\trelatedness_score\n1\ta\tb\tx\n",
            r"s.csv: line 2: score 'x' is not a number\.",
        ),
        ("sick", "pair_ID\tsentence_A\tsentence_B\trelatedness_score\n", r"SICK file .*s.csv has no scored pairs\."),
    ],
)
def test_every_sts_reader_reports_scores_and_empty_files_the_same_way(tmp_path, reader, text, message):
    path = tmp_path / "s.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(JTCSEError, match=message):
        (read_stsb_file if reader == "stsb" else read_sick_file)(path)


def test_run_errors(tmp_path):
    with pytest.raises(JTCSEError, match="not a directory"):
        run_senteval_sts(LetterCounts(), tmp_path / "nope")
    with pytest.raises(JTCSEError, match="unknown task"):
        run_senteval_sts(LetterCounts(), tmp_path, tasks=["STS11"])
    with pytest.raises(JTCSEError, match="no STS task could be read"):
        run_senteval_sts(LetterCounts(), tmp_path)


def test_task_dir_override(tmp_path):
    write_senteval_dir(tmp_path / "a", years=(16,))
    moved = tmp_path / "sts2016-somewhere"
    (tmp_path / "a" / "STS" / "STS16-en-test").rename(moved)
    report = run_senteval_sts(LetterCounts(), tmp_path / "a", tasks=["STS16"], task_dirs={"STS16": str(moved)})
    assert "STS16" in report.results


def test_csv_appends_rows_with_same_header(senteval_dir, tmp_path):
    root, _ = senteval_dir
    report = run_senteval_sts(LetterCounts(), root)
    path = tmp_path / "table.csv"
    report.meta["model"] = "m1"
    report.write_csv(path)
    report.meta["model"] = "m2"
    report.write_csv(path)
    rows = list(csv.DictReader(path.open()))
    assert [r["model"] for r in rows] == ["m1", "m2"]
    assert rows[0]["STSB"] == f"{report.score('STSB'):.2f}" and rows[0]["avg"] == f"{report.average:.2f}"
    other = tmp_path / "other.csv"
    other.write_text("x,y\n1,2\n")
    with pytest.raises(JTCSEError, match="another header"):
        report.write_csv(other)


def test_dev_evaluator_and_table_share_one_implementation(senteval_dir, tiny_bert):
    from jtcse.modeling.loading import load_model

    root, _ = senteval_dir
    model = load_model(tiny_bert, max_seq_length="max")
    path = root / "STS" / "STSBenchmark" / "sts-test.csv"
    metrics = STSDevEvaluator(path, name="dev")(model)
    report = run_senteval_sts(model, root, tasks=["STSB"])
    assert metrics["dev_spearman_cosine"] == pytest.approx(report.results["STSB"].spearman, abs=1e-12)
    assert read_stsb_file(path).sentences1[0] == "abc d"


@pytest.mark.slow  # five model loads
def test_pooling_override_and_untruncated_length(tiny_bert, tiny_roberta):
    import torch

    from jtcse.modeling.loading import load_model

    cls_model = load_model(tiny_bert, max_seq_length="max")
    mean_model = load_model(tiny_bert, pooling="mean", max_seq_length="max")
    assert cls_model.max_seq_length == 68  # tiny towers: 64 + 4 learned positions, all usable by BERT
    assert load_model(tiny_roberta, max_seq_length="max").max_seq_length == 66  # RoBERTa positions start at pad + 1
    assert load_model(tiny_bert, max_seq_length=16).max_seq_length == 16
    sentences = ["a short one", "a rather longer sentence with more words"]
    hf, tok = mean_model[0].auto_model, mean_model[0].tokenizer
    batch = tok(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = hf(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    expected_mean = (hidden * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(mean_model.encode(sentences), expected_mean.numpy(), atol=1e-5)
    np.testing.assert_allclose(cls_model.encode(sentences), hidden[:, 0].numpy(), atol=1e-5)
    with pytest.raises(JTCSEError, match="pooling: Input should be 'cls' or 'mean'"):
        load_model(tiny_bert, pooling="max")
    with pytest.raises(FileNotFoundError, match="model not found"):
        load_model(str(tiny_bert) + "-missing")


def test_cli_sts_writes_json_and_csv(senteval_dir, tiny_bert, tmp_path):
    from typer.testing import CliRunner

    from jtcse.cli import app

    root, _ = senteval_dir
    (root / "SICK" / "SICK_test_annotated.txt").unlink()
    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "sts",
            tiny_bert,
            "--data-dir",
            str(root),
            "-o",
            str(out_json),
            "--output-csv",
            str(out_csv),
            "--pooling",
            "mean",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "SICKR: not evaluated" in result.output and "Avg." in result.output
    data = json.loads(out_json.read_text())
    assert list(data)[:9] == ["written_by", "STS12", "STS13", "STS14", "STS15", "STS16", "STSB", "SICKR", "avg"]
    assert data["written_by"] == "jtcse eval sts"  # its record: a rerun may replace it, nothing else is
    assert data["SICKR"] is None and isinstance(data["STS12"], float)
    assert data["meta"]["pooling"] == "mean"
    assert next(csv.DictReader(out_csv.open()))["avg"] == f"{data['avg']:.2f}"


@pytest.mark.slow
@pytest.mark.cli
def test_cli_reports_user_mistakes_in_one_line(tmp_path, tiny_bert):
    proc = invoke_cli("eval", "sts", tiny_bert, "--data-dir", tmp_path, "--task-dir", "STS12")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("Error: --task-dir takes TASK=PATH")
    assert "Traceback" not in proc.stderr


# -- per genre ---------------------------------------------------------------------------------------

GENRE_ROWS = [  # genre, score, sentence 1, sentence 2 (letter counts make every cosine computable)
    ("main-captions", 5.0, "aab", "aab"),
    ("main-captions", 1.0, "aab", "hhg"),
    ("main-captions", 3.0, "aab", "abb"),
    ("main-news", 0.5, "ccd", "eef"),
    ("main-news", 4.0, "ccd", "ccdd"),
    ("main-news", 2.0, "ccd", "cdd"),
    ("main-forums", 2.5, "gh", "hg"),  # cos 1 but a middling score: forums is the worst genre
    ("main-forums", 4.5, "gh", "ab"),
    ("main-forums", 1.5, "gh", "ggh"),
]


@pytest.fixture()
def genre_file(tmp_path):
    path = tmp_path / "sts-genres.csv"
    path.write_text(
        "".join(f"{g}\tsrc\t2012\t{i:04d}\t{s}\t{a}\t{b}\textra\n" for i, (g, s, a, b) in enumerate(GENRE_ROWS)),
        encoding="utf-8",
    )
    return path


def test_spearman_per_genre_equals_scipy_on_each_genres_rows(genre_file):
    from jtcse.evaluation.sts import ALL_GENRES, cosine_spearman, genre_spearman

    model = LetterCounts()
    out = genre_spearman(model, genre_file)
    assert list(out) == [ALL_GENRES, "main-captions", "main-news", "main-forums"]

    def cos(a, b):
        u, v = (np.array([s.count(c) for c in LETTERS], dtype=float) for s in (a, b))
        return u @ v / np.sqrt((u @ u) * (v @ v))

    for genre in ("main-captions", "main-news", "main-forums"):
        rows = [r for r in GENRE_ROWS if r[0] == genre]
        expected = spearmanr([cos(a, b) for _, _, a, b in rows], [s for _, s, _, _ in rows]).statistic
        assert out[genre] == pytest.approx(expected, abs=1e-12)
    assert out["main-captions"] == pytest.approx(1.0) and out["main-forums"] == pytest.approx(-0.5)
    assert out[ALL_GENRES] == pytest.approx(cosine_spearman(model, read_stsb_file(genre_file)), abs=1e-12)
    assert len(set(map(tuple, model.calls[0]))) == len(model.calls[0])  # each distinct sentence encoded once


def test_genres_follow_their_pairs_and_undefined_genres_are_nan(genre_file):
    from jtcse.evaluation.sts import spearman_by_genre

    pairs = read_stsb_file(genre_file)
    assert pairs.genres == [g for g, *_ in GENRE_ROWS]
    subset = pairs.take([8, 0, 1, 2])
    assert subset.genres == ["main-forums", "main-captions", "main-captions", "main-captions"]
    assert subset.sentences1 == ["gh", "aab", "aab", "aab"] and subset.scores.tolist() == [1.5, 5.0, 1.0, 3.0]
    out = spearman_by_genre(np.array([0.2, 0.9, 0.1, 0.5]), subset)
    assert np.isnan(out["main-forums"])  # one pair: no correlation
    assert out["main-captions"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="3 cosines for 4 pairs"):
        spearman_by_genre(np.zeros(3), subset)


def test_the_senteval_stsb_task_reports_its_genres(senteval_dir, genre_file):
    """The SentEval table keeps its format; its JSON adds each STS-B genre's Spearman ×100 (and the table a line)."""
    from jtcse.evaluation.sts import genre_spearman

    root, _ = senteval_dir
    (root / "STS" / "STSBenchmark" / "sts-test.csv").write_bytes(genre_file.read_bytes())
    report = run_senteval_sts(LetterCounts(), root, tasks=["STSB", "STS12"])
    expected = genre_spearman(LetterCounts(), genre_file)
    out = report.to_json()
    assert out["genres"] == {"STSB": {g: percent(expected[g]) for g in ("main-captions", "main-news", "main-forums")}}
    assert out["STSB"] == percent(expected["all"]) and "STS12" not in out["genres"]  # STS12 rows have no genre
    assert out["details"]["STSB"]["genres"]["main-forums"] == pytest.approx(expected["main-forums"], abs=1e-12)
    assert f"STSB per genre: main-captions {percent(expected['main-captions']):.2f}, main-news" in report.table()


@pytest.mark.slow
def test_cli_scores_one_stsb_file_over_all_pairs_and_per_genre(genre_file, tiny_bert, tmp_path):
    from typer.testing import CliRunner

    from jtcse.cli import app
    from jtcse.evaluation.sts import genre_spearman
    from jtcse.modeling.loading import load_model

    out_json, out_csv = tmp_path / "dev.json", tmp_path / "dev.csv"
    args = ["eval", "sts", tiny_bert, "--stsb-file", str(genre_file), "-o", str(out_json), "--output-csv", str(out_csv)]
    for _ in range(2):  # the second run appends its row to the same table
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
    expected = genre_spearman(load_model(tiny_bert, max_seq_length="max"), genre_file)
    data = json.loads(out_json.read_text())
    assert data["file"] == str(genre_file) and data["meta"]["model"] == tiny_bert
    assert data["spearman"] == {genre: percent(rho) for genre, rho in expected.items()}
    assert data["pairs"] == {"all": 9, "main-captions": 3, "main-news": 3, "main-forums": 3}
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 2 and list(rows[0]) == ["model", "file", "all", "main-captions", "main-news", "main-forums"]
    assert rows[0]["main-news"] == f"{percent(expected['main-news']):.2f}"
    assert "main-captions" in result.output and f"{percent(expected['all']):.2f}" in result.output
    import re

    model, stsb = ["eval", "sts", tiny_bert], ["--stsb-file", str(genre_file)]
    for args, message in (
        (model, "give --data-dir .* or --stsb-file"),
        ([*model, *stsb, "--data-dir", str(tmp_path)], "one of them"),
        ([*model, *stsb, "--update-card"], "--update-card applies to --data-dir, not to --stsb-file"),
        ([*model, "--stsb-file", str(tmp_path / "none.csv")], "STS-B file not found"),
    ):
        result = CliRunner().invoke(app, args)
        assert isinstance(result.exception, JTCSEError) and re.search(message, str(result.exception)), result
