"""STS dev and selection inputs as tables and datasets (issue 46): real STS-B dev pairs written as jsonl, csv, tsv,
parquet, a ``save_to_disk`` folder and an ``hf:`` name read as the same pairs (sentences, scores, genres) as the
STS-B file, and score exactly as it does; today's STS-B text ``.csv`` files stay STS-B files; a table without the
columns is one line naming the columns it has; selection inputs and the pipeline's dev file take them too."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from helpers.cli import invoke_cli

from jtcse.errors import JTCSEError
from jtcse.evaluation.sts import STSDevEvaluator, is_sts_table, read_sts_input, read_stsb_file

pytestmark = pytest.mark.slow  # datasets (its import and its json/csv builders) costs seconds before the first row

FORMATS = ("jsonl", "csv", "tsv", "parquet", "saved", "hf")
ROWS = 60


@pytest.fixture(scope="module")
def sts(shared_data, tmp_path_factory) -> dict:
    """The first :data:`ROWS` pairs of STS-B dev (../shared/data) as an STS-B file and as each table format (the
    fields as the file holds them, the score as a number, beside the genre and an id), written by ``datasets``."""
    from datasets import Dataset

    folder = tmp_path_factory.mktemp("sts")
    lines = (shared_data / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()[:ROWS]
    paths = {"stsb": folder / "sts-dev.csv"}
    paths["stsb"].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    fields = [line.split("\t") for line in lines]
    table = Dataset.from_dict(
        {
            "id": [int(row[3]) for row in fields],
            "genre": [row[0] for row in fields],
            "sentence1": [row[5] for row in fields],
            "sentence2": [row[6] for row in fields],
            "score": [float(row[4]) for row in fields],
        }
    )
    for kind in ("jsonl", "csv", "tsv", "parquet"):
        paths[kind] = folder / f"dev.{kind}"
    table.to_json(paths["jsonl"])
    table.to_csv(paths["csv"], index=False)
    table.to_csv(paths["tsv"], index=False, sep="\t")
    table.to_parquet(paths["parquet"])
    table.save_to_disk(folder / "saved")
    paths["saved"] = folder / "saved"
    (folder / "hub").mkdir()
    table.to_parquet(folder / "hub" / "train.parquet")  # a local dataset folder stands in for a cached Hub name
    paths["hf"] = f"hf:{folder / 'hub'}"
    return paths


@pytest.fixture(scope="module")
def model(tiny_bert):
    from jtcse.modeling.loading import load_model

    return load_model(tiny_bert, role="encode", device="cpu")


@pytest.mark.parametrize("kind", FORMATS)
def test_each_format_is_the_stsb_file_and_scores_exactly_as_it(sts, model, kind):
    expected = read_stsb_file(sts["stsb"])
    pairs = read_sts_input(sts[kind])
    assert is_sts_table(sts[kind]) and not is_sts_table(sts["stsb"])
    assert (pairs.sentences1, pairs.sentences2, pairs.genres) == (
        expected.sentences1,
        expected.sentences2,
        expected.genres,
    )
    assert np.array_equal(pairs.scores, expected.scores) and len(pairs) == ROWS
    score = STSDevEvaluator(sts[kind])(model)["sts-dev_spearman_cosine"]
    assert score == STSDevEvaluator(sts["stsb"])(model)["sts-dev_spearman_cosine"]


def test_stsb_text_files_stay_stsb_and_tables_are_read_by_column_name(sts, tmp_path):
    """A tab-separated ``.csv``/``.tsv`` of STS-B lines (with or without its header) is read as today; a table whose
    header names the columns is read by name, in any order, beside any other columns."""
    headed = tmp_path / "headed.tsv"
    body = sts["stsb"].read_text(encoding="utf-8")
    headed.write_text("genre\tfile\tyear\tid\tscore\tsentence1\tsentence2\n" + body, encoding="utf-8")
    reordered = tmp_path / "reordered.tsv"
    rows = [line.split("\t") for line in body.splitlines()]
    reordered.write_text(
        "score\tsentence2\tfile\tyear\tsentence1\tgenre\tid\n"
        + "".join(f"{r[4]}\t{r[6]}\t{r[1]}\t{r[2]}\t{r[5]}\t{r[0]}\t{r[3]}\n" for r in rows if '"' not in r[5] + r[6]),
        encoding="utf-8",
    )
    expected = read_stsb_file(sts["stsb"])
    assert not is_sts_table(headed) and read_sts_input(headed).sentences1 == expected.sentences1
    assert is_sts_table(reordered)
    kept = [i for i, r in enumerate(rows) if '"' not in r[5] + r[6]]
    pairs, wanted = read_sts_input(reordered), expected.take(kept)
    assert (pairs.sentences1, pairs.sentences2, pairs.genres) == (wanted.sentences1, wanted.sentences2, wanted.genres)
    assert np.array_equal(pairs.scores, wanted.scores)


def test_a_bad_table_is_one_line_naming_what_it_has(tmp_path):
    from datasets import Dataset

    wrong = tmp_path / "wrong.parquet"
    Dataset.from_dict({"a": ["x", "y"], "b": ["z", "w"], "label": [1.0, 2.0]}).to_parquet(wrong)
    with pytest.raises(JTCSEError) as raised:
        read_sts_input(wrong)
    assert str(raised.value) == (
        f"{wrong}: an STS table needs the columns sentence1, sentence2, score or sentence_A, sentence_B, "
        "relatedness_score; its columns are a (string), b (string), label (float64)."
    )
    bad_score = tmp_path / "bad.jsonl"
    bad_score.write_text(
        '{"sentence1": "a", "sentence2": "b", "score": "4"}\n{"sentence1": "c", "sentence2": "d", "score": "n/a"}\n',
        encoding="utf-8",
    )
    with pytest.raises(JTCSEError, match=r"bad.jsonl: row 2: score 'n/a' is not a number\.$"):
        read_sts_input(bad_score)
    no_text = tmp_path / "none.jsonl"
    no_text.write_text(
        '{"sentence1": "a", "sentence2": "b", "score": 4}\n{"sentence1": null, "sentence2": "d", "score": 1}\n',
        encoding="utf-8",
    )
    with pytest.raises(JTCSEError, match=r"none.jsonl: row 2 has no text in column 'sentence1'"):
        read_sts_input(no_text)
    with pytest.raises(JTCSEError, match=r"STS file not found: .*missing.parquet"):
        read_sts_input(tmp_path / "missing.parquet")


def test_selection_inputs_as_tables_are_the_stsb_pairs_fingerprinted_by_content(sts, tmp_path):
    from jtcse.training.selection import selection_fingerprint, selection_sets

    expected = read_stsb_file(sts["stsb"])
    specs = [str(sts["parquet"]), str(sts["saved"]), sts["hf"], f"sts:{sts['jsonl']}"]
    sets = selection_sets(specs, None)
    for spec in specs:
        assert sets[spec].kind == "sts" and sets[spec].pairs.sentences1 == expected.sentences1
        assert np.array_equal(sets[spec].pairs.scores, expected.scores)
    copy = tmp_path / "copy.parquet"
    shutil.copy(sts["parquet"], copy)
    assert selection_fingerprint(copy) == selection_fingerprint(sts["parquet"])  # moved or copied: the same input
    assert selection_fingerprint(sts["hf"]).startswith("sha256:")
    # the dev file as a table too: a selection file holding the dev pairs is refused, whatever the formats
    with pytest.raises(JTCSEError, match=r"shares 60 of its 60 sentence pairs with the dev file"):
        selection_sets([str(sts["saved"])], sts["hf"])
    with pytest.raises(JTCSEError, match="is given twice"):
        selection_sets([sts["hf"], f"sts:{sts['hf']}"], None)


def test_the_pipeline_plan_reads_a_table_dev_file_and_table_selection_files(sts, shared_data, tiny_bert, tmp_path):
    from datasets import Dataset

    from jtcse.pipeline.plan import make_plan
    from jtcse.pipeline.settings import PipelineConfig

    train = read_stsb_file(shared_data / "stsbenchmark" / "sts-train-selection.csv").take(range(30))
    selection = tmp_path / "selection.parquet"
    Dataset.from_dict({"sentence1": train.sentences1, "sentence2": train.sentences2, "score": train.scores}).to_parquet(
        selection
    )
    values = dict(tower_a=tiny_bert, dev_file=sts["hf"], selection_files=[str(selection)])
    plan = make_plan(PipelineConfig.from_values(values), tmp_path / "run", "cpu")
    assert plan.dev_file == sts["hf"] and list(plan.selection) == [str(selection)]
    assert plan.selection[str(selection)].pairs.sentences1 == train.sentences1
    for missing in (str(tmp_path / "no.parquet"), f"hf:{tmp_path / 'no_such'}"):
        with pytest.raises(JTCSEError, match="dev file not found|cannot read STS file hf:"):
            make_plan(PipelineConfig.from_values({**values, "dev_file": missing}), tmp_path / "run", "cpu")


def _simcse(tower, corpus, dev_file, out):
    run = invoke_cli("simcse", "--model", tower, "--corpus", corpus, "-o", out, "--max-steps", "2",
                     "--eval-steps", "1", "--batch-size", "8", "--max-seq-length", "16", "--dev-file", dev_file,
                     "--checkpoint", "best-dev")  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads((out / "run_summary.json").read_text())


def test_simcse_scores_an_hf_dev_file_as_its_stsb_file(sts, tiny_bert, tmp_path):
    """``--dev-file hf:NAME`` through the command line: the dev Spearman of every step and the model kept by it are
    those of the same pairs as an STS-B file; the run records the dev input by its content."""
    corpus = tmp_path / "corpus.txt"
    lines = sts["stsb"].read_text(encoding="utf-8").splitlines()
    corpus.write_text("".join(line.split("\t")[5] + "\n" for line in lines), encoding="utf-8")
    by_table = _simcse(tiny_bert, corpus, sts["hf"], tmp_path / "table")
    by_file = _simcse(tiny_bert, corpus, sts["stsb"], tmp_path / "file")
    assert (
        by_table["dev_spearman_by_step"] == by_file["dev_spearman_by_step"]
        and len(by_file["dev_spearman_by_step"]) == 2
    )
    assert by_table["best_step"] == by_file["best_step"]
    assert (tmp_path / "table" / "model.safetensors").read_bytes() == (
        tmp_path / "file" / "model.safetensors"
    ).read_bytes()
