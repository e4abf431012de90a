"""One list of stages: a pipeline stage is named by a string only in ``jtcse/pipeline/stages.py``; everywhere else
(``jtcse/`` and ``evaluation/``) code reaches a stage through its object (``TWIN.metadata.folder``,
``stage.metadata.name``, ``STAGES``), so what a stage does is never a special case keyed by its name.

What counts as comparing a stage name. The names are every stage's ``name``, ``folder`` and ``--until`` value
(``warmup_a``, ``tower_a``, ``warmup``, ..., taken from ``STAGES`` itself). Such a string literal is a stage
comparison when it is

1. an operand of ``==``, ``!=``, ``in``, ``not in``, ``is``, ``is not`` (also as an item of a tuple, list, set or
   dict written as the operand), or a ``case`` pattern;
2. a key of a dict written out in a module that then looks it up with a computed key (``why.get(until)``,
   ``included[stage.metadata.name]``): a table of per-stage special cases, flagged where it is looked up;
3. a part of a path (``out / "distilled"``, ``.joinpath("tower_a")``): the stage's folder is ``STAGE.metadata.folder``;
4. anything at all, docstrings aside, in the pipeline's other modules (``jtcse/pipeline/*.py``,
   ``jtcse/commands/pipeline.py``), where any stage name is a stage's.

Not a stage comparison: a literal that selects data rather than deciding behaviour. A recipe's tables are the
config's sections, several of which share a stage's name (``{"twin": {"max_steps": 2}}``, ``values["twin"]``:
``tests/test_pipeline.py`` checks the stages' tables against them); a summary read by its keys
(``result["stages"]["distill"]``) selects one stage's row. And other vocabularies that share a word, each named
below (:data:`OTHER_VOCABULARIES`) by the file and the expression compared or looked up: the model card's kinds (what
a checkpoint is: twin, warmup, distilled, ensemble), the trainers' own run names in ``run_summary.json`` (simcse,
twin, distill) and the studies' own row groups and member kinds. A new comparison on one of those words fails here
until it goes through a stage object or is named below with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STAGES_FILE = "jtcse/pipeline/stages.py"
PIPELINE_MODULES = ("jtcse/pipeline/", "jtcse/commands/pipeline.py")
SCANNED = ("jtcse", "evaluation")

OTHER_VOCABULARIES = {
    ("jtcse/model_card.py", "kind"): "the model card's kind: what a checkpoint is",
    ("jtcse/model_card.py", "facts.kind"): "the model card's kind",
    ("jtcse/model_card.py", "self.facts.kind"): "the model card's kind",
    ("jtcse/backend_export.py", "kind"): "what a checkpoint is (a twin exports its towers)",
    ("jtcse/training/run_summary.py", "kind"): "the model card's kind",
    ("jtcse/training/run_summary.py", "trainer"): "a trainer's run name (run_summary.json's stage: simcse, twin, ...)",
    ("jtcse/training/run_dir.py", "config.get('stage')"): "a trainer's run name: the command that writes its folder",
    ("evaluation/studies/members.py", "how"): "the members study's ensembles of a twin (twin:KIND, towers:KIND, ...)",
    ("evaluation/studies/default.py", "row['group']"): "the default study's row groups",
    ("evaluation/studies/members.py", "r.get('group')"): "the members study's row groups",
}
"""``(file, expression) -> what it is``: words of another vocabulary that a stage's name shares."""


def stage_names() -> set[str]:
    from jtcse.pipeline.stages import STAGES

    return {word for m in (stage.metadata for stage in STAGES) for word in (m.name, m.folder, m.until)}


