"""Model cards: every section present, numbers equal to the run summary, the usage snippet runs as written,
``jtcse eval sts --update-card`` writes a model-index entry and a table, read-only checkpoints are left alone."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import stat
from pathlib import Path

import pytest
import yaml
from helpers.cli import invoke_cli, one_error_line, run_python
from helpers.sts import write_stsb
from huggingface_hub import ModelCard

from jtcse.errors import JTCSEError
from jtcse.model_card import STS_BEGIN, CardFacts, check_writable, update_card_sts, write_model_card
from jtcse.training.run_summary import SCHEMA_VERSION, facts_from_run_summary, infer_kind, write_run_card

SECTIONS = [
    "## Model Details",
    "### Full Model Architecture",
    "## Usage",
    "## Evaluation",
    "## Training Details",
    "### Recipe",
    "### Data",
    "### Dev Spearman History",
    "### Framework Versions",
    "## Citation",
]


def split_card(text: str) -> tuple[dict, str]:
    """(front matter as a dict, Markdown body); fails unless the card opens with a YAML block."""
    match = re.match(r"---\n(.*?)\n---\n(.*)", text, re.S)
    assert match, text[:300]
    return yaml.safe_load(match.group(1)), match.group(2)


def usage_snippets(body: str) -> list[str]:
    usage = body.split("\n## Usage", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", usage, re.S)


def table_value(body: str, label: str) -> str:
    """The value cell of the two-column table row whose first cell is ``label``."""
    match = re.search(rf"^\| {re.escape(label)} \| (.*?) \|$", body, re.M)
    assert match, f"no row {label!r}"
    return match.group(1)


def tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def tower_copy(tiny_bert, tmp_path) -> Path:
    out = tmp_path / "tower"
    shutil.copytree(tiny_bert, out)
    return out


def run_snippet_here(snippet: str, cwd: Path) -> str:
    """Run a card's snippet as a script in this process (its own globals, ``cwd`` the working folder) and return
    what it printed. A snippet that needs jtcse is proven as well here as in a fresh interpreter, which would only
    pay its imports again (seconds of CPU); a fresh one stays where jtcse must be absent (``hide_jtcse``)."""
    import contextlib
    import io
    import os

    printed, here = io.StringIO(), os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(snippet, "<card snippet>", "exec"), {"__name__": "__main__"})
    finally:
        os.chdir(here)
    return printed.getvalue()


def check_snippet_output(snippet: str, stdout: str) -> None:
    """What the snippet prints equals the output the card writes under its print calls."""
    lines = snippet.splitlines()
    shape = next(line for line in lines if re.fullmatch(r"# \[\d+, \d+\]", line))
    printed = stdout.splitlines()
    assert printed[0] == "(" + shape[3:-1] + ")"
    after = lines[lines.index("print(similarities)") + 1 :]
    assert printed[1:] == [line[2:] for line in after if line.startswith("# ")]


@pytest.mark.slow
def test_single_tower_card_has_every_section_and_its_snippet_runs(tower_copy, monkeypatch):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.model_card import generate_model_card

    facts = CardFacts(
        kind="warmup",
        towers=["bert-tiny"],
        settings={"batch_size": 8, "learning_rate": 3e-05, "temperature": 0.05},
        data={
            "lines read": 40,
            "blank lines skipped": 2,
            "duplicates dropped": 1,
            "sentences truncated to max_seq_length": 3,
        },
        dev_history=[(0, 0.125), (2, 0.5), (4, 0.4375)],
        best_dev_spearman=0.5,
        final_dev_spearman=0.5,
        sts_results={"STS12": 61.234, "STSB": 70.5},
    )
    model = SentenceTransformer(str(tower_copy))
    monkeypatch.chdir(tower_copy.parent)
    tower_copy = Path(tower_copy.name)  # a relative folder: the snippet names it by its absolute path
    generate_model_card(model)  # what saving a trained model does: it names the model after its class
    assert model.model_card_data.model_name == "SentenceTransformer"
    path = write_model_card(model, tower_copy, facts)
    meta, body = split_card(path.read_text(encoding="utf-8"))
    assert body.startswith("\n# SimCSE warm-up tower\n")

    assert meta["library_name"] == "sentence-transformers" and {"sentence-transformers", "jtcse"} <= set(meta["tags"])
    assert ModelCard.load(path).data.eval_results[0].metric_value == 0.6123  # the Hub's parser reads it
    results = meta["model-index"][0]["results"]
    assert {r["dataset"]["name"]: r["metrics"][0]["value"] for r in results} == {"STS12": 0.6123, "STSB": 0.705}
    for heading in SECTIONS:
        assert f"\n{heading}\n" in body, heading
    assert "Unsupervised SimCSE: each sentence" in body and "**Pooling:** cls pooling" in body and "`bert-tiny`" in body
    assert table_value(body, "batch_size") == "8" and table_value(body, "learning_rate") == "3e-05"
    assert table_value(body, "lines read") == "40" and table_value(body, "duplicates dropped") == "1"
    assert "| 2 | 0.5000 |" in body and "| 4 | 0.4375 |" in body
    assert "| this model | 61.23 | 70.50 | 65.87 |" in body
    assert "@inproceedings{gao2021simcse" in body

    (snippet,) = usage_snippets(body)
    assert f"SentenceTransformer({str(tower_copy.resolve())!r})" in snippet
    check_snippet_output(snippet, run_snippet_here(snippet, cwd=tower_copy.resolve().parent.parent))


@pytest.fixture(scope="module")
def twin_card(tiny_bert, tiny_bert_b, tmp_path_factory) -> tuple[Path, str]:
    from jtcse.modeling.build import build_twin

    out = tmp_path_factory.mktemp("card") / "twin"
    model = build_twin(tiny_bert, tiny_bert_b, cael_every=2, max_seq_length=32)
    model.save(str(out))
    write_model_card(model, out, CardFacts(kind="twin", towers=[tiny_bert, tiny_bert_b]))
    return out, split_card((out / "README.md").read_text(encoding="utf-8"))[1]


@pytest.mark.slow
def test_twin_card_names_both_loaders_and_the_load_model_one_runs(twin_card, tiny_bert, tiny_bert_b):
    out, body = twin_card
    for heading in SECTIONS:
        assert f"\n{heading}\n" in body, heading
    assert "JTCSE twin" in body and f"`{tiny_bert}` + `{tiny_bert_b}`" in body
    assert "sum of the two towers' last-layer [CLS] vectors" in body
    assert "@article{zong2025jtcse" in body
    assert "No dev Spearman scores were recorded" in body and "jtcse eval sts MODEL" in body

    remote, local = usage_snippets(body)
    assert f"SentenceTransformer({str(out)!r}, trust_remote_code=True)" in remote
    assert f"load_model({str(out)!r})" in local and "jtcse.modeling.loading.load_model" in body
    check_snippet_output(local, run_snippet_here(local, cwd=out.parent))


@pytest.mark.slow
def test_twin_remote_code_snippet_runs_without_jtcse(twin_card):
    out, body = twin_card
    types = [entry["type"] for entry in json.loads((out / "modules.json").read_text(encoding="utf-8"))]
    if any(t.startswith("jtcse.") for t in types):
        pytest.skip(f"this twin checkpoint is not self-contained yet (modules.json names {types})")
    remote, _ = usage_snippets(body)
    run = run_python(remote, hide_jtcse=True)
    assert run.returncode == 0, run.stderr[-2000:]
    check_snippet_output(remote, run.stdout)


def test_facts_from_summaries_are_tolerant_and_know_each_kind():
    assert infer_kind({"stage": "simcse"}) == "warmup"
    assert infer_kind({"stage": "distill"}) == "distilled"
    assert infer_kind({"stage": "twin"}) == "twin"
    with pytest.raises(JTCSEError, match="kind"):
        infer_kind({})
    with pytest.raises(JTCSEError, match="kind"):
        infer_kind({"towers": ["a", "b"]})  # a summary names its stage; nothing is guessed from other keys
    empty = facts_from_run_summary({}, kind="ensemble")
    assert empty.settings == {} and empty.data == {} and empty.dev_history == []

    distilled = facts_from_run_summary(
        {
            "schema_version": SCHEMA_VERSION,
            "stage": "distill",
            "model": {"teacher": "runs/twin", "student": "runs/tower_a", "objective": "similarity"},
            "data": {"source": "corpus.txt", "skipped_blank_lines": 3, "sentences": 120, "teacher_cache_hit": True},
            "loss": {"name": "SimilarityMatrixLoss"},
            "settings": {"batch_size": 16, "learning_rate": 1e-4},
            "steps": 7,
            "dev_spearman_by_step": {"5": 0.25, "7": 0.3},
            "config": {"batch_size": 16, "learning_rate": 1e-4, "objective": "similarity"},
        }
    )
    assert distilled.kind == "distilled" and distilled.teacher == "runs/twin" and distilled.towers == ["runs/tower_a"]
    assert distilled.settings == {
        "batch_size": 16, "learning_rate": 1e-4, "objective": "similarity", "steps trained": 7,
        "loss": {"name": "SimilarityMatrixLoss"},
    }  # fmt: skip
    assert distilled.data == {"corpus": "corpus.txt", "blank lines skipped": 3, "sentences used": 120}
    assert distilled.dev_history == [(5, 0.25), (7, 0.3)]
    # the card names and cites the objective the student was trained with, not MSE
    assert "`similarity` objective" in distilled.recipe and "cosine-similarity matrix" in distilled.recipe
    assert "SimilarityMatrixLoss (objective `similarity`)" in distilled.citations
    assert "JTCSE (teacher)" in distilled.citations
    assert not any("MSELoss" in name for name in distilled.citations)
    mse = facts_from_run_summary({"stage": "distill", "model": {"objective": "mse"}, "loss": {"name": "MSELoss"}})
    assert "`mse` objective" in mse.recipe and "Sentence-embedding distillation" in mse.citations
    summed = facts_from_run_summary({"stage": "distill", "model": {"objective": "similarity+mse"}, "loss": {}})
    assert "`similarity+mse` objective: `similarity` (the student's in-batch" in summed.recipe
    assert ") + `mse` (mean squared error" in summed.recipe
    with pytest.raises(JTCSEError, match="schema_version 2"):
        facts_from_run_summary({"schema_version": 2, "stage": "twin"})

    loss = {
        "base_loss": "JTCSELoss",
        "base_loss_config": {"temperature": 0.05, "ictm_weight": 0.5},
        "regularizers": [{"name": "SimRegLoss", "weight": 2.0}],
    }
    towers = {"towers": ["embedded MiniLM", "embedded MiniLM"]}
    twin = facts_from_run_summary({"stage": "twin", "model": towers, "loss": loss})
    assert twin.base_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert twin.settings["loss"] == {"base_loss": "JTCSELoss", "temperature": 0.05, "ictm_weight": 0.5}
    assert twin.settings["regularizers"] == ["SimRegLoss(weight=2)"]
    assert (
        set(twin.citations) == {"JTCSELoss", "SimRegLoss"} and "@inproceedings{simreg" in twin.citations["SimRegLoss"]
    )
    spec = facts_from_run_summary({"stage": "simcse", "config": {"regularizers": ["dispersion:weight=0.1"]}})
    assert spec.settings["regularizers"] == ["dispersion:weight=0.1"] and "DispersionLoss" in spec.citations
    with pytest.raises(JTCSEError, match="kind must be one of"):
        CardFacts(kind="tower")


@pytest.mark.slow
@pytest.mark.cli
def test_trainers_write_cards_that_state_their_summaries(tiny_bert, tiny_bert_b, tmp_path):
    """`jtcse simcse` and `jtcse train` write README.md themselves; its numbers are the run summary's."""
    corpus = tmp_path / "corpus.txt"
    lines = [f"Sentence number {i} talks about topic {i % 7} at some length." for i in range(30)]
    corpus.write_text("\n".join(lines + ["", lines[0], "   ", "word " * 60]) + "\n", encoding="utf-8")
    dev = write_stsb(tmp_path / "dev.csv")
    common = [
        "--corpus",
        corpus,
        "--dev-file",
        dev,
        "--batch-size",
        "8",
        "--max-seq-length",
        "16",
        "--max-steps",
        "4",
        "--eval-steps",
        "2",
    ]
    runs = {
        "warmup": ["simcse", "--model", tiny_bert, "-o", tmp_path / "simcse", "--learning-rate", "5e-5", *common],
        "twin": [
            "train",
            "--tower-a",
            tiny_bert,
            "--tower-b",
            tiny_bert_b,
            "-o",
            tmp_path / "twin",
            "--learning-rate",
            "5e-5",
            *common,
        ],
    }
    for kind, args in runs.items():
        out = Path(args[args.index("-o") + 1])
        run = invoke_cli(*args)
        assert run.returncode == 0, run.stderr[-3000:]
        summary = json.loads((out / "run_summary.json").read_text(encoding="utf-8"))
        assert facts_from_run_summary(summary).kind == kind
        _, body = split_card((out / "README.md").read_text(encoding="utf-8"))
        for heading in SECTIONS:
            assert f"\n{heading}\n" in body, (kind, heading)
        assert summary["schema_version"] == SCHEMA_VERSION
        history = list(summary["dev_spearman_by_step"].items())
        assert len(history) >= 2
        for step, score in history:
            assert f"| {int(step)} | {score:.4f} |" in body
        assert f"- **Best dev Spearman:** {summary['best_dev_spearman']:.4f}" in body
        assert table_value(body, "batch_size") == "8" and table_value(body, "max_seq_length") == "16"
        assert table_value(body, "steps trained") == "4"
        assert table_value(body, "blank lines skipped") == "2"
        data = summary["data"]
        assert table_value(body, "lines read") == str(data["lines"]) == "32"
        assert table_value(body, "duplicates dropped") == "1"
        if kind == "twin":
            assert table_value(body, "sentences truncated to max_seq_length") == str(
                data["truncated_to_max_seq_length"]
            )
            assert data["truncated_to_max_seq_length"] >= 1
            assert "@article{zong2025jtcse" in body
        else:
            assert table_value(body, "training rows") == str(data["rows"])
            assert "@inproceedings{gao2021simcse" in body


