"""Every ``jtcse`` command line written in the docs (docs/, models/, the READMEs) parses as it is written: its
options exist and take the values given, and a training command's settings (a pipeline's config, its recipe read)
pass their checks. Nothing runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from helpers.cli import REPO, click_app

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


def _parse(command: str) -> None:
    """Parse one documented command line as ``jtcse`` would, resolving a pipeline's config; raises if it fails."""
    args = shlex.split(command)
    ends = [i for i, arg in enumerate(args) if arg in {">", ">>", "|", "&&", ";", "&"}]
    args = args[: ends[0]] if ends else args  # the command itself, not what the shell does with its output
    click_command, path = click_app(), []
    while hasattr(click_command, "commands") and args and args[0] in click_command.commands:
        path.append(args[0])
        click_command = click_command.commands[args.pop(0)]
    if "--help" in args:
        return
    context = click_command.make_context(" ".join(["jtcse", *path]), args)
    if path == ["pipeline"]:
        from jtcse.commands.pipeline import pipeline_config

        pipeline_config(context.params)
    elif path in (["simcse"], ["train"], ["distill"]):  # their settings, checked as the command checks them
        import importlib

        from jtcse.commands._settings import settings_from

        settings_from(importlib.import_module(f"jtcse.commands.{path[0]}").OPTIONS, context.params)


def test_every_documented_command_line_parses(monkeypatch):
    """Each command line of :data:`COMMANDS`: a failure names the page and the command (all of them, at once)."""
    monkeypatch.chdir(REPO)  # recipe paths are written relative to the repository root
    failures = []
    for page, command in COMMANDS:
        try:
            _parse(command)
        except Exception as err:  # noqa: BLE001 - every failure is reported with its page, below
            failures.append(f"{page.relative_to(REPO)}: jtcse {command}: {type(err).__name__}: {err}")
    assert failures == []
