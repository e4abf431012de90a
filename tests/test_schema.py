"""Declared settings (jtcse/schema.py): one declaration gives the check, the keys, the layered build with errors that
name their origin, the change by key and the TOML written back, which reads back to the same settings."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from jtcse.errors import JTCSEError
from jtcse.schema import (
    Layer,
    at_least,
    build,
    every,
    group,
    keys,
    one_of,
    positive,
    replace_keys,
    section,
    setting,
    to_mapping,
    to_toml,
    validate,
)
from jtcse.toml_file import tomllib


@dataclass(frozen=True)
class Inner:
    steps: int = setting(3, "Steps.", check=at_least(1))
    rate: float = setting(0.5, "A rate.", check=positive)

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True)
class Table:
    inner: Inner = group(Inner())
    mode: str = setting("a", "A mode.", check=one_of("a", "b"))
    names: tuple[str, ...] = setting((), "Names.", key="with", repeat=True)
    on: bool | None = setting(None, "On or off.", switch=True, unset="decided later")
    seed: int = setting(1, "Set for every table.")

    def __post_init__(self) -> None:
        validate(self)
        if self.on is False and self.names:
            raise JTCSEError("off with names contradicts itself.")


@dataclass(frozen=True)
class Top:
    path: str | None = setting(None, "A file.", unset="none")
    weights: tuple[float, ...] | None = setting(None, "Weights.", check=every(positive), unset="all 1")
    seed: int = setting(7, "The seed of every table.")
    table: Table = section(Table(), "A table.", exclude=("seed",))

    def __post_init__(self) -> None:
        validate(self)


def test_keys_are_flattened_over_groups_renamed_and_switch_first():
    assert list(keys(Table)) == ["on", "steps", "rate", "mode", "with", "seed"]
    assert keys(Table)["rate"].path == ("inner", "rate") and keys(Table)["with"].path == ("names",)
    assert list(keys(Table, ("seed",))) == ["on", "steps", "rate", "mode", "with"]
    assert list(keys(Top)) == ["path", "weights", "seed"]  # a section is not a key


def test_every_value_is_checked_by_its_declaration_and_stored_as_declared():
    with pytest.raises(JTCSEError, match=r"^steps must be at least 1, not 0\.$"):
        Inner(steps=0)
    with pytest.raises(JTCSEError, match=r"^rate must be a number, not 'fast'\.$"):
        Inner(rate="fast")
    with pytest.raises(JTCSEError, match=r"^steps must be a whole number, not True\.$"):
        Inner(steps=True)
    with pytest.raises(JTCSEError, match=r"^mode must be one of a, b, not 'c'\.$"):
        Table(mode="c")
    with pytest.raises(JTCSEError, match=r"^weights has -1, which must be a positive number\.$"):
        Top(weights=[1, -1])
    assert Inner(rate=2).rate == 2.0 and isinstance(Inner(rate=2).rate, float)
    assert Top(weights=[1, 2]).weights == (1.0, 2.0)


def test_layers_build_on_the_defaults_in_order_and_errors_name_their_origin():
    recipe = Layer({"path": "x.txt", "table": {"steps": 5, "mode": "b"}}, where="recipe r.toml")
    typed = Layer({"table": {"steps": 9}}, where="", label=lambda table, key: f"--{table}-{key}")
    built = build(Top, [recipe, typed])
    assert (built.path, built.table.inner.steps, built.table.mode, built.seed) == ("x.txt", 9, "b", 7)
    cases = [
        ([Layer({"table": {"steps": 0}}, where="recipe r.toml")], r"^recipe r\.toml \[table\]: steps must be at least 1"),
        ([Layer({"table": {"steps": 0}}, where="", label=typed.label)], r"^--table-steps must be at least 1, not 0\.$"),
        ([Layer({"table": {"stpes": 1}}, where="recipe r.toml")],
         r"^recipe r\.toml \[table\]: unknown key 'stpes' \(did you mean 'steps'\?\); valid here: on, steps, rate, mode, with\.$"),
        ([Layer({"table": {"seed": 1}}, where="recipe r.toml")],
         r"\[table\]: 'seed' is a top-level key \(put it before the first table\)"),
        ([Layer({"steps": 1}, where="recipe r.toml")], r"^recipe r\.toml: 'steps' belongs to \[table\]; valid top-level keys"),
        ([Layer({"other": {"a": 1}}, where="recipe r.toml")], r"^recipe r\.toml: \[other\] is not a table; tables: \[table\]\.$"),
        ([Layer({"table": 3}, where="recipe r.toml")], r"^recipe r\.toml: table must be a table \(\[table\]\), not 3\.$"),
        ([Layer({"path": {"a": 1}}, where="recipe r.toml")], r"\[path\] is not a table; 'path' is a top-level key"),
        ([Layer({"table": {"on": False, "with": ["m"]}}, where="recipe r.toml")],
         r"^recipe r\.toml \[table\]: off with names contradicts itself\.$"),
        ([Layer({"table": {"on": False, "with": ["m"]}}, where="", label=typed.label)], r"^off with names contradicts"),
    ]  # fmt: skip
    for layers, message in cases:
        with pytest.raises(JTCSEError, match=message):
            build(Top, layers)


def test_a_change_by_key_reaches_into_groups_and_an_unknown_key_is_named():
    changed = replace_keys(Table(), {"steps": 4, "with": ["a"]})
    assert (changed.inner.steps, changed.names) == (4, ("a",))
    with pytest.raises(TypeError, match=r"^train\(\) got an unexpected keyword argument 'step'$"):
        replace_keys(Table(), {"step": 4}, "train")
    with pytest.raises(JTCSEError, match=r"unknown setting 'step' \(did you mean 'steps'\?\)"):
        replace_keys(Table(), {"step": 4})


def test_the_toml_written_reads_back_to_the_same_settings():
    settings = build(Top, [Layer({"path": 'a "quoted" path', "table": {"rate": 1e-6, "with": ["m", "n"], "on": True}})])
    text = to_toml(settings, "a header")
    assert text.startswith("# a header\n")
    assert "# A file.\npath = " in text and "# weights =    (unset: all 1)" in text  # unset: commented out, explained
    assert "\n[table]\n# A table.\n" in text and "seed" not in text.split("[table]")[1]  # excluded keys are not there
    assert build(Top, [Layer(tomllib.loads(text))]) == settings
    assert to_mapping(settings)["table"]["with"] == ("m", "n")


def test_the_pipelines_dump_reads_back_to_the_same_config_for_every_recipe():
    from helpers.cli import REPO

    from jtcse.pipeline.recipe import dump_recipe, load_recipe
    from jtcse.pipeline.settings import PipelineConfig

    for path in sorted((REPO / "models").glob("*/recipe.toml")):
        config = load_recipe(path)
        assert PipelineConfig.from_values(tomllib.loads(dump_recipe(config))) == config, path


@dataclass(frozen=True)
class Twice:
    first: Table = section(Table(), "The first table.")
    second: Table = section(Table(), "What differs for the second.", base="first")

    def __post_init__(self) -> None:
        validate(self)


def test_a_table_with_a_base_holds_only_what_differs_from_it():
    built = build(Twice, [Layer({"first": {"steps": 5, "mode": "b"}, "second": {"mode": "a"}})])
    assert (built.second.inner.steps, built.second.mode) == (5, "a")  # the first's steps, its own mode
    assert build(Twice, [Layer({"first": {"steps": 6}})]).second.inner.steps == 6  # follows the first
    assert to_mapping(built)["second"] == {"mode": "a"}
    text = to_toml(built)
    assert text.split("[second]")[1].count(" = ") == 1 and build(Twice, [Layer(tomllib.loads(text))]) == built
    assert "(nothing differs from [first])" in to_toml(build(Twice, []))