@pytest.mark.slow
@pytest.mark.cli
def test_eval_sts_update_card_writes_model_index_and_table_once(tower_copy, tmp_path):
    from sentence_transformers import SentenceTransformer

    write_model_card(SentenceTransformer(str(tower_copy)), tower_copy, CardFacts(kind="distilled", teacher="runs/twin"))
    data_dir = tmp_path / "senteval"
    write_stsb(data_dir / "STS" / "STSBenchmark" / "sts-test.csv")
    args = [
        "eval",
        "sts",
        tower_copy,
        "--data-dir",
        data_dir,
        "--tasks",
        "STSB",
        "-o",
        tmp_path / "r.json",
        "--update-card",
    ]
    update_card_sts(tower_copy, {"STSB": 12.5, "STS12": 40.0})  # an earlier table, replaced below for STSB
    run = invoke_cli(*args)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    score = report["STSB"]
    meta, body = split_card((tower_copy / "README.md").read_text(encoding="utf-8"))
    (entry,) = meta["model-index"]
    sts12, result = entry["results"]  # STS12 kept from the earlier update, STSB replaced
    assert sts12["dataset"]["name"] == "STS12" and sts12["metrics"][0]["value"] == 0.4
    assert result["task"]["type"] == "semantic-similarity" and result["dataset"]["name"] == "STSB"
    assert result["metrics"][0] == {
        "type": "spearman_cosine",
        "value": round(score / 100, 4),
        "name": "Spearman Cosine",
    }
    assert body.count(STS_BEGIN) == 1
    assert f"| this model | 40.00 | {score:.2f} | {(40.0 + round(score / 100, 4) * 100) / 2:.2f} |" in body
    assert (
        body.index(STS_BEGIN) < body.index("## Training Details")
        and f"; inputs up to {report['meta']['max_seq_length']} tokens." in body
    )
    assert "**Teacher:** `runs/twin`" in body  # the rest of the card is kept


