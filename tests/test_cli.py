"""The command line as a user meets it: the command list, loud import failures, one output option, old option
names (hidden, warned about, still working), one-line errors."""

from __future__ import annotations

import functools
import sys

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
    from helpers.cli import click_app

    command = click_app()
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
    # old spellings declared on the settings' fields: an old key (prefixed as the key is) or a whole option
    (("pipeline",), [], "--twin-steps", "twin_max_steps", "--twin-max-steps"),
    (("pipeline",), [], "--probe-steps", "probe_max_steps", "--probe-max-steps"),
    (("pipeline",), [], "--student", "distill_student", "--distill-student"),
    (("pipeline",), [], "--objective", "distill_objective", "--distill-objective"),
    (("simcse",), ["-o", "out"], "--lr", "learning_rate", "--learning-rate"),
]
TYPED = {"learning_rate": ("5e-5", 5e-5), "twin_max_steps": ("5", 5), "probe_max_steps": ("5", 5),
         "distill_student": ("m", "m"), "distill_objective": ("mse", "mse")}  # fmt: skip


@functools.cache
def _help(*path: str) -> str:
    """``jtcse PATH --help`` 250 columns wide (no option cut short), rendered once a process: six old names share
    ``pipeline``'s help, whose rich rendering alone costs about 0.1 s of CPU."""
    result = invoke_cli(*path, "--help", COLUMNS="250")
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(
    "path, needed, old, name, new", OLD_NAMES, ids=[f"{' '.join(p)} {o}" for p, _, o, *_ in OLD_NAMES]
)
def test_an_old_option_name_still_works_warns_once_and_is_hidden(path, needed, old, name, new, capsys):
    """The old name gives the new option its value (required or not) and prints one deprecation warning."""
    import re
    from pathlib import Path

    command = _command(*path)
    value, given = TYPED.get(name, ("somewhere", Path("somewhere")))
    context = command.make_context(path[-1], [*needed, old, value])
    assert context.params[name] == given
    assert capsys.readouterr().err.splitlines() == [f"DeprecationWarning: {old} is deprecated; use {new}."]
    help_text = _help(*path)
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


TRAINING_COMMANDS = [("train", "TwinSettings"), ("simcse", "WarmupSettings"), ("distill", "DistillSettings")]


