"""Every public loss class documents itself the way sentence-transformers' losses do, and the losses raise plain
``ValueError`` (they are library code that sentence-transformers users import)."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

import pytest

import jtcse.losses

LOSSES = [name for name in jtcse.losses.__all__ if name.endswith("Loss")]
SECTIONS = ("Args:", "References:", "Inputs:", "Relations:", "Example:")


def _section(doc: str, title: str) -> list[str]:
    """The lines of section ``title`` of a cleaned docstring (indented lines up to the next section)."""
    lines = doc.splitlines()
    start = lines.index(title) + 1
    end = next((i for i in range(start, len(lines)) if lines[i] and not lines[i].startswith(" ")), len(lines))
    return lines[start:end]


def test_the_public_losses_are_the_ones_expected():
    assert sorted(LOSSES) == [
        "CachedJTCSELoss",
        "DispersionLoss",
        "DistillationSumLoss",
        "JTCSELoss",
        "NITPLoss",
        "NormalizedMSELoss",
        "RegularizedLoss",
        "SimRegLoss",
        "SimilarityMatrixLoss",
        "ThresholdedCrossEntropyLoss",
        "ThresholdedMultipleNegativesRankingLoss",
    ]


@pytest.mark.parametrize("name", LOSSES)
def test_each_loss_has_the_sections_of_a_sentence_transformers_loss(name):
    cls = getattr(jtcse.losses, name)
    doc = inspect.getdoc(cls.__init__)
    assert doc and all(title in doc.splitlines() for title in SECTIONS), f"{name}: missing one of {SECTIONS}"
    assert isinstance(inspect.getattr_static(cls, "citation"), property)
    # every argument is documented, and nothing else is
    documented = {m[1] for line in _section(doc, "Args:") if (m := re.match(r" {4}(\w+): ", line))}
    parameters = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert documented == parameters, name


@pytest.mark.parametrize("name", LOSSES)
def test_each_example_is_python_and_uses_its_loss(name):
    doc = inspect.getdoc(getattr(jtcse.losses, name).__init__)
    block = "\n".join(line for line in _section(doc, "Example:") if line.strip() != "::")
    code = textwrap.dedent(block)
    compile(code, f"<{name} example>", "exec")
    assert f"{name}(" in code


@pytest.mark.parametrize("name", LOSSES)
def test_each_inputs_table_is_a_well_formed_grid_table(name):
    doc = inspect.getdoc(getattr(jtcse.losses, name).__init__)
    table = [line.strip() for line in _section(doc, "Inputs:") if line.strip()]
    assert table and table[0].startswith("+") and table[-1].startswith("+")
    columns = [i for i, char in enumerate(table[0]) if char == "+"]
    for line in table:
        assert len(line) == len(table[0]), f"{name}: {line!r}"
        assert [i for i, char in enumerate(line) if char in "+|"] == columns, f"{name}: {line!r}"


def test_loss_citations_without_an_instance():
    """The model card reads a loss class's citation without building it (``cls.citation.fget(None)``)."""
    for name in LOSSES:
        if name not in ("RegularizedLoss", "DistillationSumLoss"):  # its citation joins those of the losses it holds
            assert "@" in getattr(jtcse.losses, name).citation.fget(None), name


def test_losses_raise_plain_value_errors():
    """No module of ``jtcse.losses`` raises (or imports) jtcse's own error class."""
    package = Path(jtcse.losses.__file__).parent
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
        assert "JTCSEError" not in imported and "ModelNotFoundError" not in imported, path
