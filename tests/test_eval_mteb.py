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
    from jtcse.evaluation.mteb_local_tasks import local_sts_task

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
    from jtcse.evaluation.mteb_local_tasks import local_sts_task
    from jtcse.evaluation.mteb_runner import run_mteb

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


# --- every task type from local files, through `jtcse eval mteb`, against mteb's own evaluator -----------------------

LOCAL_TASKS = {  # type: (the task's name, how it is given on the command line)
    "retrieval": ("Local_beir", "beir"),
    "classification": ("Local_reviews", "reviews.jsonl"),
    "pair-classification": ("Local_pairs", "pairs.tsv"),
    "sts": ("Local_sts", "sts.tsv"),
    "retrieval-pairs": ("Local_sts_retrieval", "retrieval-pairs:{root}/sts.tsv"),
}


@pytest.fixture(scope="module")
def mteb_run(tmp_path_factory, tiny_bert):
    """One `jtcse eval mteb --update-card` run of a tiny tower (with a card) on a tiny task of each type, written to
    ROOT/results: (root, the tower, the run, its summary)."""
    import shutil

    from helpers.cli import invoke_cli
    from helpers.mteb_tasks import write_beir, write_classification, write_pairs, write_sts
    from sentence_transformers import SentenceTransformer

    from jtcse.model_card import CardFacts, write_model_card

    root = tmp_path_factory.mktemp("mteb_run")
    tower = root / "tower"
    shutil.copytree(tiny_bert, tower)
    write_model_card(SentenceTransformer(str(tower)), tower, CardFacts(kind="warmup"))
    write_beir(root / "beir")
    write_classification(root / "reviews.jsonl")
    write_pairs(root / "pairs.tsv")
    write_sts(root / "sts.tsv")
    specs = [spec.format(root=root) if "{" in spec else str(root / spec) for _, spec in LOCAL_TASKS.values()]
    options = [item for spec in specs for item in ("--local-task", spec)]
    run = invoke_cli("eval", "mteb", tower, "--tasks", "", *options, "-o", root / "results",
                     "--cache-dir", root / "cache", "--batch-size", 4, "--update-card")  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return root, tower, run, json.loads((root / "results" / "summary.json").read_text())


def _metadata(name: str, task_type: str, main_score: str):
    from mteb.abstasks.task_metadata import TaskMetadata

    return TaskMetadata(name=name, description="reference", dataset={"path": "reference", "revision": "1"},
                        type=task_type, category="t2t", modalities=["text"], eval_splits=["test"],
                        eval_langs=["eng-Latn"], main_score=main_score)  # fmt: skip


def _reference_task(kind: str):
    """The same tiny task built straight on mteb's own task classes from the Python values (mteb's v1 retrieval
    format, mteb's default pair label column), not through jtcse's readers."""
    from datasets import Dataset, DatasetDict
    from helpers import mteb_tasks as data
    from mteb.abstasks.classification import AbsTaskClassification
    from mteb.abstasks.pair_classification import AbsTaskPairClassification
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.sts import AbsTaskSTS

    def rows(pairs, *names):
        return Dataset.from_dict({name: [row[i] for row in pairs] for i, name in enumerate(names)})

    if kind in ("retrieval", "retrieval-pairs"):
        if kind == "retrieval":
            corpus = {k: {"text": text, "title": title} for k, (text, title) in data.CORPUS.items()}
            queries, qrels = data.QUERIES, data.QRELS
        else:
            corpus = {f"s{i}": {"text": text, "title": ""} for i, text in enumerate(data.STS_CORPUS)}
            queries, qrels = {q: data.STS_CORPUS[int(q[1:])] for q in data.STS_QRELS}, data.STS_QRELS

        class Reference(AbsTaskRetrieval):
            metadata = _metadata("Reference", "Retrieval", "ndcg_at_10")
            ignore_identical_ids = kind == "retrieval-pairs"

            def load_data(self, num_proc=None, **kwargs):
                self.corpus, self.queries, self.relevant_docs = {"test": corpus}, {"test": queries}, {"test": qrels}
                self.data_loaded = True

        return Reference()
    if kind == "classification":  # the file's text labels, numbered in sorted order
        numbered = {"neg": 0, "pos": 1}
        train, test = ([(text, numbered[label]) for text, label in part] for part in (data.TRAIN, data.TEST))
        dataset = DatasetDict({"train": rows(train, "text", "label"), "test": rows(test, "text", "label")})
        base, metadata, extra = AbsTaskClassification, _metadata("Reference", "Classification", "accuracy"), {}
    elif kind == "pair-classification":
        dataset = DatasetDict({"test": rows(data.PAIRS, "sentence1", "sentence2", "labels")})
        base, metadata, extra = AbsTaskPairClassification, _metadata("Reference", "PairClassification", "max_ap"), {}
    else:
        dataset = DatasetDict({"test": rows(data.STS, "sentence1", "sentence2", "score")})
        base, metadata, extra = AbsTaskSTS, _metadata("Reference", "STS", "cosine_spearman"), {"max_score": 5}

    def load_data(self, num_proc=None, **kwargs):
        self.dataset, self.data_loaded = dataset, True

    return type("Reference", (base,), {"metadata": metadata, "load_data": load_data, "min_score": 0, **extra})()


