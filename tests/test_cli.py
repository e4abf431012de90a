"""The command line as a user meets it: the command list, loud import failures, one output option, old option
names (hidden, warned about, still working), one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.cli import invoke_cli, one_error_line, run_python

pytestmark = pytest.mark.cli

COMMANDS = [
    "train",
    "simcse",
    "distill",
    "pipeline",
    "rtt",
    "eval",
    "diagnose",
    "encode",
    "index",
    "ensemble",
    "export",
    "data",
]


def test_every_command_is_listed_in_help():
    result = invoke_cli("--help")
    assert result.returncode == 0, result.stderr
    listed = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("│ ") and len(line.split()) > 2]
    assert sorted(name for name in listed if name in COMMANDS) == sorted(COMMANDS)


def test_a_broken_command_module_fails_loudly():
    code = (
        "import sys\n"
        "class Broken:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'jtcse.commands.rtt':\n"
        "            raise ImportError('rtt is broken on purpose')\n"
        "sys.meta_path.insert(0, Broken())\n"
        "import jtcse.cli\n"
    )
    result = run_python(code)
    assert result.returncode != 0
    assert "rtt is broken on purpose" in result.stderr


def _command(*path: str):
    """The click command ``jtcse PATH`` (``("index", "build")`` ...)."""
    import typer

    from jtcse.cli import app

    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return command


def _leaf_commands(command=None, path=()):
    command = command or _command()
    if not hasattr(command, "commands"):
        return [(" ".join(path), command)]
    return [leaf for name, sub in command.commands.items() for leaf in _leaf_commands(sub, (*path, name))]


def test_every_command_writes_to_one_output_option():
    """-o/--output, visible, on every command (each writes something); old spellings are hidden."""
    leaves = dict(_leaf_commands())
    reading_only = {"data list"}
    assert len(leaves) == 16 and reading_only <= set(leaves)
    for name, command in leaves.items():
        if name in reading_only:
            continue
        options = {param.name: param for param in command.params}
        names = ["--output", "-o", "--to"] if name == "data fetch" else ["--output", "-o"]  # --to: the spelling
        assert options["output"].opts == names and not options["output"].hidden, name
        assert all(param.hidden for param in command.params if param.name.endswith("_alias")), name


# (command, arguments it needs before parsing, old spelling of -o/--output)
OLD_OUTPUT_SPELLINGS = [
    (("train",), [], "--output-dir"),
    (("simcse",), [], "--output-dir"),
    (("distill",), ["-t", "teacher"], "--output-dir"),
    (("ensemble",), ["a", "b"], "--output-dir"),
    (("pipeline",), [], "--output-dir"),
    (("rtt",), [], "--output-dir"),
    (("eval", "sts"), ["model", "--data-dir", "d"], "--output-json"),
    (("eval", "mteb"), ["model"], "--output-dir"),
    (("diagnose",), ["model"], "--out"),
    (("index", "build"), ["-i", "corpus.txt"], "--index"),
]
OLD_NAMES = [(path, needed, old, "output", "-o/--output") for path, needed, old in OLD_OUTPUT_SPELLINGS] + [
    (("train",), [], "--lr", "learning_rate", "--learning-rate"),
    (("simcse",), ["-o", "out"], "--pairs", "pairs_file", "--pairs-file"),
    (("distill",), ["-t", "teacher", "-o", "out"], "--train-file", "corpus", "--corpus"),
]


@pytest.mark.parametrize(
    "path, needed, old, name, new", OLD_NAMES, ids=[f"{' '.join(p)} {o}" for p, _, o, *_ in OLD_NAMES]
)
def test_an_old_option_name_still_works_warns_once_and_is_hidden(path, needed, old, name, new, capsys):
    """The old name gives the new option its value (required or not) and prints one deprecation warning."""
    import re
    from pathlib import Path

    from typer.testing import CliRunner

    from jtcse.cli import app

    command = _command(*path)
    value = "5e-5" if name == "learning_rate" else "somewhere"
    context = command.make_context(path[-1], [*needed, old, value])
    given = 5e-5 if name == "learning_rate" else Path(value)
    assert context.params[name] == given
    assert capsys.readouterr().err.splitlines() == [f"DeprecationWarning: {old} is deprecated; use {new}."]
    help_text = CliRunner().invoke(app, [*path, "--help"]).stdout
    assert not re.search(rf"(?<![\w-]){old}(?![\w-])", help_text) and new.split("/")[-1] in help_text


def test_an_old_option_name_with_its_new_one_is_one_error_line(tmp_path):
    line = one_error_line(invoke_cli("train", "--output-dir", tmp_path / "a", "-o", tmp_path / "b"))
    assert line == "Error: give -o/--output once (--output-dir is its old name)."
    line = one_error_line(invoke_cli("train", "--lr", "1e-3", "--learning-rate", "2e-3"))
    assert line == "Error: give --learning-rate once (--lr is its old name)."
    both = invoke_cli("index", "build", "-i", tmp_path / "c.txt", "--index", tmp_path / "i", "-o", tmp_path / "i")
    assert one_error_line(both) == "Error: give -o/--output once (--index is its old name)."
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_distill_reads_corpus_and_train_file_is_its_hidden_old_name(tmp_path):
    help_text = invoke_cli("distill", "--help").stdout
    assert "--corpus" in help_text and "--train-file" not in help_text
    both = invoke_cli(
        "distill", "-t", tmp_path / "t", "-o", tmp_path / "o", "--corpus", "a.txt", "--train-file", "b.txt"
    )
    assert one_error_line(both) == "Error: give --corpus once (--train-file is its old name)."
    assert not (tmp_path / "o").exists()


PRESETS = [
    ("train", "jtcse.training.twin", "TWIN_SETTINGS", {"save_steps", "warmup_ratio"}),
    ("simcse", "jtcse.training.simcse", "SIMCSE_SETTINGS", {"warmup_ratio"}),
    ("distill", "jtcse.training.distill", "DISTILL_SETTINGS", {"warmup_ratio"}),
]


@pytest.mark.parametrize("command, trainer, preset, not_options", PRESETS, ids=[p[0] for p in PRESETS])
def test_changing_a_trainer_preset_changes_its_command_defaults(command, trainer, preset, not_options, monkeypatch):
    """Every training setting a command takes defaults to its trainer's preset, read from the preset itself."""
    import dataclasses
    import importlib

    import typer
    from typer.testing import CliRunner

    settings = getattr(importlib.import_module(trainer), preset)
    changed = dataclasses.replace(
        settings, batch_size=settings.batch_size + 3, max_seq_length=settings.max_seq_length + 5,
        learning_rate=7.5e-5, epochs=settings.epochs + 2, max_steps=7, seed=settings.seed + 1,
        eval_steps=settings.eval_steps + 11, save_steps=13, logging_steps=17, warmup_ratio=0.25,
        precision="bf16" if settings.precision != "bf16" else "fp32",
        gradient_checkpointing=not settings.gradient_checkpointing, keep_checkpoints=not settings.keep_checkpoints,
    )  # fmt: skip
    assert all(getattr(changed, f.name) != getattr(settings, f.name) for f in dataclasses.fields(settings))
    module = importlib.import_module(f"jtcse.commands.{command}")
    monkeypatch.setattr(importlib.import_module(trainer), preset, changed)
    try:
        importlib.reload(module)  # the command is defined again, as it would be with the changed preset in the source
        app = typer.Typer()
        module.register(app)
        defaults = {param.name: param.default for param in typer.main.get_command(app).params}
        help_text = CliRunner().invoke(app, ["--help"]).stdout
    finally:
        monkeypatch.undo()
        importlib.reload(module)
    names = {f.name for f in dataclasses.fields(changed)}
    assert names - set(defaults) == not_options
    for name in names - not_options:
        assert defaults[name] == getattr(changed, name), name
    assert "7.5e-05" in help_text  # and --help shows it


