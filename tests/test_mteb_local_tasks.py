"""Local MTEB tasks without mteb: which type each layout is, one clear line for each bad layout, the STS file read as
retrieval worked out by hand, and what the results folder may replace. (Scores: tests/test_eval_mteb.py.)"""

from __future__ import annotations

import json
import shutil

import pytest
from helpers.files import snapshot
from helpers.mteb_tasks import STS_CORPUS, STS_QRELS, write_beir, write_classification, write_pairs, write_sts

from jtcse.errors import JTCSEError
from jtcse.evaluation.mteb_local_tasks import infer_task_type, local_task, pairs_as_retrieval, parse_task_spec
from jtcse.evaluation.mteb_results import SUMMARY, WRITTEN_BY, results_output


def test_the_type_comes_from_the_layout(tmp_path):
    stsb = tmp_path / "sts-dev.csv"
    stsb.write_text("main-news\tf\t2012\t0001\t4.0\tA cat.\tA dog.\n", encoding="utf-8")
    (tmp_path / "cls").mkdir()
    for split in ("train", "test"):
        (tmp_path / "cls" / f"{split}.jsonl").write_text('{"text": "a", "label": 1}\n', encoding="utf-8")
    found = {
        name: infer_task_type(path)
        for name, path in {
            "beir": write_beir(tmp_path / "beir"),
            "classification file": write_classification(tmp_path / "cls.jsonl"),
            "classification folder": tmp_path / "cls",
            "pairs": write_pairs(tmp_path / "pairs.tsv"),
            "sts": write_sts(tmp_path / "sts.tsv"),
            "stsb": stsb,
        }.items()
    }
    assert found == {
        "beir": "retrieval",
        "classification file": "classification",
        "classification folder": "classification",
        "pairs": "pair-classification",
        "sts": "sts",
        "stsb": "sts",
    }
    assert parse_task_spec(f"retrieval-pairs:{stsb}") == ("retrieval-pairs", stsb)
    assert parse_task_spec(str(stsb)) == (None, stsb)


def test_sts_rows_as_json_lines_and_as_a_quoted_csv(tmp_path):
    from jtcse.evaluation.mteb_local_tasks import read_sts_pairs

    jsonl = tmp_path / "sts.jsonl"
    jsonl.write_text('{"sentence1": "A, b.", "sentence2": "C.", "score": 4}\n{"sentence1": "D", "sentence2": "E", '
                     '"score": 1.5}\n', encoding="utf-8")  # fmt: skip
    quoted = tmp_path / "sts.csv"
    quoted.write_text('sentence1,sentence2,score\n"A, b.",C.,4\nD,E,1.5\n', encoding="utf-8")
    assert read_sts_pairs(jsonl) == read_sts_pairs(quoted) == (["A, b.", "D"], ["C.", "E"], [4.0, 1.5])
    assert infer_task_type(jsonl) == infer_task_type(quoted) == "sts"