def _reference_scores(tower: str, kind: str) -> dict:
    """mteb's scores of the tower on the reference task, its own evaluator called directly."""
    from mteb.models import SentenceTransformerEncoderWrapper

    from jtcse.modeling.loading import load_model

    model = SentenceTransformerEncoderWrapper(load_model(tower))  # its own max_seq_length, as eval mteb loads it
    return _reference_task(kind).evaluate(model, encode_kwargs={"batch_size": 4})["default"]


@pytest.mark.cli
@pytest.mark.parametrize("kind", list(LOCAL_TASKS))
def test_each_local_task_type_scores_as_mteb_scores_it(mteb_run, kind):
    root, tower, run, summary = mteb_run
    name, _ = LOCAL_TASKS[kind]
    entry = summary["tasks"][name]
    reference = _reference_scores(str(tower), kind)
    assert entry["main_score"] == pytest.approx(reference["main_score"], abs=1e-9)
    assert f"{name}: {entry['main_score']:.4f} ({entry['metric']})" in run.stdout
    saved = json.loads((root / "results" / entry["file"]).read_text())["scores"]["test"][0]  # to 6 digits
    numbers = {key: value for key, value in reference.items() if isinstance(value, float | int)}
    assert {key: saved[key] for key in numbers} == pytest.approx(numbers, abs=1e-6, nan_ok=True)
    assert len(numbers) > 5  # every metric mteb reports for the type, not the main score alone


def test_the_results_folder_is_read_by_mtebs_own_reader(mteb_run):
    import mteb

    root, tower, _, summary = mteb_run
    assert summary["model"]["name"] == str(tower.resolve())
    folder = root / "results" / str(tower.resolve()).replace("/", "__") / summary["model"]["revision"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["model_meta.json", *(f"{name}.json" for name, _ in LOCAL_TASKS.values())]
    )
    assert sorted(summary["files"]) == sorted(str(p.relative_to(root / "results")) for p in folder.iterdir())
    assert all(entry["bytes"] > 0 and len(entry["sha256"]) == 64 for entry in summary["files"].values())
    (model_result,) = mteb.ResultCache(root).load_results().model_results  # reads ROOT/results/<model>/<revision>
    assert (model_result.model_name, model_result.model_revision) == (
        str(tower.resolve()),
        summary["model"]["revision"],
    )
    loaded = {result.task_name: result.get_score() for result in model_result.task_results}
    expected = {name: entry["main_score"] for name, entry in summary["tasks"].items()}
    assert loaded == pytest.approx(expected, abs=1e-6)


def test_update_card_writes_the_main_scores_into_the_model_index(mteb_run):
    import yaml

    from jtcse.model_card import MTEB_BEGIN, STS_BEGIN

    _, tower, run, summary = mteb_run
    text = (tower / "README.md").read_text(encoding="utf-8")
    front, body = text.split("---\n", 2)[1:]
    (entry,) = yaml.safe_load(front)["model-index"]
    found = {r["dataset"]["name"]: (r["task"]["type"], r["metrics"][0]["type"], r["metrics"][0]["value"])
             for r in entry["results"]}  # fmt: skip
    assert found == {
        name: (task["hf_task_type"], task["metric"], round(task["main_score"], 4))
        for name, task in summary["tasks"].items()
    }
    assert found["Local_beir"][:2] == ("text-retrieval", "ndcg_at_10")
    assert found["Local_sts"][:2] == ("sentence-similarity", "cosine_spearman")
    assert body.count(MTEB_BEGIN) == 1 and STS_BEGIN in body and body.index(STS_BEGIN) < body.index(MTEB_BEGIN)
    score = summary["tasks"]["Local_reviews"]["main_score"]
    assert f"| Local_reviews | Classification | `accuracy` | {round(score, 4) * 100:.2f} |" in body
    assert f"updated {tower / 'README.md'}" in run.stdout