def test_other_trainer_defaults_are_read_from_the_trainer():
    """The twin's loss options are declared once (jtcse train, jtcse pipeline --twin-...), with train_twin's
    defaults; so are the temperatures, the distillation objective and teacher batch size, the pipeline's seed."""
    from jtcse.commands._options import declared_default
    from jtcse.training.distill import DEFAULT_OBJECTIVE, distill
    from jtcse.training.pipeline import run_pipeline
    from jtcse.training.simcse import train_simcse
    from jtcse.training.twin import train_twin

    def options(*path):
        return {param.name: param for param in _command(*path).params}

    train, pipeline, simcse, distill_options = (
        options("train"),
        options("pipeline"),
        options("simcse"),
        options("distill"),
    )
    for name in ("cael_every", "nce_weight", "icnce_weight", "ictm_weight"):
        own, twin = train[name], pipeline[f"twin_{name}"]
        assert own.default == twin.default == declared_default(train_twin, name), name
        assert own.help == twin.help and twin.opts == [own.opts[0].replace("--", "--twin-")], name
    assert train["temperature"].default == declared_default(train_twin, "temperature")
    assert simcse["temperature"].default == declared_default(train_simcse, "temperature")
    assert distill_options["objective"].default == pipeline["objective"].default == DEFAULT_OBJECTIVE
    assert distill_options["teacher_batch_size"].default == declared_default(distill, "teacher_batch_size")
    assert pipeline["seed"].default == declared_default(run_pipeline, "seed")