def _bad_layouts(tmp_path):
    """(spec, what the one error line must say) for each bad layout."""
    partial = write_beir(tmp_path / "partial")
    (partial / "qrels" / "test.tsv").unlink()
    no_queries = write_beir(tmp_path / "no_queries")
    (no_queries / "queries.jsonl").unlink()
    no_text = write_beir(tmp_path / "no_text")
    (no_text / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n{"_id": "d2", "title": "t"}\n')
    bad_qrel = write_beir(tmp_path / "bad_qrel")
    (bad_qrel / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\tnope\t1\n")
    both = write_beir(tmp_path / "both")
    for split in ("train", "test"):
        (both / f"{split}.jsonl").write_text('{"text": "a", "label": 1}\n')
    files = {
        "no_test.jsonl": '{"text": "a", "label": 1, "split": "train"}\n',
        "pairs.tsv": "sentence1\tsentence2\tlabel\na\tb\t1\nc\td\t2\n",
        "odd.tsv": "left\tright\tlabel\na\tb\t1\n",
        "both.tsv": "sentence1\tsentence2\tscore\tlabel\na\tb\t1\t1\n",
        "broken.jsonl": '{"text": "a", "label": 1, "split": "train"}\n{"text": "b",\n',
        "header_only.tsv": "sentence1\tsentence2\tscore\n",
        "low.tsv": "sentence1\tsentence2\tscore\na\tb\t3.9\nc\tc\t5\n",
        "mixed.jsonl": '{"text": "a", "label": 1, "split": "train"}\n{"text": "b", "label": "x", "split": "train"}\n'
        '{"text": "c", "label": 1, "split": "test"}\n',
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    t = tmp_path
    return [
        (
            partial,
            f"{partial} is neither a BEIR retrieval folder (missing qrels/test.tsv) nor a classification folder "
            "(missing train.jsonl, test.jsonl).",
        ),
        (f"retrieval:{no_queries}", f"{no_queries} is not a BEIR retrieval folder: queries.jsonl missing."),
        (no_text, f"{no_text / 'corpus.jsonl'}: line 2 has no 'text' (the columns are _id, title)."),
        (bad_qrel, f"{bad_qrel / 'qrels' / 'test.tsv'}: line 3: corpus-id 'nope' is not in corpus.jsonl."),
        (both, f"{both} is both a BEIR folder and a classification folder: say which, e.g. retrieval:{both}"),
        (f"retrieval:{t / 'pairs.tsv'}", f"{t / 'pairs.tsv'} is not a folder; a BEIR retrieval task is a folder"),
        (
            t / "no_test.jsonl",
            f"{t / 'no_test.jsonl'}: no test rows; classification trains on train and scores on test.",
        ),
        (t / "pairs.tsv", f"{t / 'pairs.tsv'}: line 3: label '2' is not 0 or 1."),
        (
            t / "odd.tsv",
            f"{t / 'odd.tsv'}: cannot tell the task type from its columns (label, left, right); expected "
            "sentence1, sentence2, score (sts); sentence1, sentence2, label (pair-classification); text, "
            "label, split (classification).",
        ),
        (t / "both.tsv", f"{t / 'both.tsv'} fits sts and pair-classification: say which, e.g. sts:{t / 'both.tsv'}"),
        (
            t / "broken.jsonl",
            f"{t / 'broken.jsonl'}: line 2 is not JSON (Expecting property name enclosed in double quotes).",
        ),
        (t / "header_only.tsv", f"{t / 'header_only.tsv'} has a header but no rows."),
        (f"retrieval-pairs:{t / 'low.tsv'}", f"{t / 'low.tsv'}: no pair of two different sentences scores 4 or more"),
        (t / "mixed.jsonl", f"{t / 'mixed.jsonl'}: the labels mix numbers and strings; use one kind."),
        (t / "missing.tsv", f"local MTEB task not found: {t / 'missing.tsv'}"),
        (
            "regression:x.tsv",
            "unknown local task type 'regression' in 'regression:x.tsv'; the types are retrieval, "
            "classification, pair-classification, sts, retrieval-pairs.",
        ),
    ]


def test_each_bad_layout_is_one_line_naming_the_file_and_what_is_missing(tmp_path):
    cases = _bad_layouts(tmp_path)
    before = snapshot([tmp_path])
    wrong = []
    for spec, expected in cases:
        try:
            local_task(spec)
        except JTCSEError as err:
            message = str(err)
            if expected not in message or "\n" in message:
                wrong.append((str(spec), message))
        else:
            wrong.append((str(spec), "no error"))
    assert wrong == []
    assert snapshot([tmp_path]) == before


def test_an_sts_file_as_retrieval_by_hand(tmp_path):
    """Pairs scoring 4 or more: sentence1 is a query, sentence2 its relevant document; the corpus is every distinct
    sentence (ids in order of first appearance, first sentences first); a pair below 4 asks nothing."""
    corpus, queries, qrels = pairs_as_retrieval(write_sts(tmp_path / "sts.tsv"))
    assert corpus == {f"s{i}": (sentence, "") for i, sentence in enumerate(STS_CORPUS)}
    assert qrels == STS_QRELS
    assert queries == {
        "s0": "A man plays the guitar.",
        "s1": "A cat sleeps on the sofa.",
        "s2": "Kids play in the park.",
    }
    _, _, lower = pairs_as_retrieval(tmp_path / "sts.tsv", min_score=3.5)
    assert lower["s4"] == {"s9": 1}


def _summary(folder, files, written_by=WRITTEN_BY):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SUMMARY).write_text(json.dumps({"written_by": written_by, "files": files}), encoding="utf-8")


def test_the_results_folder_never_replaces_a_file_jtcse_did_not_write(tmp_path):
    """The results folder is one output of the one mechanism (jtcse.output_paths), its record summary.json: a file
    there that it does not list (at any depth) is refused, and a summary of jtcse before the results layout is the
    record of the task files it names."""
    planned = ["m/r/model_meta.json", "m/r/Local_x.json"]
    results_output(tmp_path / "new").check()  # nothing there yet
    ours = tmp_path / "ours"
    _summary(ours, planned)
    (ours / "m" / "r").mkdir(parents=True)
    for name in planned:
        (ours / name).write_text("{}")
    results_output(ours).check()  # an earlier run's files are replaced
    assert results_output(ours).files == planned
    (ours / "cache" / "results").mkdir(parents=True)  # mteb's result cache, given inside OUTPUT: mteb's own
    (ours / "cache" / "results" / "x.json").write_text("{}")
    results_output(ours, cache_dir=ours / "cache").check()
    with pytest.raises(JTCSEError, match=r"cache was not written by jtcse eval mteb"):
        results_output(ours).check()
    shutil.rmtree(ours / "cache")
    legacy = tmp_path / "legacy"  # jtcse before the results layout: {"model", "tasks"}, OUTPUT/<task>.json
    legacy.mkdir()
    (legacy / SUMMARY).write_text(
        json.dumps({"model": None, "tasks": {"STS17": {"main_score": 0.5, "file": "STS17.json"}}})
    )
    (legacy / "STS17.json").write_text("{}")
    results_output(legacy).check()
    assert results_output(legacy).files == ["STS17.json"]

    mine = tmp_path / "mine"
    (mine / "m" / "r").mkdir(parents=True)
    (mine / "m" / "r" / "Local_x.json").write_text("my notes")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / SUMMARY).write_text('{"my": "summary"}')
    listed_elsewhere = tmp_path / "listed"
    _summary(listed_elsewhere, ["m/r/model_meta.json"])
    (listed_elsewhere / "m" / "r").mkdir(parents=True)
    (listed_elsewhere / "m" / "r" / "Local_x.json").write_text("mine too")
    beside = tmp_path / "beside"
    _summary(beside, planned)
    (beside / "notes.txt").write_text("mine, beside the results")
    a_file = tmp_path / "file.json"
    a_file.write_text("{}")
    before = snapshot([tmp_path])
    for output, expected in [
        (mine, f"{mine / 'm'} was not written by jtcse eval mteb (summary.json does not list it)"),
        (foreign, f"{foreign / SUMMARY} was not written by jtcse eval mteb, so it is never replaced"),
        (listed_elsewhere, f"{listed_elsewhere / 'm/r/Local_x.json'} was not written by jtcse eval mteb"),
        (beside, f"{beside / 'notes.txt'} was not written by jtcse eval mteb"),
        (a_file, f"{a_file} is a file; -o/--output names the folder jtcse eval mteb writes"),
    ]:
        with pytest.raises(JTCSEError) as refused:
            results_output(output).check()
        assert expected in str(refused.value)
    with pytest.raises(JTCSEError, match="holds the input"):
        results_output(ours, inputs=[ours / "m/r/Local_x.json"]).check()
    assert snapshot([tmp_path]) == before


def test_a_task_is_named_by_the_user_or_after_its_folder(tmp_path):
    from jtcse.evaluation.mteb_local_tasks import default_task_name, split_task_name

    (tmp_path / "BIOSSES").mkdir()
    (tmp_path / "STS17" / "en-en").mkdir(parents=True)
    biosses = write_sts(tmp_path / "BIOSSES" / "test.jsonl")
    sts17 = write_sts(tmp_path / "STS17" / "en-en" / "test.jsonl")
    beir = write_beir(tmp_path / "scifact" / "data")
    assert default_task_name(biosses) == "Local_BIOSSES"
    assert default_task_name(sts17) == "Local_STS17_en-en"
    assert default_task_name(beir) == "Local_scifact"  # a generic folder name gives way too
    assert default_task_name(write_sts(tmp_path / "my_sts.tsv")) == "Local_my_sts"
    assert default_task_name(biosses, "_retrieval") == "Local_BIOSSES_retrieval"
    assert split_task_name(f"Mine=sts:{biosses}") == ("Mine", f"sts:{biosses}")
    assert parse_task_spec(f"Mine=sts:{biosses}") == ("sts", biosses)
    assert parse_task_spec(f"Mine={biosses}") == (None, biosses)
    odd = tmp_path / "a=b.tsv"  # an existing path holding '=' is a path
    write_sts(odd)
    assert split_task_name(str(odd)) == (None, str(odd))
    with pytest.raises(JTCSEError, match=r"NAME=PATH takes a name of letters, digits.*e.g. MyTask=data/test.jsonl"):
        split_task_name("my task=x.tsv")