def _literals(node: ast.AST, names: set[str]) -> list[str]:
    """The stage names ``node`` is, or holds as the items of a tuple, list, set or dict written out."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) and node.value in names else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [value for item in node.elts for value in _literals(item, names)]
    if isinstance(node, ast.Dict):
        return [value for key in node.keys if key is not None for value in _literals(key, names)]
    return []


def _docstrings(tree: ast.AST) -> set[int]:
    """``id`` of every docstring constant (module, class, function, and the string after an assignment)."""
    ids = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for item in body:
                if isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant):
                    ids.add(id(item.value))
    return ids


def _tables(tree: ast.AST, names: set[str]) -> set[str]:
    """The names (``why``, ``self._kinds``) bound to a dict written out with a stage name as a key."""
    tables = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            if _literals(node.value, names):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                tables |= {ast.unparse(target) for target in targets}
    return tables


def _lookup(node: ast.AST) -> tuple[str, ast.AST] | None:
    """``(table, key)`` of ``table[key]`` or ``table.get(key, ...)``."""
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value), node.slice
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop"):
        if node.args:
            return ast.unparse(node.func.value), node.args[0]
    return None


def stage_comparisons(path: Path, names: set[str], root: Path = REPO) -> list[str]:
    """Where ``path`` (under ``root``) compares a stage name, as ``file:line: what``."""
    where = path.relative_to(root).as_posix()
    if where == STAGES_FILE:
        return []
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def other(expression: ast.AST) -> bool:
        return (where, ast.unparse(expression)) in OTHER_VOCABULARIES

    found = []
    tables = _tables(tree, names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, operand in enumerate(operands):
                words = _literals(operand, names)
                if words and not any(other(o) for j, o in enumerate(operands) if j != i):
                    found.append(f"{where}:{node.lineno}: {ast.unparse(node)} compares {words}")
        elif isinstance(node, ast.match_case):
            words = [
                v for p in ast.walk(node.pattern) if isinstance(p, ast.MatchValue) for v in _literals(p.value, names)
            ]
            if words:
                found.append(f"{where}:{node.pattern.lineno}: case {ast.unparse(node.pattern)}")
        elif (lookup := _lookup(node)) and lookup[0] in tables and not isinstance(lookup[1], ast.Constant):
            if not other(lookup[1]):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)} looks a stage up in a table of them")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _literals(node.right, names):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)} is a stage's folder")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "joinpath":
            if any(_literals(arg, names) for arg in node.args):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)} is a stage's folder")
    if where.startswith(PIPELINE_MODULES):
        docstrings = _docstrings(tree)
        found += [
            f"{where}:{node.lineno}: {node.value!r} names a stage"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and id(node) not in docstrings and _literals(node, names)
        ]
    return found


def _scanned() -> list[Path]:
    return sorted(path for root in SCANNED for path in (REPO / root).rglob("*.py"))


@pytest.mark.slow
def test_no_module_but_the_stages_compares_a_stage_name():
    names = stage_names()
    assert {"warmup_a", "tower_a", "warmup", "distilled", "eval"} <= names
    found = [line for path in _scanned() for line in stage_comparisons(path, names)]
    assert not found, "stage names compared outside jtcse/pipeline/stages.py:\n" + "\n".join(found)


def test_the_check_finds_each_kind_of_stage_comparison(tmp_path):
    """The scan is not vacuous: each rule of the module docstring catches its case, and leaves data alone."""
    names = stage_names()
    code = {
        "jtcse/training/compares.py": "if stage.name == 'probe':\n    pass\nok = name in ('twin', 'eval')\n",
        "jtcse/training/matches.py": "match until:\n    case 'distill':\n        pass\n",
        "jtcse/training/table.py": "why = {'twin': 'off'}\nreason = why.get(until, '')\nrow = why['twin']\n",
        "evaluation/studies/paths.py": "folder = out / 'distilled'\nother = out.joinpath('tower_a')\n",
        "jtcse/pipeline/plan.py": "TABLE = 'warmup_b'\n",
        "jtcse/training/data.py": "values = {'twin': {'steps': 2}}\nsteps = values['twin']\nx = stages['distill']\n",
        "jtcse/model_card.py": "if kind == 'twin':\n    pass\n",
    }
    found = {}
    for name, text in code.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        found[name] = stage_comparisons(path, names, root=tmp_path)
    assert [len(found[name]) for name in code] == [2, 1, 1, 2, 1, 0, 0], found
