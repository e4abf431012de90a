"""The README stays true: its layout, "Where things live" and command tables name what is there."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.cli import click_app

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _rows(heading: str) -> list[list[str]]:
    """The body rows of the table under ``## heading``, as lists of cells."""
    section = README.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_where_things_live_names_files_and_definitions_that_exist():
    rows = _rows("Where things live")
    assert len(rows) >= 4
    for question, answer in rows:
        # every `jtcse/....py` named exists, and every `name` in brackets after it is defined there
        for path, names in re.findall(r"`(jtcse/[\w/]+\.py)`(?: \(([^)]*)\))?", answer):
            source = (REPO / path).read_text(encoding="utf-8")
            for name in re.findall(r"`(\w+)`", names):
                defined = rf"^\s*(?:def|class) {name}\b|^{name}\b\s*(?::[^=\n]*)?="
                assert re.search(defined, source, flags=re.M), f"{question}: {name} is not defined in {path}"
        for link in re.findall(r"\]\(([^)]+)\)", answer):
            assert (REPO / link).is_file(), f"{question}: {link} does not exist"


def test_layout_folders_exist_and_the_docs_row_lists_every_page():
    rows = {folder.strip("`"): what for folder, what in _rows("Layout")}
    for folder in rows:
        assert (REPO / folder).is_dir(), folder
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert pages and [p for p in pages if f"`{p}`" not in rows["docs/"]] == []


def test_command_table_has_a_row_for_every_command():

    commands = click_app().commands
    listed = " ".join(row[0] for row in _rows("What it does, by command"))
    missing = [name for name in commands if not re.search(rf"`jtcse {name}\b|/ `{name}`", listed)]
    assert missing == []
    for row in _rows("What it does, by command"):
        for link in re.findall(r"\]\(([^)]+)\)", row[-1]):
            assert (REPO / link).is_file(), link
