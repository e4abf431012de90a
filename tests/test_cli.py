"""The command line as a user meets it: the command list, loud import failures, the --lr alias, one-line errors."""

from __future__ import annotations

import pytest

from helpers.cli import one_error_line, run_cli, run_python

pytestmark = pytest.mark.cli

COMMANDS = ["train", "simcse", "distill", "pipeline", "rtt", "eval", "diagnose", "encode", "index", "ensemble", "export", "data"]


def test_every_command_is_listed_in_help():
    result = run_cli("--help")
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


def test_lr_is_a_hidden_alias_of_learning_rate():
    from jtcse.commands._options import pick_learning_rate

    assert pick_learning_rate(1.3e-6, None, 1.3e-6) == 1.3e-6
    assert pick_learning_rate(1.3e-6, 5e-5, 1.3e-6) == 5e-5
    assert pick_learning_rate(2e-5, None, 1.3e-6) == 2e-5
    help_text = run_cli("train", "--help").stdout
    assert "--learning-rate" in help_text and "--lr " not in help_text
    line = one_error_line(run_cli("train", "--lr", "1e-3", "--learning-rate", "2e-3"))
    assert line == "Error: give the learning rate once, with --learning-rate (--lr is its old name)."


def test_distill_reads_corpus_and_train_file_is_its_hidden_old_name(tmp_path):
    help_text = run_cli("distill", "--help").stdout
    assert "--corpus" in help_text and "--train-file" not in help_text
    both = run_cli("distill", "-t", tmp_path / "t", "-o", tmp_path / "o", "--corpus", "a.txt", "--train-file", "b.txt")
    assert one_error_line(both) == "Error: give the corpus once, with --corpus (--train-file is its old name)."
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_library_errors_become_one_line_and_jtcse_debug_shows_the_traceback(tmp_path, tiny_bert):
    missing = tmp_path / "no-model"
    line = one_error_line(run_cli("diagnose", missing, "--out", tmp_path / "d"))  # FileNotFoundError
    assert line.startswith(f"Error: model not found: {missing}")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("one line\n", encoding="utf-8")
    args = ("encode", tiny_bert, "-i", corpus, "-o", tmp_path / "e.npy", "--device", "tpu9", "--no-progress")
    assert one_error_line(run_cli(*args)) == "Error: unknown device 'tpu9': use cpu, cuda, cuda:N or mps"  # ValueError
    debug = run_cli(*args, JTCSE_DEBUG=1)
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "ValueError: unknown device" in debug.stderr


def test_trainer_modules_import_no_torch_so_bad_options_fail_at_once():
    """The training commands import their trainer first; settings and option mistakes are reported before
    torch, transformers and sentence-transformers load (seconds on a small machine)."""
    code = (
        "import sys\n"
        "import jtcse.training.twin, jtcse.training.simcse, jtcse.training.distill, jtcse.training.pipeline\n"
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"