def test_retrieval_check_is_the_retrieval_pairs_task(mteb_run):
    from jtcse.evaluation.retrieval_check import retrieval_check
    from jtcse.modeling.loading import FULL_LENGTH, load_model

    root, tower, _, summary = mteb_run
    check = retrieval_check(load_model(str(tower), max_seq_length=FULL_LENGTH), root / "sts.tsv", batch_size=4)
    assert check["ndcg_at_10"] == pytest.approx(summary["tasks"]["Local_sts_retrieval"]["main_score"], abs=1e-9)
    assert check["main_score"] == check["ndcg_at_10"]
    assert (check["queries"], check["corpus"], check["relevant_pairs"], check["min_score"]) == (3, 11, 3, 4.0)


@pytest.mark.cli
def test_a_benchmark_by_name_skips_what_is_offline(local_tsv, tiny_bert, tmp_path):
    from helpers.cli import invoke_cli, one_error_line

    run = invoke_cli("eval", "mteb", tiny_bert, "--benchmark", "BRIGHT", "--local-task", local_tsv,
                     "-o", tmp_path / "out", "--cache-dir", tmp_path / "cache")  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["benchmark"] == "BRIGHT" and list(summary["tasks"]) == ["BrightRetrieval", "Local_my_sts"]
    assert "error" in summary["tasks"]["BrightRetrieval"] and "BrightRetrieval: not run" in run.stdout
    assert "ran 1 of 2 tasks: Local_my_sts; not run: BrightRetrieval" in run.stdout
    line = one_error_line(invoke_cli("eval", "mteb", tiny_bert, "--benchmark", "NoSuchBenchmark", "-o", tmp_path / "x"))
    assert "unknown MTEB benchmark 'NoSuchBenchmark'" in line and not (tmp_path / "x").exists()


@pytest.mark.cli
def test_a_results_folder_holding_a_file_of_mine_is_refused_before_anything_runs(local_tsv, tiny_bert, tmp_path):
    from helpers.cli import invoke_cli, one_error_line
    from helpers.files import snapshot

    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text('{"my": "own summary"}', encoding="utf-8")
    before = snapshot([tmp_path])
    run = invoke_cli("eval", "mteb", tiny_bert, "--tasks", "", "--local-task", local_tsv, "-o", out,
                     "--cache-dir", tmp_path / "cache")  # fmt: skip
    assert "summary.json was not written by jtcse eval mteb, so it is never replaced" in one_error_line(run)
    assert snapshot([tmp_path]) == before and not (tmp_path / "cache" / "results").exists()  # nothing evaluated


def test_tasks_named_after_their_folders_run_together_and_a_name_is_the_users(local_tsv, tiny_bert, tmp_path):
    """BIOSSES/test.jsonl and STS17/en-en/test.jsonl were both 'Local_test' (refused); NAME=PATH names a task."""
    from jtcse.evaluation.mteb_runner import run_mteb
    from jtcse.modeling.loading import load_model

    for folder in ("BIOSSES", "STS17/en-en", "other/BIOSSES"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "test.jsonl").write_text(
            "".join(json.dumps({"sentence1": a, "sentence2": b, "score": s}) + "\n" for a, b, s in ROWS),
            encoding="utf-8",
        )
    model = load_model(tiny_bert)
    specs = [tmp_path / "BIOSSES" / "test.jsonl", tmp_path / "STS17" / "en-en" / "test.jsonl", f"Mine=sts:{local_tsv}"]
    summary = run_mteb(model, (), tmp_path / "out", local_tasks=specs, batch_size=4, cache_dir=tmp_path / "cache")
    assert sorted(summary["tasks"]) == ["Local_BIOSSES", "Local_STS17_en-en", "Mine"]
    twins = [tmp_path / "BIOSSES" / "test.jsonl", tmp_path / "other" / "BIOSSES" / "test.jsonl"]
    with pytest.raises(JTCSEError) as refused:
        run_mteb(model, (), tmp_path / "out2", local_tasks=twins, batch_size=4, cache_dir=tmp_path / "cache")
    assert str(refused.value) == (
        f"two tasks are named Local_BIOSSES (--local-task {twins[0]} and --local-task {twins[1]}); their results "
        f"would share one file. Name a local one: --local-task OTHER_NAME={twins[1]}"
    )
    assert not (tmp_path / "out2").exists()
