"""CLI regulariser specs → loss objects, with one clear ValueError per mistake."""

from __future__ import annotations

import pytest

from jtcse.losses import DispersionLoss, NITPLoss, RegularizedLoss, SimRegLoss
from jtcse.losses.registry import (
    REGULARIZER_HELP,
    RegularizerSpec,
    build_regularised_loss,
    parse_regularizer_spec,
    regularizer_help,
    regularizer_options,
)


def test_parse_specs():
    assert parse_regularizer_spec("simreg") == RegularizerSpec("simreg", {})
    assert parse_regularizer_spec(" SimReg : weight=2.0 , temperature=0.01, chunk-size=64") == RegularizerSpec(
        "simreg", {"weight": 2.0, "temperature": 0.01, "chunk_size": 64}
    )
    assert parse_regularizer_spec("dispersion:weight=0.1,variant=l2_repel,layers=-1/-2;-3") == RegularizerSpec(
        "dispersion", {"weight": 0.1, "variant": "l2_repel", "layers": [-1, -2, -3]}
    )
    assert parse_regularizer_spec("nitp:weight=1,shallow_layer=2") == RegularizerSpec(
        "nitp", {"weight": 1.0, "shallow_layer": 2}
    )


@pytest.mark.parametrize(
    "spec, message",
    [
        ("", "empty regulariser spec"),
        ("simcse:weight=1", "unknown regulariser 'simcse'.*simreg, dispersion, nitp"),
        ("simreg:tau=0.1", "has no option 'tau'; options: weight, temperature"),
        ("simreg:weight", "'weight' is not key=value"),
        ("simreg:weight=", "is not key=value"),
        ("simreg:weight=heavy", "weight='heavy' is not a number"),
        ("simreg:chunk_size=1.5", "is not an integer"),
        ("dispersion:layers=last", "integers separated by '/'"),
        ("nitp:weight=1,weight=2", "given twice"),
    ],
)
def test_parse_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_regularizer_spec(spec)


