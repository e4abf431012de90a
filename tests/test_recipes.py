"""Recipes in ``models/`` (``jtcse pipeline --recipe FILE``): every recipe parses and validates, the CPU recipe is
the pipeline's defaults written out, options override a recipe and the summary records both, every mistake in a
recipe file is one line naming the key and the valid ones, and the MiniLM recipe runs end to end."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers.cli import REPO, invoke_cli, one_error_line

from jtcse.errors import JTCSEError

MODELS = REPO / "models"
RECIPES = sorted(MODELS.glob("*/recipe.toml"))


def _context(*args: object):
    """The click context of ``jtcse pipeline ARGS`` (parsed and checked, nothing run)."""
    import typer

    from jtcse.cli import app

    command = typer.main.get_command(app).commands["pipeline"]
    return command.make_context("pipeline", [str(a) for a in args])


def _arguments(*args: object) -> dict:
    from jtcse.commands.pipeline import pipeline_arguments

    return pipeline_arguments(_context(*args).params)


def test_the_recipes_the_issue_names_are_there_each_with_a_readme():
    assert {path.parent.name for path in RECIPES} >= {"jtcse-bert-base", "jtcse-roberta-base", "jtcse-d-bert-base",
                                                      "ucd-minilm-l6"}  # fmt: skip
    for folder in MODELS.iterdir():
        if folder.is_dir():
            assert (folder / "recipe.toml").is_file() and (folder / "README.md").is_file(), folder


@pytest.mark.parametrize("recipe", RECIPES, ids=[path.parent.name for path in RECIPES])
def test_every_recipe_parses_and_validates(recipe):
    """Keys, types and values (each stage's settings as the trainers check them) before anything runs."""
    from jtcse.training.pipeline_settings import check_settings

    arguments = _arguments("--recipe", recipe, "-o", "out")
    stages = check_settings(**{k: arguments[k] for k in ("until", "pooling", "warmup_settings", "twin_settings",
                                                         "distill_settings", "ensemble", "ensemble_with")})  # fmt: skip
    assert set(stages) == {"warmup", "twin", "distill"}
    readme = (recipe.parent / "README.md").read_text(encoding="utf-8")
    assert f"--recipe models/{recipe.parent.name}/recipe.toml" in readme  # the command to run it


def test_the_cpu_recipe_is_the_pipelines_defaults_written_out():
    """Running models/ucd-minilm-l6 equals running jtcse pipeline with no flags on its corpus and dev file: the
    same settings for every stage once each default is resolved (the MiniLM's own pooling; the ensemble with the
    start, on for a sentence-transformers start; its default weights). A change of a default must change the
    recipe too."""
    from jtcse.modeling.loading import load_model, own_pooling
    from jtcse.training.pipeline import is_sentence_encoder
    from jtcse.training.pipeline_settings import ENSEMBLE_WEIGHTS, check_settings

    recipe = _arguments("--recipe", MODELS / "ucd-minilm-l6" / "recipe.toml", "-o", "out")
    plain = _arguments("--corpus", recipe["corpus"], "--dev-file", recipe["dev_file"], "-o", "out")
    resolved = {
        "pooling": own_pooling(load_model(None)),
        "ensemble": is_sentence_encoder(None) and not plain["ensemble_with"],
        "twin": False,  # a sentence-encoder start in the ensemble: the warm-ups take the twin's place
        "ensemble_weights": list(ENSEMBLE_WEIGHTS["warmups"]),
    }
    for name, value in resolved.items():
        assert recipe[name] == value, name
        assert plain[name] in (None, value), name
    keys = ("until", "pooling", "warmup_settings", "twin_settings", "distill_settings", "probe_learning_rates",
            "probe_steps")  # fmt: skip
    assert check_settings(**{k: recipe[k] for k in keys}) == check_settings(**{k: plain[k] for k in keys})
    same = set(recipe) - set(resolved) - {"warmup_settings", "twin_settings", "distill_settings"}
    assert {k: recipe[k] for k in same} == {k: plain[k] for k in same}


def test_jtcse_d_continues_the_jtcse_bert_base_run():
    """Every stage up to the twin is set alike, so both recipes share one output folder (finished stages skip)."""
    twin = _arguments("--recipe", MODELS / "jtcse-bert-base" / "recipe.toml", "-o", "out")
    distilled = _arguments("--recipe", MODELS / "jtcse-d-bert-base" / "recipe.toml", "-o", "out")
    differ = {k for k in twin if twin[k] != distilled[k]}
    assert differ == {"until", "distill_settings", "student", "student_pooling"}
    assert (twin["until"], distilled["until"]) == ("twin", "eval")


def test_options_override_the_recipe_and_what_was_overridden_is_recorded(tmp_path):
    from jtcse.commands._recipe import recipe_record

    recipe = MODELS / "ucd-minilm-l6" / "recipe.toml"
    ctx = _context("--recipe", recipe, "-o", tmp_path, "--twin-steps", 3, "--seed", 7, "--batch-size", 4,
                   "--distill-batch-size", 6, "--no-ensemble")  # fmt: skip
    from jtcse.commands.pipeline import pipeline_arguments

    record = recipe_record(ctx)
    assert record["path"] == str(recipe)
    assert record["sha256"] == hashlib.sha256(recipe.read_bytes()).hexdigest()
    assert record["overrides"] == {
        "--twin-steps": {"value": 3, "recipe": 100}, "--seed": {"value": 7, "recipe": 42},
        "--batch-size": {"value": 4}, "--distill-batch-size": {"value": 6, "recipe": 64},
        "--ensemble": {"value": False, "recipe": True},
    }  # fmt: skip
    assert "output" not in str(record) and recipe_record(_context("-o", tmp_path)) is None
    arguments = pipeline_arguments(ctx.params)
    assert arguments["twin_settings"]["max_steps"] == 3 and arguments["seed"] == 7
    assert arguments["twin_settings"]["learning_rate"] == 1e-5  # the recipe's, where nothing overrides it


def _recipe(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "recipe.toml"
    path.write_text(text, encoding="utf-8")
    return path


BAD_RECIPES = [
    ("typo", "[twin]\nlerning_rate = 1e-5\n",
     r"\[twin\]: unknown key 'lerning_rate'; valid here: batch_size, cael_every, enabled, eval_steps, icnce_weight, "
     r"ictm_weight, learning_rate, max_seq_length, nce_weight, steps\.$"),
    ("wrong type", '[twin]\nlearning_rate = "fast"\n', r"\[twin\]: learning_rate must be a number, not 'fast'\.$"),
    ("int for a string", "corpus = 3\n", r": corpus must be a path \(string\), not 3\.$"),
    ("bool for an int", "[warmup]\nsteps = true\n", r"\[warmup\]: steps must be a whole number, not True\.$"),
    ("unknown stage", "[finetune]\nsteps = 3\n",
     r": \[finetune\] is not a stage; stages: \[warmup\], \[probe\], \[twin\], \[ensemble\], \[distill\]\.$"),
    ("another stage's key", "[warmup]\ncael_every = 2\n",
     r"\[warmup\]: 'cael_every' belongs to \[twin\]; valid here: batch_size, eval_steps, learning_rate, "
     r"max_seq_length, steps\.$"),
    ("a stage key at the top", "objective = 'mse'\n", r": 'objective' belongs to \[distill\] \(a stage\); valid top-level"),
    ("unknown top-level key", "corpuss = 'a.txt'\n", r": unknown key 'corpuss'; valid top-level keys: batch_size, corpus"),
    ("a list that is not", "[ensemble]\nweights = '1,2'\n", r"\[ensemble\]: weights must be an array of numbers"),
    ("repeatable", "[ensemble]\nwith = 'a'\n", r"\[ensemble\]: with must be an array of strings, not 'a'\.$"),
    ("not a table", "twin = 3\n", r": twin must be a table \(\[twin\]\), not 3\.$"),
    ("the output", "output = 'runs/x'\n", r": unknown key 'output'"),
    ("a bad value", "[twin]\nbatch_size = 1\n", r"^batch_size must be at least 2 \(got 1\)\.$"),
    ("a bad pooling", "pooling = 'max'\n", r"^pooling must be one of cls, mean"),
    ("both a twin lr and a probe file", "selection_file = 's.csv'\n[twin]\nenabled = true\nlearning_rate = 1e-5\n",
     r"^a twin learning rate was given and a selection file"),
    ("not TOML", "[twin\n", r"is not valid TOML"),
]  # fmt: skip


@pytest.mark.parametrize("text, message", [b[1:] for b in BAD_RECIPES], ids=[b[0] for b in BAD_RECIPES])
def test_every_mistake_in_a_recipe_is_named(text, message, tmp_path):
    with pytest.raises(JTCSEError, match=message):
        _context("--recipe", _recipe(tmp_path, text), "-o", tmp_path / "out")


@pytest.mark.cli
@pytest.mark.parametrize("text", ["[twin]\nlerning_rate = 1e-5\n", "[twin]\nsteps = 'many'\n", "[finetune]\nsteps = 3\n"],
                         ids=["typo", "wrong type", "no such stage"])  # fmt: skip
def test_a_bad_recipe_is_one_error_line_and_nothing_is_written(text, tmp_path):
    recipe = _recipe(tmp_path, text)
    line = one_error_line(invoke_cli("pipeline", "--recipe", recipe, "-o", tmp_path / "out"))
    assert line.startswith(f"Error: recipe {recipe}")
    assert not (tmp_path / "out").exists()
    missing = one_error_line(invoke_cli("pipeline", "--recipe", tmp_path / "none.toml", "-o", tmp_path / "out"))
    assert missing == f"Error: recipe not found: {tmp_path / 'none.toml'}"


@pytest.mark.slow
@pytest.mark.cli
def test_the_minilm_recipe_runs_end_to_end_with_tiny_steps(tmp_path, shared_data):
    """models/ucd-minilm-l6 as a user runs it, with its real tower (the embedded MiniLM), a 40-line corpus, a short
    dev file with the three STS-B genres and 1-2 steps a stage, given as overrides."""
    corpus, dev = tmp_path / "corpus.txt", tmp_path / "dev.csv"
    corpus.write_text("\n".join((shared_data / "wiki12k.txt").read_text(encoding="utf-8").splitlines()[:40]) + "\n",
                      encoding="utf-8")  # fmt: skip
    lines = (shared_data / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()
    dev.write_text("\n".join(lines[:8] + lines[700:708] + lines[1200:1208]) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    recipe = MODELS / "ucd-minilm-l6" / "recipe.toml"
    overrides = ["--corpus", corpus, "--dev-file", dev, "--warmup-steps", 2, "--twin-steps", 2, "--distill-steps", 1,
                 "--batch-size", 4, "--warmup-max-seq-length", 16, "--twin-max-seq-length", 16,
                 "--distill-max-seq-length", 16, "--eval-steps", 1000]  # fmt: skip
    result = invoke_cli("pipeline", "--recipe", recipe, "-o", out, *overrides, "--device", "cpu")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "pipeline_summary.json").read_text(encoding="utf-8"))
    assert [row["stage"] for row in summary["table"]] == [
        "start", "warmup_a", "warmup_b", "ensemble", "distill", "eval"
    ]  # fmt: skip
    record = summary["recipe"]
    assert record["path"] == str(recipe) and record["sha256"] == hashlib.sha256(recipe.read_bytes()).hexdigest()
    assert record["overrides"]["--warmup-steps"] == {"value": 2, "recipe": -1}
    assert record["overrides"]["--corpus"] == {"value": str(corpus), "recipe": "data/wiki12k.txt"}
    assert record["overrides"]["--device"] == {"value": "cpu"}
    stages = summary["stages"]
    assert "twin" not in stages and stages["warmup_a"]["settings"]["batch_size"] == 4
    assert stages["ensemble"]["weights"] == [1.25, 1.25, 1.0]
    assert stages["ensemble"]["members"][:2] == [str(out / "tower_a"), str(out / "tower_b")]
    assert stages["distill"]["settings"]["learning_rate"] == 2e-5  # the recipe's, not overridden
    modules = json.loads((out / "distilled" / "modules.json").read_text(encoding="utf-8"))
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling", "Normalize"]  # the MiniLM's
    genres = stages["eval"]["dev_spearman_by_genre"]["start"]
    assert set(genres) == {"main-captions", "main-news", "main-forums"}
    assert (
        "| stage | main-captions ×100 (Δ vs start) |" in result.stdout and "| start | starting model" in result.stdout
    )