@pytest.mark.slow
@pytest.mark.cli
def test_update_card_on_a_read_only_checkpoint_is_refused_and_changes_nothing(tower_copy, tmp_path):
    from sentence_transformers import SentenceTransformer

    write_model_card(SentenceTransformer(str(tower_copy)), tower_copy, CardFacts(kind="warmup"))
    data_dir = tmp_path / "senteval"
    write_stsb(data_dir / "STS" / "STSBenchmark" / "sts-test.csv")
    before = tree_digest(tower_copy)
    (tower_copy / "README.md").chmod(0o444)
    tower_copy.chmod(0o555)
    try:
        run = invoke_cli("eval", "sts", tower_copy, "--data-dir", data_dir, "--tasks", "STSB", "--update-card")
        line = one_error_line(run)
        assert "read-only" in line and "nothing was changed" in line
        tower_copy.chmod(0o755)  # a writable folder still keeps a read-only card as it is
        with pytest.raises(ValueError, match="README.md is read-only"):
            update_card_sts(tower_copy, {"STSB": 50.0})
    finally:
        tower_copy.chmod(0o755)
        (tower_copy / "README.md").chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert tree_digest(tower_copy) == before
    from typer.testing import CliRunner

    from jtcse.cli import app

    result = CliRunner().invoke(
        app, ["eval", "sts", str(tower_copy), "--data-dir", str(data_dir), "--update-card", "--pooling", "mean"]
    )
    assert isinstance(result.exception, JTCSEError) and "drop --pooling" in str(result.exception)


def test_update_card_needs_a_card_folder(tmp_path):
    with pytest.raises(JTCSEError, match="no finished run"):
        write_run_card(tmp_path)
    with pytest.raises(JTCSEError, match="not a local checkpoint folder"):
        update_card_sts(tmp_path / "missing", {"STSB": 50.0})
    with pytest.raises(JTCSEError, match="has no README.md"):
        update_card_sts(tmp_path, {"STSB": 50.0})
    with pytest.raises(JTCSEError, match="has no README.md"):
        check_writable(tmp_path, card=True)  # what eval sts --update-card checks before evaluating
    assert check_writable(tmp_path) == tmp_path
