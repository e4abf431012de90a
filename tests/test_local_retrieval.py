"""A BEIR folder scores the same three ways (issue 46): through ``jtcse eval mteb --local-task``, through mteb's own
retrieval task object given the same data, and by an independent count (encode, exact search, pytrec_eval:
:mod:`jtcse.testing.beir`), all on the real MiniLM.

The rule that differed: truncation. mteb runs a model at its own ``max_seq_length`` (256 tokens for the MiniLM;
sentence-transformers truncates to its tokenizer's ``model_max_length``), and so were its published scores made;
``eval mteb`` read every input whole (512 tokens), which on a corpus of abstracts scored 0.90 nDCG@10 above the published
figure. The folder has long documents (a paragraph of filler, then the sentence a query looks for), so the rule
shows here: read whole, they move in the ranking (nDCG@1000, every rank of this small corpus); nDCG@10 does not see
them (they rank below 100 either way).
"""

from __future__ import annotations

import json

import pytest
from helpers.cli import invoke_cli

# the real MiniLM encodes about 200 sentences and a few long documents per count; one worker runs the module, so that
# the independent count (a module fixture) is made once, not once per pytest-xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("local_retrieval")]


@pytest.fixture(scope="module")
def beir(tmp_path_factory, shared_data):
    from jtcse.testing.beir import write_beir_folder

    folder = tmp_path_factory.mktemp("beir") / "sts_selection"
    counts = write_beir_folder(
        shared_data / "stsbenchmark" / "sts-train-selection.csv",
        folder,
        filler=shared_data / "wiki12k.txt",
        limit=200,
        long_every=12,
    )
    assert counts["queries"] > 30 and counts["documents"] > 150
    return folder


@pytest.fixture(scope="module")
def counted(beir, minilm_path):
    from sentence_transformers import SentenceTransformer

    from jtcse.testing.beir import independent_count

    model = SentenceTransformer(minilm_path)  # as saved: its own max_seq_length
    assert model.max_seq_length == 256
    return independent_count(model, beir)


def _mteb_own(folder, model_path) -> float:
    """mteb's own retrieval task object (a registry task, its dataset replaced) through ``mteb.evaluate``."""
    import mteb
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer

    from jtcse.testing.beir import read_beir_folder

    rows = [json.loads(line) for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    task = mteb.get_task("SciFact")
    corpus = {key: [row[key] for row in rows] for key in ("_id", "text", "title")}
    corpus["id"] = corpus.pop("_id")
    task.dataset = {
        "default": {
            "test": {
                "corpus": Dataset.from_dict(corpus),
                "queries": Dataset.from_dict({"id": [q["_id"] for q in queries], "text": [q["text"] for q in queries]}),
                "relevant_docs": read_beir_folder(folder)[2],
                "top_ranked": None,
            }
        }
    }
    task.data_loaded = True
    result = mteb.evaluate(SentenceTransformer(model_path), task, cache=None, show_progress_bar=False)
    return result.task_results[0].get_score()


def _eval_mteb(folder, model_path, out, *extra) -> dict:
    run = invoke_cli("eval", "mteb", model_path, "--tasks", "", "--local-task", f"Selection={folder}",
                     "-o", out, "--cache-dir", out.parent / f"{out.name}-cache", *extra)  # fmt: skip
    assert run.returncode == 0, run.stderr
    entry = json.loads((out / "summary.json").read_text())["tasks"]["Selection"]
    scores = json.loads((out / entry["file"]).read_text(encoding="utf-8"))["scores"]["test"][0]
    return {**entry, "ndcg_at_1000": scores["ndcg_at_1000"]}


def test_eval_mteb_scores_a_beir_folder_as_the_independent_count(beir, counted, minilm_path, tmp_path):
    entry = _eval_mteb(beir, minilm_path, tmp_path / "out")
    assert entry["metric"] == "ndcg_at_10"
    assert entry["main_score"] == pytest.approx(counted["ndcg_at_10"], abs=1e-4)
    assert entry["ndcg_at_1000"] == pytest.approx(counted["ndcg_at_1000"], abs=1e-4)  # every rank, not the top 10


def test_mtebs_own_task_object_scores_the_same(beir, counted, minilm_path):
    assert _mteb_own(beir, minilm_path) == pytest.approx(counted["ndcg_at_10"], abs=1e-4)


def test_reading_the_documents_whole_is_the_rule_that_differed(beir, counted, minilm_path, tmp_path):
    """The old ``eval mteb`` (whole inputs, 512 tokens) scores otherwise; ``--max-seq-length`` still allows it."""
    entry = _eval_mteb(beir, minilm_path, tmp_path / "out", "--max-seq-length", "512")
    assert abs(entry["ndcg_at_1000"] - counted["ndcg_at_1000"]) > 1e-4  # 0.8107 against 0.8105
