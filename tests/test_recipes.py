"""Recipes in ``models/`` (``jtcse pipeline --recipe FILE``): every recipe parses; the CPU recipe is the dump of the
defaults; a recipe extends another and lists only what differs; what each README claims is what its recipe sets;
options override a recipe and the summary records both; every mistake in a recipe is one line naming the file, the
table, the key and the valid ones; the MiniLM recipe runs end to end, and the paper's recipe keeps its best
checkpoint by dev."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from helpers.cli import REPO, click_app, invoke_cli, one_error_line

from jtcse.errors import JTCSEError
from jtcse.pipeline.recipe import load_recipe
from jtcse.pipeline.settings import PipelineConfig
from jtcse.schema import get, keys
from jtcse.toml_file import tomllib

MODELS = REPO / "models"
RECIPES = sorted(MODELS.glob("*/recipe.toml"))


def _config(*args: object) -> tuple[PipelineConfig, dict | None]:
    """The config (and recipe record) ``jtcse pipeline ARGS`` stands for: parsed and checked, nothing run."""

    from jtcse.commands.pipeline import pipeline_config

    command = click_app().commands["pipeline"]
    return pipeline_config(command.make_context("pipeline", [str(a) for a in args]).params)


def _body(text: str) -> str:
    """A recipe without its leading comment block (the part a dump and a hand-kept header differ in)."""
    return text.split("\n\n", 1)[1]


def test_the_recipes_the_issue_names_are_there_each_with_a_readme():
    assert {path.parent.name for path in RECIPES} >= {"jtcse-bert-base", "jtcse-roberta-base", "jtcse-d-bert-base",
                                                      "ucd-minilm-l6"}  # fmt: skip
    for folder in MODELS.iterdir():
        if folder.is_dir():
            assert (folder / "recipe.toml").is_file() and (folder / "README.md").is_file(), folder


@pytest.mark.parametrize("recipe", RECIPES, ids=[path.parent.name for path in RECIPES])
def test_every_recipe_parses_and_its_readme_runs_it(recipe):
    """Keys, types and values, as the trainers check them, before anything runs; the command line agrees."""
    config = load_recipe(recipe)
    assert _config("--recipe", recipe)[0] == config
    readme = (recipe.parent / "README.md").read_text(encoding="utf-8")
    assert f"--recipe models/{recipe.parent.name}/recipe.toml" in readme  # the command to run it


def test_the_cpu_recipe_is_the_dump_of_the_defaults():
    """models/ucd-minilm-l6 below its header is, byte for byte, what --dump-recipe prints for the defaults on its
    corpus and dev file: a changed default shows up as a diff of the file, and both run the same settings."""
    recipe = MODELS / "ucd-minilm-l6" / "recipe.toml"
    dumped = invoke_cli("pipeline", "--corpus", "data/wiki12k.txt", "--dev-file", "data/stsb/sts-dev.csv",
                        "--dump-recipe")  # fmt: skip
    assert dumped.returncode == 0, dumped.stderr
    assert _body(recipe.read_text(encoding="utf-8")) == _body(dumped.stdout), (
        "a default changed: write the dump below the recipe's header (its first comment block) again"
    )
    defaults = PipelineConfig.from_values({"corpus": "data/wiki12k.txt", "dev_file": "data/stsb/sts-dev.csv"})
    assert load_recipe(recipe) == defaults
    assert defaults.warmup.training.checkpoint == defaults.twin.training.checkpoint == "last"  # the CPU protocol


def test_a_recipe_extends_another_and_lists_only_what_differs():
    """jtcse-d-bert-base is jtcse-bert-base up to the twin (so both share one output folder) plus the distillation;
    jtcse-roberta-base changes the towers and the warm-ups. Neither repeats a key of the recipe it extends."""
    base = load_recipe(MODELS / "jtcse-bert-base" / "recipe.toml")
    for name, differs in (("jtcse-d-bert-base", {"until", "distill"}), ("jtcse-roberta-base", {"tower_a", "tower_b", "warmup"})):  # fmt: skip
        path = MODELS / name / "recipe.toml"
        config = load_recipe(path)
        assert {k for k, v in config.values().items() if base.values()[k] != v} == differs, name
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        assert raw.pop("extends") == "../jtcse-bert-base/recipe.toml"
        assert set(raw) == differs, name


def test_the_paper_recipes_keep_the_best_dev_checkpoint():
    """The paper's protocol (and SimCSE's): warm-ups and twin keep the checkpoint with the best STS-B dev Spearman."""
    for name in ("jtcse-bert-base", "jtcse-roberta-base", "jtcse-d-bert-base"):
        config = load_recipe(MODELS / name / "recipe.toml")
        assert config.warmup.training.checkpoint == config.twin.training.checkpoint == "best-dev", name
        assert config.dev_file is not None
    dumped = invoke_cli("pipeline", "--recipe", MODELS / "jtcse-bert-base" / "recipe.toml", "--dump-recipe").stdout
    tables = tomllib.loads(dumped)
    assert tables["warmup"]["checkpoint"] == tables["twin"]["checkpoint"] == "best-dev"
    assert tables["distill"]["checkpoint"] == "last" and tables["twin"]["eval_steps"] == 100


_CLAIM = re.compile(r"`(?:\[(\w+)\] )?(\w+) = ([^`]+)`")


@pytest.mark.parametrize("recipe", RECIPES, ids=[path.parent.name for path in RECIPES])
def test_what_each_readme_says_its_recipe_sets_is_what_it_sets(recipe):
    """Every ``[table] key = value`` a README quotes (its settings table) is the value the parsed recipe holds."""
    config = load_recipe(recipe)
    claims = _CLAIM.findall((recipe.parent / "README.md").read_text(encoding="utf-8"))
    assert claims, "the README quotes none of its settings"
    for table, key, value in claims:
        owner = getattr(config, table) if table else config
        held = get(owner, keys(type(owner))[key])
        expected = tomllib.loads(f"v = {value}")["v"]
        assert held == (tuple(expected) if isinstance(expected, list) else expected), (table, key)


def test_options_override_the_recipe_and_what_was_overridden_is_recorded():
    recipe = MODELS / "jtcse-d-bert-base" / "recipe.toml"
    base = MODELS / "jtcse-bert-base" / "recipe.toml"
    config, record = _config("--recipe", recipe, "--twin-max-steps", 3, "--seed", 7, "--batch-size", 4,
                             "--distill-batch-size", 6, "--no-twin")  # fmt: skip
    assert record["path"] == str(recipe)
    assert record["sha256"] == hashlib.sha256(recipe.read_bytes()).hexdigest()
    assert record["extends"] == {str(recipe.parent / "../jtcse-bert-base/recipe.toml"):
                                 hashlib.sha256(base.read_bytes()).hexdigest()}  # fmt: skip
    assert record["overrides"] == {
        "--twin-max-steps": {"value": 3, "recipe": -1}, "--seed": {"value": 7, "recipe": 42},
        "--distill-batch-size": {"value": 6, "recipe": 64}, "--twin": {"value": False, "recipe": True},
    }  # fmt: skip
    assert (config.twin.training.max_steps, config.seed, config.twin.enabled) == (3, 7, False)
    # --batch-size sets every trained stage whose own option is not typed, over the recipe's values
    assert (config.warmup.training.batch_size, config.twin.training.batch_size) == (4, 4)
    assert config.distill.training.batch_size == 6 and config.twin.training.learning_rate == 1.3e-6  # the recipe's
    assert _config()[1] is None
    renamed = _config("--twin-steps", 5, "--student", "m", "--objective", "mse")[0]  # old names still work
    assert (renamed.twin.training.max_steps, renamed.distill.student, renamed.distill.objective) == (5, "m", "mse")


def _recipe(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "recipe.toml"
    path.write_text(text, encoding="utf-8")
    return path


TWIN_KEYS = ", ".join(keys(type(PipelineConfig().twin), ("seed", "precision", "report_to")))
BAD_RECIPES = [
    ("typo", "[twin]\nlerning_rate = 1e-5\n",
     rf"\[twin\]: unknown key 'lerning_rate' \(did you mean 'learning_rate'\?\); valid here: {TWIN_KEYS}\.$"),
    ("an old key", "[twin]\nsteps = 100\n", r"\[twin\]: unknown key 'steps' \(did you mean 'max_steps'\?\)"),
    ("wrong type", '[twin]\nlearning_rate = "fast"\n', r" \[twin\]: learning_rate: Input should be a valid number$"),
    ("int for a string", "corpus = 3\n", r"recipe .*: corpus: Input should be a valid string$"),
    ("bool for an int", "[warmup]\nmax_steps = true\n", r"\[warmup\]: max_steps: Input should be a valid integer$"),
    ("unknown table", "[finetune]\nsteps = 3\n",
     r": \[finetune\] is not a table; tables: \[warmup\], \[warmup_b\], \[probe\], \[twin\], \[ensemble\], "
     r"\[distill\]\.$"),
    ("another table's key", "[warmup]\ncael_every = 2\n", r"\[warmup\]: 'cael_every' belongs to \[twin\]; valid here: "),
    ("a table's key at the top", "objective = 'mse'\n", r": 'objective' belongs to \[distill\]; valid top-level keys"),
    ("a top-level key in a table", "[twin]\nseed = 3\n",
     r"\[twin\]: 'seed' is a top-level key \(put it before the first table\); valid here"),
    ("unknown top-level key", "corpuss = 'a.txt'\n",
     r": unknown key 'corpuss' \(did you mean 'corpus'\?\); valid top-level keys: tower_a, tower_b, corpus"),
    ("a list that is not", "[ensemble]\nweights = '1,2'\n", r"\[ensemble\]: weights: Input should be a valid tuple$"),
    ("repeatable", "[ensemble]\nwith = 'a'\n", r"\[ensemble\]: with: Input should be a valid tuple$"),
    ("not a table", "twin = 3\n", r": twin must be a table \(\[twin\]\), not 3\.$"),
    ("the output", "output = 'runs/x'\n", r": 'output' is not a setting: the folder a run writes is not one of its"),
    ("the device", "device = 'cpu'\n", r": 'device' is not a setting: .* give --device on the command line\.$"),
    ("a bad value", "[twin]\nbatch_size = 1\n", r"recipe .* \[twin\]: batch_size: Input should be greater than or equal to 2$"),
    ("a bad pooling", "pooling = 'max'\n", r"recipe .*: pooling: Input should be 'cls' or 'mean'$"),
    ("a bad checkpoint", "[distill]\ncheckpoint = 'best'\n",
     r"\[distill\]: checkpoint: Input should be 'last' or 'best-dev'$"),
    ("contradiction", "[ensemble]\nenabled = false\nwith = ['m']\n",
     r"recipe .* \[ensemble\]: enabled = false \(--no-ensemble\) and models to ensemble with contradict"),
    ("not TOML", "[twin\n", r"is not valid TOML"),
    ("extends what is not there", "extends = 'nowhere.toml'\n",
     r"^recipe .*recipe\.toml: extends = 'nowhere\.toml' names .*nowhere\.toml, which is not there"),
    ("a byte order mark", "\ufeffseed = 3\n", r"recipe\.toml starts with a byte order mark \(BOM.*save it as UTF-8 without BOM"),
    ("a negative seed", "seed = -1\n", r"recipe .*: seed: must be between 0 and 4294967294 \(seed \+ 1 is used too\)$"),
    ("a seed whose seed + 1 is too large", f"seed = {2**32 - 1}\n", r": seed: must be between 0 and 4294967294"),
]  # fmt: skip


@pytest.mark.parametrize("text, message", [b[1:] for b in BAD_RECIPES], ids=[b[0] for b in BAD_RECIPES])
def test_every_mistake_in_a_recipe_is_named(text, message, tmp_path):
    with pytest.raises((JTCSEError, FileNotFoundError), match=message):
        load_recipe(_recipe(tmp_path, text))


def test_a_recipe_that_is_a_folder_or_extends_itself_is_named(tmp_path):
    with pytest.raises(JTCSEError, match=f"recipe {tmp_path} is a folder; give the recipe file in it"):
        load_recipe(tmp_path)
    loop = _recipe(tmp_path, "extends = 'recipe.toml'\n")
    with pytest.raises(JTCSEError, match="extends itself"):
        load_recipe(loop)


def test_a_value_typed_on_the_command_line_is_named_by_its_option():
    with pytest.raises(JTCSEError, match=r"^--twin-batch-size: Input should be greater than or equal to 2$"):
        _config("--twin-batch-size", 1)
    with pytest.raises(JTCSEError, match=r"^--batch-size: Input should be greater than or equal to 2$"):
        _config("--batch-size", 1)
    with pytest.raises(JTCSEError, match=r"^--probe-learning-rates\[1\]: Input should be a valid number$"):
        _config("--probe-learning-rates", "1e-5,fast")  # the item that is wrong


@pytest.mark.cli
@pytest.mark.parametrize("text", ["[twin]\nlerning_rate = 1e-5\n", "[twin]\nmax_steps = 'many'\n", "[finetune]\nsteps = 3\n"],
                         ids=["typo", "wrong type", "no such table"])  # fmt: skip
def test_a_bad_recipe_is_one_error_line_and_nothing_is_written(text, tmp_path):
    recipe = _recipe(tmp_path, text)
    line = one_error_line(invoke_cli("pipeline", "--recipe", recipe, "-o", tmp_path / "out"))
    assert line.startswith(f"Error: recipe {recipe}")
    assert not (tmp_path / "out").exists()
    missing = one_error_line(invoke_cli("pipeline", "--recipe", tmp_path / "none.toml", "-o", tmp_path / "out"))
    assert missing == f"Error: recipe not found: {tmp_path / 'none.toml'}"


def _tiny_data(tmp_path: Path, shared_data: Path) -> tuple[Path, Path]:
    corpus, dev = tmp_path / "corpus.txt", tmp_path / "dev.csv"
    corpus.write_text("\n".join((shared_data / "wiki12k.txt").read_text(encoding="utf-8").splitlines()[:40]) + "\n",
                      encoding="utf-8")  # fmt: skip
    lines = (shared_data / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()
    dev.write_text("\n".join(lines[:8] + lines[700:708] + lines[1200:1208]) + "\n", encoding="utf-8")
    return corpus, dev


@pytest.mark.slow
@pytest.mark.cli
def test_the_minilm_recipe_runs_end_to_end_with_tiny_steps(tmp_path, shared_data):
    """models/ucd-minilm-l6 as a user runs it, with its real tower (the embedded MiniLM), a 40-line corpus, a short
    dev file with the three STS-B genres and 1-2 steps a stage, given as overrides; the twin joins the start in the
    ensemble; every stage keeps its last step."""
    from jtcse.pipeline.settings import ENSEMBLE_WEIGHTS

    corpus, dev = _tiny_data(tmp_path, shared_data)
    out = tmp_path / "run"
    recipe = MODELS / "ucd-minilm-l6" / "recipe.toml"
    overrides = ["--corpus", corpus, "--dev-file", dev, "--warmup-max-steps", 2, "--distill-max-steps", 1,
                 "--twin-max-steps", 1, "--batch-size", 4, "--warmup-max-seq-length", 16, "--twin-max-seq-length", 16,
                 "--distill-max-seq-length", 16, "--eval-steps", 1000]  # fmt: skip
    result = invoke_cli("pipeline", "--recipe", recipe, "-o", out, *overrides, "--device", "cpu")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "pipeline_summary.json").read_text(encoding="utf-8"))
    assert [row["stage"] for row in summary["table"]] == [
        "start", "warmup_a", "warmup_b", "twin", "ensemble", "distill", "eval"
    ]  # fmt: skip
    record = summary["recipe"]
    assert record["path"] == str(recipe) and record["sha256"] == hashlib.sha256(recipe.read_bytes()).hexdigest()
    assert record["overrides"]["--warmup-max-steps"] == {"value": 2, "recipe": -1}
    assert record["overrides"]["--corpus"] == {"value": str(corpus), "recipe": "data/wiki12k.txt"}
    assert "--device" not in record["overrides"]  # where a run happens is not one of its settings
    stages = summary["stages"]
    assert stages["twin"]["settings"]["batch_size"] == 4 and stages["warmup_a"]["settings"]["batch_size"] == 4
    for stage in ("warmup_a", "warmup_b", "distill"):  # the CPU defaults keep the last step
        assert stages[stage]["saved_model"] == "last step" and stages[stage]["saved_step"] == stages[stage]["steps"]
    assert stages["ensemble"]["weights"] == list(ENSEMBLE_WEIGHTS.twin)  # the twin, then the start
    assert stages["ensemble"]["members"][:1] == [str(out / "twin")]
    assert stages["distill"]["settings"]["learning_rate"] == 2e-5  # the recipe's, not overridden
    modules = json.loads((out / "distilled" / "modules.json").read_text(encoding="utf-8"))
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling", "Normalize"]  # the MiniLM's
    genres = stages["eval"]["dev_spearman_by_genre"]["start"]
    assert set(genres) == {"main-captions", "main-news", "main-forums"}
    assert (
        "| stage | main-captions ×100 (Δ vs start) |" in result.stdout and "| start | starting model" in result.stdout
    )


@pytest.mark.slow
@pytest.mark.cli
def test_the_paper_recipe_keeps_the_checkpoint_that_dev_chose(tmp_path, shared_data, tiny_bert, tiny_bert_b):
    """models/jtcse-bert-base with tiny towers, RTT pairs and a few steps: each warm-up and the twin keep the
    checkpoint with the best dev Spearman among those saved, and say which (``best_step``, its score)."""
    corpus, dev = _tiny_data(tmp_path, shared_data)
    sentences = corpus.read_text(encoding="utf-8").splitlines()
    pairs = {}
    for name, words in (("de", 3), ("fr", 5)):  # paraphrases standing in for round trips: the sentence shortened
        pairs[name] = tmp_path / f"pairs.{name}.tsv"
        pairs[name].write_text("".join(f"{s}\t{' '.join(s.split()[:-words])}\n" for s in sentences if len(s.split()) > 6),
                               encoding="utf-8")  # fmt: skip
    out = tmp_path / "run"
    result = invoke_cli("pipeline", "--recipe", MODELS / "jtcse-bert-base" / "recipe.toml", "-o", out,
                        "--tower-a", tiny_bert, "--tower-b", tiny_bert_b, "--corpus", corpus, "--dev-file", dev,
                        "--pairs-a", pairs["de"], "--pairs-b", pairs["fr"], "--batch-size", 8, "--eval-steps", 1,
                        "--warmup-max-steps", 3, "--warmup-learning-rate", 1e-3, "--twin-max-steps", 3,
                        "--twin-learning-rate", 1e-3, "--precision", "fp32", "--device", "cpu")  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    stages = json.loads((out / "pipeline_summary.json").read_text(encoding="utf-8"))["stages"]
    assert list(stages) == ["warmup_a", "warmup_b", "twin"]  # until = "twin"
    for name, summary in stages.items():
        by_step = {int(step): score for step, score in summary["dev_spearman_by_step"].items() if int(step) > 0}
        assert summary["saved_model"] == "best checkpoint by dev Spearman", name
        assert summary["best_step"] == summary["saved_step"] == max(by_step, key=by_step.get), name
        assert summary["best_dev_spearman"] == pytest.approx(by_step[summary["best_step"]]), name
        assert summary["final_dev_spearman"] == pytest.approx(summary["best_dev_spearman"], abs=1e-6), name
    assert stages["warmup_a"]["data"]["paraphrase_rows"] > 0
