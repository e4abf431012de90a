"""The house rules of docs/architecture.md, checked: the import-linter contracts in pyproject.toml (floors,
no circle but the documented one) and the page's floor table, which is the floors contract row for row, no module
over 500 lines (nor one kept under it by ``# fmt: skip``), no function in jtcse/ over 80 lines of code, no catch-all
module names, and scripts and the study runner (``evaluation/``) that import jtcse and their own package only (no
script imports another, nor tests/)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "jtcse"
SCRIPTS = REPO / "scripts"
STUDIES = REPO / "evaluation"
MAX_LINES = 500
MAX_FUNCTION_LINES = 80
FMT_SKIP = "  # fmt: skip"
CATCH_ALL_NAMES = {"common", "utils", "util", "helpers", "misc"}


def _lint_imports(config: Path) -> subprocess.CompletedProcess:
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed (pip install -e .[dev])")
    return subprocess.run(
        [str(lint), "--config", str(config), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_import_contracts_are_kept():
    result = _lint_imports(REPO / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def test_the_circle_contract_catches_the_documented_circle_when_it_is_not_excused(tmp_path):
    """The no-circles contract can fail: without its one excused import it reports checkpoint_code <-> ensemble."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    excuse = '"jtcse.modeling.checkpoint_code -> jtcse.modeling.ensemble",'
    assert excuse in text
    config = tmp_path / "pyproject.toml"
    config.write_text(text.replace(excuse, ""), encoding="utf-8")
    result = _lint_imports(config)
    assert result.returncode != 0 and "No cycles are allowed in jtcse.modeling" in result.stdout


