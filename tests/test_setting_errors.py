"""A training setting listed once: the trainer arguments, the settings a run records (and a rerun must share) and the
model card's settings come from the declarations; "best-dev needs a dev file" is one rule; ensemble weights and
combine are one type each; and an error about a setting names it as the caller knows it: the option of the command
typed (``--twin-mini-batch-size`` in ``jtcse pipeline``), the key of a recipe's table for the library
(:class:`jtcse.errors.SettingError`), wherever it is raised (a settings check, the plan, a trainer, a loss)."""

from __future__ import annotations

import pickle

import pytest
from helpers.cli import invoke_cli, one_error_line

from jtcse.errors import SettingError
from jtcse.training.settings import DistillSettings, TrainingSettings, TwinSettings, WarmupSettings, recorded_settings

TRAINING_RECORDED = {
    "batch_size", "max_seq_length", "learning_rate", "epochs", "max_steps", "seed", "eval_steps", "warmup_ratio",
    "checkpoint",
}  # fmt: skip
CONTRASTIVE_RECORDED = {"temperature", "regularizers", "gather_across_devices", "mini_batch_size"}


def test_a_setting_error_is_named_by_whoever_knows_the_setting():
    err = SettingError("{cael_every}={k} does not divide {layers} layers", ["cael_every"], k=3, layers=4)
    assert str(err) == "cael_every=3 does not divide 4 layers" and err.keys == ("cael_every",)
    flagged = err.within("twin").renamed({"cael_every": "--twin-cael-every"}.get)
    assert str(flagged) == "--twin-cael-every=3 does not divide 4 layers" and flagged.table == "twin"
    assert str(flagged.renamed(lambda key: None)) == str(flagged)  # a name nobody knows stays as it was
    assert (
        str(err.within(None, "recipe r.toml [twin]")) == "recipe r.toml [twin]: cael_every=3 does not divide 4 layers"
    )
    again = pickle.loads(pickle.dumps(flagged))  # crosses process boundaries whole (launchers)
    assert (str(again), again.table, again.keys) == (str(flagged), "twin", ("cael_every",))
    named = SettingError.naming("cael_every={2} is {not} cael_every's", "cael_every")  # braces in a message stay
    assert str(named.renamed(lambda key: "--k")) == "--k={2} is {not} --k's"


def test_each_trainer_records_the_settings_earlier_runs_recorded():
    """What a run records is what a rerun must share: the keys may not change, or finished runs would stop counting
    as finished. They come from the declarations (``recorded``); the twin adds its own in the form it always had."""
    assert set(recorded_settings(WarmupSettings())) == TRAINING_RECORDED | CONTRASTIVE_RECORDED
    assert set(recorded_settings(TwinSettings())) == TRAINING_RECORDED | CONTRASTIVE_RECORDED | {"hard_negatives"}
    assert set(recorded_settings(DistillSettings())) == TRAINING_RECORDED | {"objective", "student_pooling"}
    twin = recorded_settings(TwinSettings(cael_every=0))
    assert twin["learning_rate"] == 1e-5 and twin["regularizers"] == () and "cael_every" not in twin


@pytest.mark.slow
def test_the_trainer_arguments_are_the_declared_settings():
    """Each setting declared as a trainer argument is one of SentenceTransformerTrainingArguments' fields, and the
    arguments built for a stage carry its value."""
    import dataclasses

    from sentence_transformers import SentenceTransformerTrainingArguments

    from jtcse.training.arguments import build_training_args

    fields = {field.name for field in dataclasses.fields(SentenceTransformerTrainingArguments)}
    settings = TrainingSettings(batch_size=6, learning_rate=3e-4, seed=7, epochs=2.0, warmup_ratio=0.1)
    arguments = settings.trainer_arguments()
    assert set(arguments) <= fields and len(arguments) == 10
    built = build_training_args("out", settings, has_dev=False, logging_steps=5, device="cpu")
    for name, value in arguments.items():
        if name == "report_to":  # the trainer keeps a list of integrations: "none" is none of them
            value = [] if value == "none" else [value]
        assert getattr(built, name) == value, name
    assert (built.per_device_train_batch_size, built.data_seed, built.load_best_model_at_end) == (6, 7, False)