def _model_and_base(path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    model = SentenceTransformer(path)
    return model, MultipleNegativesRankingLoss(model)


def test_build_wraps_the_base_loss(tiny_bert):
    model, base = _model_and_base(tiny_bert)
    assert build_regularised_loss(model, base, []) is base
    loss = build_regularised_loss(
        model,
        base,
        ["simreg:weight=2.0,temperature=0.05", "dispersion:weight=0.1,variant=angular,layers=-1/2", "nitp:weight=1"],
    )
    assert isinstance(loss, RegularizedLoss) and loss.base_loss is base
    simreg, dispersion, nitp = loss.regularizers
    assert isinstance(simreg, SimRegLoss) and simreg.weight == 2.0 and simreg.temperature == 0.05
    assert isinstance(dispersion, DispersionLoss) and dispersion.layers == (-1, 2) and dispersion.needs_hidden_states
    assert isinstance(nitp, NITPLoss) and nitp.weight == 1.0
    config = loss.get_config_dict()
    assert config["base_loss"] == "MultipleNegativesRankingLoss"
    assert [r["name"] for r in config["regularizers"]] == ["SimRegLoss", "DispersionLoss", "NITPLoss"]
    assert "SimReg" in loss.citation and "Dispersion Loss" in loss.citation


@pytest.mark.parametrize(
    "specs, message",
    [
        (["dispersion:layers=-1/9"], "layer 9 does not exist; this model has hidden states 0..4"),
        (["simreg:temperature=0"], "temperature must be > 0"),
        (["dispersion:variant=radial"], "variant must be one of angular"),
        (["nitp:shallow_layer=7"], "shallow_layer must be an integer in 0..3"),
        (["simreg", "simreg:weight=3"], "given more than once"),
        (["simreg:weight=-2"], "weight must be ≥ 0"),
    ],
)
def test_build_errors(tiny_bert, specs, message):
    model, base = _model_and_base(tiny_bert)
    with pytest.raises(ValueError, match=message):
        build_regularised_loss(model, base, specs)


def test_help_text_names_every_option():
    for word in ("simreg", "dispersion", "nitp", "temperature", "variant", "layers", "shallow_layer", "Example"):
        assert word in REGULARIZER_HELP
    assert REGULARIZER_HELP == regularizer_help()


@pytest.mark.parametrize("name, cls", [("simreg", SimRegLoss), ("dispersion", DispersionLoss), ("nitp", NITPLoss)])
def test_options_and_help_defaults_come_from_the_class_signature(name, cls, tiny_bert):
    """The registry holds no defaults of its own: each option's default is the constructor's."""
    import inspect

    signature = inspect.signature(cls.__init__).parameters
    options = regularizer_options(name)
    assert set(options) <= set(signature) - {"self", "model", "base_loss"}
    for key, option in options.items():
        assert option.default == signature[key].default
        shown = f"{key}={option.default}" if option.default is not None else key
        assert shown in REGULARIZER_HELP
    # the built loss takes exactly these defaults when the spec gives no options
    model, base = _model_and_base(tiny_bert)
    built = build_regularised_loss(model, base, [name]).regularizers[0]
    assert built.weight == signature["weight"].default


@pytest.mark.parametrize("name, cls", [("simreg", SimRegLoss), ("dispersion", DispersionLoss), ("nitp", NITPLoss)])
def test_options_and_their_meanings_come_from_the_class(name, cls):
    """The registry writes no help of its own: the options are the class's ``cli_options`` and each meaning is
    the first sentence of the option's ``Args:`` entry in the ``__init__`` docstring, without reST markup."""
    import inspect

    options = regularizer_options(name)
    assert tuple(options) == cls.cli_options
    doc = inspect.getdoc(cls.__init__)
    for key, option in options.items():
        assert f"\n    {key}: " in doc and option.meaning and "`" not in option.meaning
        assert (
            f"{key}={option.default} ({option.meaning}" in REGULARIZER_HELP
            or f"{key} ({option.meaning}" in REGULARIZER_HELP
        )
    assert (
        regularizer_options("dispersion")["variant"].meaning
        == "angular (canonical), decorrelation, l2_repel or orthogonal"
    )


def test_documented_args_reads_the_first_sentence_of_each_entry():
    from jtcse.losses.registry import _documented_args

    doc = (
        "Summary.\n\nArgs:\n    weight: λ. The paper finds 2–20 stable\n        (see the table).\n"
        "    chunk_size: tokens per chunk of\n        :func:`~jtcse.losses.functional.simreg_chunked`; unset: off.\n"
        '    variant: ``"angular"`` or ``"l2_repel"``.\n\nExample::\n\n    loss = X(weight: 1)\n'
    )
    assert _documented_args(doc) == {
        "weight": "λ",
        "chunk_size": "tokens per chunk of simreg_chunked; unset: off",
        "variant": "angular or l2_repel",
    }


def test_extra_terms_join_the_regularisers_in_one_loss(tiny_bert):
    model, base = _model_and_base(tiny_bert)
    loss = build_regularised_loss(
        model, base, ["simreg"], extra_terms={"norm": lambda out: out["token_embeddings"].sum()}
    )
    assert sorted(loss.terms) == ["norm", "simreg"]
    with pytest.raises(ValueError, match="has the name of a regulariser"):
        build_regularised_loss(model, base, ["simreg"], extra_terms={"simreg": lambda out: 0})


def test_help_and_spec_parsing_do_not_import_torch():
    """The CLI builds its --regularizer help at start-up: reading the defaults must stay light."""
    from helpers.cli import run_python

    result = run_python(
        "import sys\n"
        "from jtcse.losses.registry import REGULARIZER_HELP, parse_regularizer_spec\n"
        "parse_regularizer_spec('dispersion:weight=0.1,layers=-1/-2')\n"
        "assert 'weight=2.0' in REGULARIZER_HELP\n"
        "print('torch' in sys.modules)\n"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "False"
