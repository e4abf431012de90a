"""Every ``jtcse`` command line written in the docs (docs/, models/, the READMEs) parses as it is written: its
options exist and take the values given, and a pipeline command line resolves to a config (its recipe read and
checked). Nothing runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from helpers.cli import REPO

PAGES = sorted([*(REPO / "docs").glob("*.md"), *(REPO / "models").rglob("*.md"), REPO / "README.md",
                REPO / "data" / "README.md"])  # fmt: skip
_SHELL = {"", "bash", "sh", "shell", "console"}


def documented_commands(page: Path) -> list[str]:
    """The ``jtcse`` command lines in ``page``'s shell code blocks, continuation lines joined, comments dropped,
    ``$VARIABLES`` standing for a placeholder path; ``torchrun ... -m jtcse CMD`` counts as ``jtcse CMD``."""
    commands, in_block, shell, pending = [], False, False, ""
    for line in page.read_text(encoding="utf-8").splitlines():
        fence = re.match(r"^\s*```(\w*)", line)
        if fence:
            in_block, shell, pending = not in_block, fence.group(1) in _SHELL, ""
            continue
        if not (in_block and shell):
            continue
        pending += line
        if pending.rstrip().endswith("\\"):
            pending = pending.rstrip()[:-1] + " "
            continue
        text, pending = pending.strip(), ""
        match = re.match(r"^(?:\w+=\S*\s+)*jtcse\s+(\S.*)$", text) or re.search(r"\s-m jtcse\s+(\S.*)$", text)
        if match and not text.startswith("#"):
            command = re.sub(r"\s#\s.*$", "", match.group(1))
            commands.append(re.sub(r"\$\{?(\w+)\}?", lambda m: f"placeholder/{m.group(1).lower()}", command))
    return commands


COMMANDS = [(page, command) for page in PAGES for command in documented_commands(page)]


def test_the_docs_have_commands_to_check():
    pages = {page.relative_to(REPO).as_posix() for page, _ in COMMANDS}
    assert {"docs/paper_scale.md", "models/jtcse-bert-base/README.md", "docs/warmup_and_distill.md"} <= pages
    assert sum(command.startswith("pipeline") for _, command in COMMANDS) >= 8


@pytest.mark.parametrize(
    "page, command", COMMANDS, ids=[f"{p.relative_to(REPO).as_posix()}:{c[:60]}" for p, c in COMMANDS]
)
def test_every_documented_command_line_parses(page, command, monkeypatch):
    import typer

    from jtcse.cli import app

    monkeypatch.chdir(REPO)  # recipe paths are written relative to the repository root
    args = shlex.split(command)
    ends = [i for i, arg in enumerate(args) if arg in {">", ">>", "|", "&&", ";", "&"}]
    args = args[: ends[0]] if ends else args  # the command itself, not what the shell does with its output
    click_command = typer.main.get_command(app)
    path = []
    while hasattr(click_command, "commands") and args and args[0] in click_command.commands:
        path.append(args[0])
        click_command = click_command.commands[args.pop(0)]
    if "--help" in args:
        return
    context = click_command.make_context(" ".join(["jtcse", *path]), args)
    if path == ["pipeline"]:
        from jtcse.commands.pipeline import pipeline_config

        pipeline_config(context.params)