def test_no_module_is_over_500_lines_or_named_for_no_concern():
    modules = sorted([*PACKAGE.rglob("*.py"), *SCRIPTS.glob("*.py"), *STUDIES.rglob("*.py")])
    too_long = {
        str(p.relative_to(REPO)): n
        for p in modules
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not too_long, f"modules over {MAX_LINES} lines: {too_long}"
    catch_all = [str(p.relative_to(REPO)) for p in PACKAGE.rglob("*") if p.stem in CATCH_ALL_NAMES]
    assert not catch_all, f"modules or packages named for no concern: {catch_all}"


def _imported_modules(path: Path) -> set[str]:
    """The top-level names of every module ``path`` imports (absolute imports, at any depth)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module and not node.level
    }
    return {name.split(".")[0] for name in names}


def test_no_script_or_study_code_imports_a_script_or_the_tests():
    """Scripts and the study runner share code through jtcse or the ``evaluation`` package, never through
    ``sys.path``."""
    scripts = {p.stem for p in SCRIPTS.glob("*.py")}
    test_modules = {"helpers", "conftest", "tests"}
    for path in sorted([*SCRIPTS.glob("*.py"), *STUDIES.rglob("*.py")]):
        wrong = _imported_modules(path) & (scripts | test_modules)
        assert not wrong, f"{path.relative_to(REPO)} imports {sorted(wrong)}"
    for path in STUDIES.rglob("*.py"):
        assert "sys.path" not in path.read_text(encoding="utf-8"), f"{path.relative_to(REPO)} edits sys.path"


def test_no_module_stays_under_500_lines_by_fmt_skip(tmp_path):
    """A ``# fmt: skip`` may keep a table aligned, not a module short: each module holding one, formatted without
    them (``ruff format``, the project's settings), is still at most 500 lines."""
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists():
        pytest.skip("ruff is not installed (pip install -e .[dev])")
    modules = [p for p in PACKAGE.rglob("*.py") if FMT_SKIP in p.read_text(encoding="utf-8")]
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    for path in modules:
        copy = tmp_path / path.relative_to(REPO)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(path.read_text(encoding="utf-8").replace(FMT_SKIP + "\n", "\n"), encoding="utf-8")
    if modules:
        subprocess.run([str(ruff), "format", "-q", "."], cwd=tmp_path, check=True, timeout=60)
    formatted = {
        str(p.relative_to(REPO)): len((tmp_path / p.relative_to(REPO)).read_text().splitlines()) for p in modules
    }
    assert not {name: n for name, n in formatted.items() if n > MAX_LINES}, formatted


def function_lengths(path: Path) -> list[tuple[int, str]]:
    """``(lines of code, "file:line name")`` of every function in ``path``: the lines of its body from its first
    statement after the docstring that are neither blank nor a comment (the signature and the docstring are
    declarations, not counted; a nested function counts within its owner too)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if ast.get_docstring(node, clean=False) is not None else node.body
            if body:
                code = [n for n in range(body[0].lineno, node.end_lineno + 1) if _is_code(lines[n - 1])]
                out.append((len(code), f"{path.relative_to(REPO)}:{node.lineno} {node.name}"))
    return out


def _is_code(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


@pytest.mark.slow
def test_no_function_in_the_package_is_over_80_lines_of_code():
    lengths = [entry for path in sorted(PACKAGE.rglob("*.py")) for entry in function_lengths(path)]
    assert max(lengths)[0] > 40  # the measure sees whole bodies
    too_long = sorted(entry for entry in lengths if entry[0] > MAX_FUNCTION_LINES)
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines of code: {too_long}"


def contract_floors(pyproject: str) -> list[set[str]]:
    """The ``floors`` contract's layers, top first, each a set of module names (``jtcse.training``)."""
    from jtcse.toml_file import tomllib

    contracts = tomllib.loads(pyproject)["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["id"] == "floors")
    return [{name.strip() for name in layer.split("|")} for layer in layers]


def documented_floors(page: str) -> list[tuple[int, set[str]]]:
    """``(floor number, module names)`` of each row of docs/architecture.md's floor table, in its order (a room is
    written `training/` or `cli`: ``jtcse.training``, ``jtcse.cli``)."""
    import re

    rows = []
    for line in page.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and (number := re.match(r"(\d+)\b", cells[0])):
            rooms = {f"jtcse.{room.rstrip('/')}" for room in re.findall(r"`([^`]+)`", cells[1])}
            rows.append((int(number.group(1)), rooms))
    return rows


def floor_differences(pyproject: str, page: str) -> list[str]:
    """Where the page's floors differ from the contract's layers: one row a layer, top first, numbered down to 1,
    the same rooms; and every module of jtcse/ is on some floor."""
    layers, rows = contract_floors(pyproject), documented_floors(page)
    wrong = []
    if [number for number, _ in rows] != list(range(len(layers), 0, -1)):
        wrong.append(f"the page numbers its floors {[n for n, _ in rows]}, the contract has {len(layers)} layers")
    for layer, (number, rooms) in zip(layers, rows, strict=False):  # a missing row: reported by its numbers
        if rooms != layer:
            wrong.append(f"floor {number}: the page has {sorted(rooms)}, the contract {sorted(layer)}")
    modules = {f"jtcse.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    modules |= {f"jtcse.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py")}
    placed = set().union(*layers)
    wrong += [f"{module} is on no floor" for module in sorted(modules - placed)]
    return wrong


def test_the_architecture_page_is_the_floors_contract():
    """docs/architecture.md's floor table is pyproject.toml's import-linter layers, row for row."""
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert len(documented_floors(page)) >= 10  # the table is read
    assert not floor_differences(pyproject, page)


def test_the_floor_check_sees_a_page_that_drifts():
    """Two rooms on one row where the contract has two layers, a floor number skipped: both are reported."""
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    top = documented_floors(page)[0][0]  # the entry floor's number (it grows as floors are added)
    merged = page.replace(f"| {top} entry | `__main__` |", f"| {top} entry | `__main__`, `cli` |")
    assert any(f"floor {top}" in line for line in floor_differences(pyproject, merged))
    skipped = page.replace("| 2 | `processes`", "| 2½ | `processes`").replace("| 1 | `errors`", "| 2 | `errors`")
    assert any("numbers its floors" in line for line in floor_differences(pyproject, skipped))