def test_best_dev_needs_a_dev_file_by_one_rule():
    assert TrainingSettings(checkpoint="best-dev").kept_by_dev and not TrainingSettings().kept_by_dev
    TrainingSettings(checkpoint="best-dev").check_dev_file("dev.csv")
    TrainingSettings().check_dev_file(None)
    with pytest.raises(SettingError, match=r"^checkpoint best-dev keeps .* \(--dev-file\); or keep the last step"):
        TrainingSettings(checkpoint="best-dev").check_dev_file(None)


def test_best_dev_is_compared_in_one_place():
    """Which model a stage keeps is asked of its settings (``kept_by_dev``): the word best-dev is compared once in
    jtcse/, by that property."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "jtcse"
    found = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "best-dev" not in text:  # no such constant here: not worth parsing (0.3 s of CPU for the whole package)
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                if any(isinstance(o, ast.Constant) and o.value == "best-dev" for o in operands):
                    found.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    assert len(found) == 1 and found[0].startswith("jtcse/training/settings.py:"), found


@pytest.mark.cli
def test_every_command_names_its_own_option_in_a_setting_error(tmp_path):
    """The same errors, raised by a settings check, the plan or a trainer, name the option of the command typed; a
    recipe's error names the file and the table too. Nothing is written."""
    recipe = tmp_path / "r.toml"
    recipe.write_text('[twin]\nmini_batch_size = 4\nregularizers = ["simreg"]\n', encoding="utf-8")
    batch = tmp_path / "batch.toml"
    batch.write_text("[twin]\nbatch_size = 1\n", encoding="utf-8")
    out = tmp_path / "out"
    cases = [
        (["pipeline", "--twin-mini-batch-size", 4, "--twin-regularizer", "simreg", "--dump-recipe"],
         "Error: --twin-mini-batch-size (GradCache) cannot be combined with token-level terms (simreg): the cached "
         "loss embeds without a graph, so no token states reach them. Turn it off (--twin-mini-batch-size 0) or drop the "
         "--twin-regularizer options."),
        (["pipeline", "--recipe", recipe, "--dump-recipe"], f"Error: recipe {recipe} [twin]: --twin-mini-batch-size"),
        (["pipeline", "-o", out, "--warmup-b-checkpoint", "best-dev", "--until", "warmup"],
         "Error: --warmup-b-checkpoint best-dev keeps the checkpoint with the best dev Spearman, so it needs a dev "
         "file (--dev-file); or keep the last step (--warmup-b-checkpoint last)."),
        (["pipeline", "-o", out, "--ensemble-weights", "1", "--until", "ensemble"],
         "Error: --ensemble-weights: 1 weight(s) given for 2 ensemble members; give one weight per member."),
        (["pipeline", "-o", out, "--no-ensemble", "--ensemble-weights", "1,1", "--twin", "--until", "twin"],
         "Error: --ensemble-weights were given without models to ensemble with (--ensemble-with)."),
        (["pipeline", "-o", out, "--precision", "fp16", "--until", "warmup", "--device", "cpu"],
         "Error: --precision fp16 needs a CUDA device, not 'cpu'"),
        (["train", "--mini-batch-size", 4, "-r", "simreg", "-o", out], "Error: --mini-batch-size (GradCache)"),
        (["simcse", "--checkpoint", "best-dev", "-o", out],
         "Error: --checkpoint best-dev keeps the checkpoint with the best dev Spearman, so it needs a dev file "
         "(--dev-file); or keep the last step (--checkpoint last)."),
        (["ensemble", "a", "b", "--weights", "1", "-o", out],
         "Error: --weights: 1 weight(s) given for 2 ensemble members; give one weight per member."),
        (["ensemble", "a", "b", "--weights", "1,-1", "-o", out], "Error: --weights[1]: Input should be greater than 0"),
        (["ensemble", "a", "b", "--combine", "max", "-o", out], "Error: --combine: Input should be 'concat' or 'sum'"),
        (["pipeline", "--twin-batch-size", 1, "--dump-recipe"],
         "Error: --twin-batch-size: Input should be greater than or equal to 2"),
        (["pipeline", "--recipe", batch, "--dump-recipe"],
         f"Error: recipe {batch} [twin]: batch_size: Input should be greater than or equal to 2"),
    ]  # fmt: skip
    wrong = []
    for argv, message in cases:
        line = one_error_line(invoke_cli(*argv))
        if not line.startswith(message):
            wrong.append(f"{argv}: {line}")
    assert not wrong, "\n".join(wrong)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch.toml", "r.toml"]


