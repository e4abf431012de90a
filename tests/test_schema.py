"""Declared settings (jtcse/schema.py, on pydantic): one declaration gives the type and check, the keys, the layered
build with errors that name their origin, the validated change by key and the TOML written back
(jtcse/toml_file.py), which reads back to the same settings."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import model_validator

from jtcse.errors import JTCSEError, SettingError
from jtcse.schema import (
    Array,
    Layer,
    Positive,
    Settings,
    build,
    check,
    checked,
    group,
    keys,
    replace_keys,
    section,
    setting,
    to_mapping,
)
from jtcse.toml_file import settings_toml as to_toml
from jtcse.toml_file import tomllib


class Inner(Settings):
    steps: int = setting(3, "Steps.", ge=1)
    rate: Positive = setting(0.5, "A rate.")


class Table(Settings):
    inner: Inner = group(Inner())
    mode: Literal["a", "b"] = setting("a", "A mode.")
    names: Array[str] = setting((), "Names.", key="with", repeat=True)
    on: bool | None = setting(None, "On or off.", switch=True, unset="decided later")
    seed: int = setting(1, "Set for every table.")

    @model_validator(mode="after")
    def _off_with_names(self) -> Table:
        if self.on is False and self.names:
            raise JTCSEError("off with names contradicts itself.")
        return self


class Top(Settings):
    path: str | None = setting(None, "A file.", unset="none")
    weights: Array[Positive] | None = setting(None, "Weights.", unset="all 1", min_length=1)
    seed: int = setting(7, "The seed of every table.")
    table: Table = section(Table(), "A table.", exclude=("seed",))


def test_keys_are_flattened_over_groups_renamed_and_switch_first():
    assert list(keys(Table)) == ["on", "steps", "rate", "mode", "with", "seed"]
    assert keys(Table)["rate"].path == ("inner", "rate") and keys(Table)["with"].path == ("names",)
    assert list(keys(Table, ("seed",))) == ["on", "steps", "rate", "mode", "with"]
    assert list(keys(Top)) == ["path", "weights", "seed"]  # a section is not a key


def test_every_value_is_checked_by_its_declaration_and_stored_as_declared():
    cases = [  # pydantic's own message about each error type, on one line after the key it is about
        (lambda: Inner(steps=0), r"^steps: Input should be greater than or equal to 1$"),  # greater_than_equal
        (lambda: Inner(rate="fast"), r"^rate: Input should be a valid number$"),  # float_type (strict: no parsing)
        (lambda: Inner(rate=float("inf")), r"^rate: Input should be a finite number$"),  # finite_number
        (lambda: Inner(rate=0), r"^rate: Input should be greater than 0$"),  # greater_than 0
        (lambda: Inner(steps=True), r"^steps: Input should be a valid integer$"),  # int_type: a bool is no int
        (lambda: Inner(steps="3"), r"^steps: Input should be a valid integer$"),
        (lambda: Inner(steps=None), r"^steps: Input should be a valid integer$"),
        (lambda: Table(mode="c"), r"^mode: Input should be 'a' or 'b'$"),  # literal_error
        (lambda: Table(on=1), r"^on: Input should be a valid boolean$"),  # bool_type
        (lambda: Top(weights=[1, -1]), r"^weights\[1\]: Input should be greater than 0$"),  # an item, by its index
        (lambda: Top(weights=[]), r"^weights: Tuple should have at least 1 item after validation, not 0$"),  # too_short
        (lambda: Top(weights="1,2"), r"^weights: Input should be a valid tuple$"),  # tuple_type
        (lambda: Top(table={"inner": {"steps": 0}}), r"^steps: Input should be greater than or equal to 1$"),  # its key
        (lambda: Top(tabel={}), r"^tabel: Extra inputs are not permitted$"),  # extra_forbidden
        (lambda: Table(on=False, names=["m"]), r"^off with names contradicts itself\.$"),  # a validator's own error
    ]
    for make, message in cases:
        with pytest.raises(JTCSEError, match=message):
            make()
    with pytest.raises(SettingError) as raised:  # a value's error names its key, for each caller to rename
        Inner(steps=0)
    assert raised.value.keys == ("steps",) and str(raised.value.renamed({"steps": "--steps"}.get)).startswith(
        "--steps:"
    )
    assert Inner(rate=2).rate == 2.0 and isinstance(Inner(rate=2).rate, float)
    assert Top(weights=[1, 2]).weights == (1.0, 2.0)
    assert Table(**{"with": ["m"]}).names == Table(names=("m",)).names == ("m",)  # by key or by attribute


def test_settings_are_frozen_hashable_and_equal_by_value():
    assert Top(path="x") == Top(path="x") != Top(path="y")
    assert len({Top(path="x", weights=[1]), Top(path="x", weights=(1.0,))}) == 1
    with pytest.raises(Exception, match="frozen"):
        Top().path = "x"


def test_a_type_checks_a_single_value_in_the_same_words():
    assert check("a", Literal["a", "b"] | None, "mode") == "a" and check(None, Literal["a"] | None, "mode") is None
    with pytest.raises(JTCSEError, match=r"^mode: Input should be 'a' or 'b'$"):
        check("c", Literal["a", "b"], "mode")
    odd = Annotated[int, checked(lambda v: None if v % 2 else "must be odd")]
    with pytest.raises(JTCSEError, match=r"^n: must be odd$"):  # a validator's words are pydantic's message
        check(2, odd, "n")


def test_the_json_schema_is_pydantics_with_the_help_as_descriptions():
    schema = Top.model_json_schema()
    assert schema["properties"]["path"]["description"] == "A file." and schema["properties"]["path"]["unset"] == "none"
    assert schema["$defs"]["Table"]["properties"]["with"]["description"] == "Names."


def test_layers_build_on_the_defaults_in_order_and_errors_name_their_origin():
    recipe = Layer({"path": "x.txt", "table": {"steps": 5, "mode": "b"}}, where="recipe r.toml")
    typed = Layer({"table": {"steps": 9}}, where="", label=lambda table, key: f"--{table}-{key}")
    built = build(Top, [recipe, typed])
    assert (built.path, built.table.inner.steps, built.table.mode, built.seed) == ("x.txt", 9, "b", 7)
    cases = [
        ([Layer({"table": {"steps": 0}}, where="recipe r.toml")],
         r"^recipe r\.toml \[table\]: steps: Input should be greater than or equal to 1$"),
        ([Layer({"table": {"steps": 0}}, where="", label=typed.label)],
         r"^--table-steps: Input should be greater than or equal to 1$"),
        ([Layer({"table": {"stpes": 1}}, where="recipe r.toml")],
         r"^recipe r\.toml \[table\]: unknown key 'stpes' \(did you mean 'steps'\?\); valid here: on, steps, rate, mode, with\.$"),
        ([Layer({"table": {"seed": 1}}, where="recipe r.toml")],
         r"\[table\]: 'seed' is a top-level key \(put it before the first table\)"),
        ([Layer({"steps": 1}, where="recipe r.toml")], r"^recipe r\.toml: 'steps' belongs to \[table\]; valid top-level keys"),
        ([Layer({"other": {"a": 1}}, where="recipe r.toml")], r"^recipe r\.toml: \[other\] is not a table; tables: \[table\]\.$"),
        ([Layer({"tabel": {"a": 1}}, where="recipe r.toml")],
         r"^recipe r\.toml: \[tabel\] is not a table \(did you mean \[table\]\?\); tables: \[table\]\.$"),
        ([Layer({"weights": [1, "x"]}, where="recipe r.toml")], r"^recipe r\.toml: weights\[1\]: Input should be a valid number$"),
        ([Layer({"table": 3}, where="recipe r.toml")], r"^recipe r\.toml: table must be a table \(\[table\]\), not 3\.$"),
        ([Layer({"path": {"a": 1}}, where="recipe r.toml")], r"\[path\] is not a table; 'path' is a top-level key"),
        ([Layer({"table": {"on": False, "with": ["m"]}}, where="recipe r.toml")],
         r"^recipe r\.toml \[table\]: off with names contradicts itself\.$"),
        ([Layer({"table": {"on": False, "with": ["m"]}}, where="", label=typed.label)], r"^off with names contradicts"),
    ]  # fmt: skip
    for layers, message in cases:
        with pytest.raises(JTCSEError, match=message):
            build(Top, layers)


def test_a_change_by_key_reaches_into_groups_is_checked_and_an_unknown_key_is_named():
    changed = replace_keys(Table(), {"steps": 4, "with": ["a"]})
    assert (changed.inner.steps, changed.names) == (4, ("a",))
    assert Table().replace(steps=4, mode="b") == Table(inner=Inner(steps=4), mode="b")
    assert Table().replace(inner=Inner(rate=1)).inner == Inner(rate=1)  # a group whole, by its attribute
    with pytest.raises(JTCSEError, match=r"^steps: Input should be greater than or equal to 1$"):
        Table().replace(steps=0)  # checked, unlike pydantic's model_copy(update=...)
    with pytest.raises(JTCSEError, match=r"^off with names contradicts itself\.$"):
        Table(on=False).replace(**{"with": ["m"]})  # and across keys
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


class Twice(Settings):
    first: Table = section(Table(), "The first table.")
    second: Table = section(Table(), "What differs for the second.", base="first")


def test_a_table_with_a_base_holds_only_what_differs_from_it():
    built = build(Twice, [Layer({"first": {"steps": 5, "mode": "b"}, "second": {"mode": "a"}})])
    assert (built.second.inner.steps, built.second.mode) == (5, "a")  # the first's steps, its own mode
    assert build(Twice, [Layer({"first": {"steps": 6}})]).second.inner.steps == 6  # follows the first
    assert to_mapping(built)["second"] == {"mode": "a"}
    text = to_toml(built)
    assert text.split("[second]")[1].count(" = ") == 1 and build(Twice, [Layer(tomllib.loads(text))]) == built
    assert "(nothing differs from [first])" in to_toml(build(Twice, []))


def test_every_list_setting_reads_a_toml_array_and_nothing_changes_settings_unchecked():
    """A list is declared an Array (a TOML array, a list, reads as the strict model's tuple) in every settings class
    the commands use; and settings cannot be changed with pydantic's unchecked model_copy(update=): Settings.replace
    is the one way."""
    from jtcse.pipeline.settings import PipelineConfig
    from jtcse.rtt.settings import RttSettings
    from jtcse.schema import sections
    from jtcse.training.ensemble import JoinSettings
    from jtcse.training.settings import TRAINERS

    classes = [*TRAINERS, JoinSettings, RttSettings, PipelineConfig]
    classes += [table.cls for table in sections(PipelineConfig).values()]
    for cls in classes:
        for name, key in keys(cls).items():
            if key.sequence:
                value = list(key.info.default or ())  # its default as a list
                try:
                    assert key.check(value, name) == tuple(value), name
                except JTCSEError as err:  # an empty list, refused as empty, never for being a list
                    assert "should have at least 1 item" in str(err), name
    with pytest.raises(TypeError, match=r"change settings with \.replace\(\.\.\.\), which checks them"):
        Table().model_copy(update={"mode": "c"})
    assert Table().model_copy() == Table()