@pytest.mark.parametrize("command, settings", TRAINING_COMMANDS, ids=[c for c, _ in TRAINING_COMMANDS])
def test_a_training_commands_settings_are_options_generated_from_its_settings_class(command, settings):
    """Every key of the trainer's settings class is one option with the key's help, unset unless typed, showing the
    class's default; so what runs is the class's defaults with the typed values on top."""
    import importlib

    from jtcse.commands._settings import settings_from
    from jtcse.schema import get, keys

    cls = getattr(importlib.import_module("jtcse.training.settings"), settings)
    params = {param.name: param for param in _command(command).params}
    defaults = cls()
    for name, key in keys(cls).items():
        param = params[name]
        assert param.default is None and param.help == key.help.replace("[", "\\["), name  # rich markup escaped
        value = get(defaults, key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert param.show_default == (f"{value:g}" if isinstance(value, float) else str(value)), name
    module = importlib.import_module(f"jtcse.commands.{command}")
    assert settings_from(module.OPTIONS, {}) == defaults
    typed = settings_from(module.OPTIONS, {"learning_rate": 7.5e-5, "max_steps": 7})
    assert (typed.training.learning_rate, typed.training.max_steps) == (7.5e-5, 7)


def test_a_setting_has_one_option_help_wherever_it_is_an_option():
    """The twin's settings are options of jtcse train and (as --twin-KEY) of jtcse pipeline, with one help; so are
    the warm-ups' (simcse, --warmup-KEY) and the distillation's (distill, --distill-KEY). The pipeline sets the seed,
    precision and report_to of every stage at once, so those are its top-level options."""
    from jtcse.schema import keys
    from jtcse.training.settings import DistillSettings, TwinSettings, WarmupSettings

    pipeline = {param.name: param for param in _command("pipeline").params}
    for command, table, cls in (("train", "twin", TwinSettings), ("simcse", "warmup", WarmupSettings),
                                ("distill", "distill", DistillSettings)):  # fmt: skip
        own = {param.name: param for param in _command(command).params}
        for name in keys(cls, ("seed", "precision", "report_to")):
            staged = pipeline[f"{table}_{name}"]
            assert staged.help == own[name].help, name
            assert staged.opts[0] == own[name].opts[0].replace("--", f"--{table}-"), name
        assert not {f"{table}_seed", f"{table}_precision", f"{table}_report_to"} & set(pipeline)
    assert pipeline["twin_enabled"].opts == ["--twin"] and pipeline["probe_enabled"].secondary_opts == ["--no-probe"]


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
    code = (  # one fresh interpreter for both checks: the CLI first, then the trainers on top of it
        "import sys, jtcse.cli\n"
        "print(sorted(m for m in ('numpy', 'torch', 'transformers') if m in sys.modules))\n"
        "import jtcse.training.twin, jtcse.training.simcse, jtcse.training.distill, jtcse.pipeline.run\n"
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["[]", "[]"]


POOLING_COMMANDS = [(("train",), []), (("simcse",), ["-o", "out"]), (("pipeline",), ["-o", "out"]),
                    (("eval", "sts"), ["model", "--data-dir", "d"]), (("eval", "mteb"), ["model"])]  # fmt: skip


def test_a_pooling_other_than_cls_or_mean_is_refused_when_parsed():
    """--pooling is one option (one factory, one check); for training its default is the starting model's own."""
    from jtcse.errors import JTCSEError

    for path, needed in POOLING_COMMANDS:
        command = _command(*path)
        assert command.make_context(path[-1], [*needed, "--pooling", "mean"]).params["pooling"] == "mean"
        assert command.make_context(path[-1], needed).params["pooling"] is None  # the model's own
        with pytest.raises(JTCSEError, match=r"^--pooling: Input should be 'cls' or 'mean'$"):
            if path == ("pipeline",):  # checked with the run's other settings, before anything runs
                from jtcse.commands.pipeline import pipeline_config

                pipeline_config(command.make_context(path[-1], [*needed, "--pooling", "max"]).params)
            else:
                command.make_context(path[-1], [*needed, "--pooling", "max"])
    training = {name: {p.name: p for p in _command(name).params}["pooling"] for name in ("train", "simcse", "pipeline")}
    assert len({(p.help, p.show_default) for p in training.values()}) == 1
    assert "the starting model's own" in training["train"].show_default


def test_pipeline_contradictions_are_one_line_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    line = one_error_line(invoke_cli("pipeline", "-o", out, "--no-ensemble", "--ensemble-with", "some-model"))
    assert line == "Error: enabled = false (--no-ensemble) and models to ensemble with contradict each other."
    assert one_error_line(invoke_cli("pipeline", "-o", out, "--pooling", "weightedmean")) == (
        "Error: --pooling: Input should be 'cls' or 'mean'"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_pipelines_options_show_its_configs_defaults_and_run_them_when_none_is_typed():
    """Each --KEY / --STAGE-KEY option is unset by default, so the config's default applies (one number, one
    place: the stage's settings class), and --help shows it; with no option typed the config is the default one."""
    from jtcse.commands.pipeline import STAGE_OPTIONS, TOP, pipeline_config
    from jtcse.pipeline.settings import ENSEMBLE_WEIGHTS, PipelineConfig
    from jtcse.schema import get

    params = {param.name: param for param in _command("pipeline").params}
    for options in (TOP, *STAGE_OPTIONS):
        for name, key in options.keys.items():
            param = params[options.parameter(name)]
            value = get(options.defaults, key)
            assert param.default is None, param.name
            if options.same_as:  # [warmup_b]: tower I's value unless given
                assert param.show_default == f"as --{options.same_as}-{param.opts[0].split('-', 4)[-1]}", param.name
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                assert param.show_default == (f"{value:g}" if isinstance(value, float) else str(value)), param.name
    assert params["twin_learning_rate"].show_default == "1e-05" and params["warmup_batch_size"].show_default == "32"
    for weights in (ENSEMBLE_WEIGHTS.warmups, ENSEMBLE_WEIGHTS.twin):  # both defaults, with and without a twin
        assert ",".join(f"{w:g}" for w in weights) in params["ensemble_weights"].show_default
    context = _command("pipeline").make_context("pipeline", ["-o", "out"])
    config, record = pipeline_config(context.params)
    assert config == PipelineConfig() and record is None
    assert config.ensemble.enabled is None and config.twin.enabled and config.pooling is None  # by the start; twin on


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


def test_ctrl_c_closes_open_progress_bars_before_its_message(capsys, tmp_path):
    """A trainer interrupted mid-epoch leaves its bar open: it was redrawn under the Ctrl-C message when collected.
    The bar is closed first, so the message is the last line."""
    import typer
    from tqdm import tqdm

    from jtcse.cli import _say_what_is_kept

    def training(output):
        bar = tqdm(total=10, file=sys.stderr)
        bar.update(3)
        raise KeyboardInterrupt

    with pytest.raises(typer.Exit) as stopped:
        _say_what_is_kept("pipeline", training)(output=tmp_path)
    assert stopped.value.exit_code == 130
    lines = [line for line in capsys.readouterr().err.replace("\r", "\n").splitlines() if line.strip()]
    assert lines[-1] == f"Interrupted: the finished work in {tmp_path} is kept; run the same command again to resume."
    assert "3/10" in lines[-2]