def test_gradcache_zero_turns_it_off_so_the_twin_takes_regularizers(tiny_bert, tiny_bert_b):
    """The twin embeds 32 sentences a pass through GradCache by default, which no token-level term can follow; 0 turns
    GradCache off (the plain loss is built), so a regularizer is accepted then, and refused with the remedy before."""
    from jtcse.losses import CachedJTCSELoss, JTCSELoss
    from jtcse.modeling.build import build_twin
    from jtcse.training.twin import _jtcse_loss

    assert TwinSettings().loss.mini_batch_size == 32 and TwinSettings().hard_negatives
    off = TwinSettings().replace(mini_batch_size=0, regularizers=("simreg",))
    assert off.loss.mini_batch_size == 0 and off.loss.regularizers == ("simreg",)
    with pytest.raises(SettingError, match=r"Turn it off \(--mini-batch-size 0\)"):
        TwinSettings().replace(regularizers=("simreg",))
    twin = build_twin(tiny_bert, tiny_bert_b, cael_every=2)
    assert type(_jtcse_loss(twin, TwinSettings().replace(mini_batch_size=0))) is JTCSELoss
    assert type(_jtcse_loss(twin, TwinSettings())) is CachedJTCSELoss


def test_ensemble_weights_are_one_type_in_both_commands():
    """``jtcse ensemble --weights`` and ``jtcse pipeline --ensemble-weights`` parse and check alike (one parser, one
    check), and the choices of combine are the ensemble module's one list."""
    from helpers.cli import click_app

    from jtcse.commands._settings import settings_from
    from jtcse.commands.ensemble import OPTIONS
    from jtcse.commands.pipeline import pipeline_config
    from jtcse.modeling.combine import COMBINE_CHOICES

    joined = settings_from(OPTIONS, {"weights": "1, 0.5", "combine": "sum"})
    command = click_app().commands["pipeline"]
    context = command.make_context("pipeline", ["--ensemble-weights", "1, 0.5", "--ensemble-combine", "sum"])
    config, _ = pipeline_config(context.params)
    assert joined.weights == config.ensemble.weights == (1.0, 0.5) and joined.combine == config.ensemble.combine
    params = {p.name: p for p in command.params}
    assert params["ensemble_combine"].metavar == "|".join(COMBINE_CHOICES)
    assert {p.name: p for p in click_app().commands["ensemble"].params}["combine"].metavar == "|".join(COMBINE_CHOICES)


@pytest.mark.slow
@pytest.mark.cli
def test_an_error_a_trainer_raises_in_a_pipeline_names_the_stages_option(tiny_bert, tiny_bert_b, tmp_path):
    """cael_every is checked against the towers' layers by the plan, before the warm-ups train (and by the twin when
    it is built): the pipeline names it --twin-cael-every (the library: [twin] cael_every)."""
    from jtcse.pipeline.run import run_pipeline
    from jtcse.pipeline.settings import PipelineConfig

    tiny = ["--warmup-max-steps", 1, "--warmup-batch-size", 8]
    argv = ["pipeline", "-o", tmp_path / "cli", "--tower-a", tiny_bert, "--tower-b", tiny_bert_b, "--twin",
            "--twin-cael-every", 3, "--until", "twin", *tiny]  # fmt: skip
    assert one_error_line(invoke_cli(*argv)) == (
        "Error: --twin-cael-every=3 does not divide the towers' 4 layers. Valid values: [1, 2, 4] (or None for no "
        "cross-attention)."
    )
    values = dict(tower_a=tiny_bert, tower_b=tiny_bert_b, twin={"enabled": True, "cael_every": 3}, until="twin",
                  warmup={"max_steps": 1, "batch_size": 8})  # fmt: skip
    with pytest.raises(SettingError, match=r"^\[twin\] cael_every=3 does not divide") as raised:
        run_pipeline(tmp_path / "api", PipelineConfig.from_values(values), device="cpu")
    assert raised.value.table == "twin"