@pytest.mark.slow
def test_library_errors_become_one_line_and_jtcse_debug_shows_the_traceback(tmp_path, tiny_bert):
    missing = tmp_path / "no-model"
    line = one_error_line(invoke_cli("diagnose", missing, "-o", tmp_path / "d"))  # FileNotFoundError
    assert line.startswith(f"Error: model not found: {missing}")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("one line\n", encoding="utf-8")
    args = ("encode", tiny_bert, "-i", corpus, "-o", tmp_path / "e.npy", "--device", "tpu9", "--no-progress")
    assert (
        one_error_line(invoke_cli(*args)) == "Error: unknown device 'tpu9': use cpu, cuda, cuda:N or mps"
    )  # ValueError
    debug = invoke_cli(*args, JTCSE_DEBUG=1)
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "ValueError: unknown device" in debug.stderr


def test_trainer_modules_import_no_torch_so_bad_options_fail_at_once():
    """The training commands import their trainer first; settings and option mistakes are reported before
    torch, transformers and sentence-transformers load (seconds on a small machine). The CLI itself, which
    reads the trainers' presets when it starts, loads not even numpy: ``jtcse --help`` answers at once."""
    code = (
        "import sys\n"
        "import jtcse.training.twin, jtcse.training.simcse, jtcse.training.distill, jtcse.training.pipeline\n"
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"
    code = "import sys, jtcse.cli\nprint(sorted(m for m in ('numpy', 'torch', 'transformers') if m in sys.modules))\n"
    result = run_python(code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


POOLING_COMMANDS = [(("train",), []), (("simcse",), ["-o", "out"]), (("pipeline",), ["-o", "out"]),
                    (("eval", "sts"), ["model", "--data-dir", "d"]), (("eval", "mteb"), ["model"])]  # fmt: skip


def test_a_pooling_other_than_cls_or_mean_is_refused_when_parsed():
    """--pooling is one option (one factory, one check); for training its default is the starting model's own."""
    from jtcse.errors import JTCSEError

    for path, needed in POOLING_COMMANDS:
        command = _command(*path)
        assert command.make_context(path[-1], [*needed, "--pooling", "mean"]).params["pooling"] == "mean"
        assert command.make_context(path[-1], needed).params["pooling"] is None  # the model's own
        with pytest.raises(JTCSEError, match=r"^--pooling must be one of cls, mean \(got 'max'\)\.$"):
            command.make_context(path[-1], [*needed, "--pooling", "max"])
    training = {
        name: {p.name: p for p in _command(name).params}["pooling"].help for name in ("train", "simcse", "pipeline")
    }
    assert len(set(training.values())) == 1 and "Default: the starting model's own" in training["train"]


def test_pipeline_contradictions_are_one_line_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    line = one_error_line(invoke_cli("pipeline", "-o", out, "--no-ensemble", "--ensemble-with", "some-model"))
    assert line == (
        "Error: ensemble=False (--no-ensemble) and models to ensemble with (--ensemble-with) contradict each other."
    )
    assert one_error_line(invoke_cli("pipeline", "-o", out, "--pooling", "weightedmean")) == (
        "Error: --pooling must be one of cls, mean (got 'weightedmean')."
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_pipelines_stage_defaults_are_its_trainers_presets_shown_in_help():
    """Each --STAGE-* option is unset by default, so the trainer's preset applies (one number, one place), and
    --help shows that preset's value; with no option given the pipeline runs on the presets exactly."""
    from jtcse.commands.pipeline import STAGE_NAMES, pipeline_arguments
    from jtcse.training.pipeline_settings import ENSEMBLE_WEIGHTS, STAGE_DEFAULTS, check_settings

    params = {param.name: param for param in _command("pipeline").params}
    fields = {"steps": "max_steps", "learning_rate": "learning_rate", "batch_size": "batch_size",
              "max_seq_length": "max_seq_length", "eval_steps": "eval_steps"}  # fmt: skip
    for stage in STAGE_NAMES:
        for option, field in fields.items():
            param = params[f"{stage}_{option}"]
            value = getattr(STAGE_DEFAULTS[stage], field)
            assert param.default is None and param.show_default.split(" ")[0] == (
                f"{value:g}" if isinstance(value, float) else str(value)
            ), param.name
    for weights in ENSEMBLE_WEIGHTS.values():  # both defaults, with and without a twin
        assert ",".join(f"{w:g}" for w in weights) in params["ensemble_weights"].show_default
    arguments = pipeline_arguments(_command("pipeline").make_context("pipeline", ["-o", "out"]).params)
    stages = check_settings(**{k: arguments[k] for k in ("warmup_settings", "twin_settings", "distill_settings")})
    assert {stage: settings for stage, (settings, _) in stages.items()} == STAGE_DEFAULTS
    assert arguments["ensemble"] is None and arguments["twin"] is None and arguments["pooling"] is None  # by the start


def _the_input_as_output(tmp_path, tiny_bert) -> dict[str, tuple[list, str]]:
    """Per command, a call whose output is (or holds) its own input: ``(argv, message)``."""
    import shutil

    from jtcse.search.lines import iter_chunks
    from jtcse.search.sinks import PartWriter

    text = "".join(f"Sentence {i} of the corpus.\n" for i in range(6))
    (tmp_path / "corpus.npy").write_text(text, encoding="utf-8")  # a text file a user named .npy
    (tmp_path / "idx").mkdir()
    (tmp_path / "idx" / "texts.txt").write_text(text, encoding="utf-8")
    (tmp_path / "shards").mkdir()
    chunk = next(iter_chunks(tmp_path / "idx" / "texts.txt", 6))
    PartWriter(tmp_path / "shards", 4, "float32", {"model": "m", "normalized": False}).write(0, chunk, np.ones((6, 4)))
    shutil.copytree(tiny_bert, tmp_path / "models" / "bert")
    (tmp_path / "rtt").mkdir()
    (tmp_path / "rtt" / "pairs.de.tsv").write_text(text, encoding="utf-8")
    same, holds = "is the input", "holds the input"
    return {
        "encode": (["encode", tiny_bert, "-i", "corpus.npy", "-o", "corpus.npy", "--overwrite", "--no-progress"], same),
        "index-build": (["index", "build", tiny_bert, "-i", "idx/texts.txt", "-o", "idx", "--no-progress"], holds),
        "index-embeddings": (["index", "build", "--embeddings", "shards", "-o", "shards", "--overwrite"], same),
        "export": (["export", "models/bert", "-o", "models", "--overwrite"], holds),
        "rtt": (["rtt", "--input", "rtt/pairs.de.tsv", "--pivots", "de", "--backend", "replay", "-o", "rtt"], holds),
        "ensemble": (["ensemble", "models/bert", tiny_bert, "-o", "models", "--overwrite"], holds),
        "ensemble-cwd": (["ensemble", tiny_bert, tiny_bert, "-o", ".", "--overwrite"], "is the working directory"),
    }


@pytest.mark.parametrize(
    "command", ["encode", "index-build", "index-embeddings", "export", "rtt", "ensemble", "ensemble-cwd"]
)
def test_an_output_that_is_or_holds_the_input_is_refused_before_anything_is_touched(command, tmp_path, tiny_bert):
    """`encode -i X -o X --overwrite` deleted X; `index build -i idx/texts.txt -o idx` emptied it; `export M -o
    PARENT --overwrite` would delete the model: one check (jtcse.output_paths) in every command that reads and writes."""
    from helpers.files import snapshot

    argv, message = _the_input_as_output(tmp_path, tiny_bert)[command]
    before = snapshot([tmp_path])
    line = one_error_line(invoke_cli(*argv, cwd=tmp_path))
    assert message in line and ("Give another -o" in line or "outside it" in line or "give a new folder" in line), line
    assert snapshot([tmp_path]) == before


def test_no_option_help_loses_words_to_rich_markup():
    """typer renders help as rich markup, which drops "[...]" silently: `eval mteb --tasks` said "task names ." (its
    "[default: STS17 ...]" eaten), and rtt's "[googletrans]" labels vanished."""
    from rich.text import Text

    eaten = [
        (name, param.name, param.help)
        for name, command in _leaf_commands()
        for param in command.params
        if getattr(param, "help", None) and Text.from_markup(param.help).plain != param.help.replace("\\[", "[")
    ]
    assert eaten == []
    shown = " ".join(invoke_cli("eval", "mteb", "--help", COLUMNS=400).stdout.split())
    assert "Comma-separated MTEB task names. Default: STS17 (en-en), STS22.v2 (en)" in shown


def test_batch_size_help_names_in_batch_negatives_only_where_training_has_them():
    """`--batch-size` of encode and eval mteb said "(training: in-batch negatives)"."""
    helps = {name: {p.name: p.help for p in command.params}.get("batch_size") for name, command in _leaf_commands()}
    for name, help in helps.items():
        if help is not None:
            assert ("in-batch negatives" in help) == (name in {"train", "simcse", "distill"}), (name, help)
    assert helps["encode"] == helps["eval mteb"] == "Sentences encoded per batch (more: faster, more memory)."
