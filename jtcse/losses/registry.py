"""Command-line regulariser specs → loss objects (``simreg:weight=2.0,temperature=0.01`` …).

``jtcse train`` / ``jtcse simcse`` take repeated ``--regularizer SPEC`` options and call
:func:`build_regularised_loss`. A spec is ``NAME`` or ``NAME:key=value,key=value``; list values
(``layers``) are separated by ``/`` or ``;`` (``layers=-1/-2/-3``). Every mistake raises
:class:`jtcse.errors.JTCSEError` with a one-line explanation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jtcse.errors import JTCSEError

__all__ = ["REGULARIZER_HELP", "RegularizerSpec", "build_regularised_loss", "parse_regularizer_spec"]

# name -> {key: (type, help)}; "weight" is common to all.
_KEYS: dict[str, dict[str, tuple[str, str]]] = {
    "simreg": {
        "weight": ("float", "λ (default 2.0)"),
        "temperature": ("float", "τ (default 0.01)"),
        "chunk_size": ("int", "tokens per chunk for chunk-wise SimReg (default: off)"),
        "layers": ("ints", "hidden-state indices, -1 = last (default -1)"),
    },
    "dispersion": {
        "weight": ("float", "λ (default 0.1)"),
        "temperature": ("float", "τ (default 1.0)"),
        "variant": ("str", "angular | decorrelation | l2_repel | orthogonal (default angular)"),
        "layers": ("ints", "hidden-state indices, -1 = last (default -1)"),
        "norm_weight": ("float", "λ_norm of l2_repel (default 0.01)"),
    },
    "nitp": {
        "weight": ("float", "λ (default 1.0)"),
        "shallow_layer": ("int", "target layer (default ≈ 20% of depth, ≥ 1)"),
        "hidden_features": ("int", "inner width of the projection head (default hidden size)"),
    },
}

REGULARIZER_HELP = (
    "Token-level regulariser added to the training loss on the same forward pass; repeat for several. "
    "SPEC is NAME[:key=value,...] with NAME one of simreg, dispersion, nitp. "
    "simreg: weight=2.0, temperature=0.01, chunk_size, layers=-1. "
    "dispersion: weight=0.1, temperature=1.0, variant=angular|decorrelation|l2_repel|orthogonal, "
    "layers=-1 (several as -1/-2), norm_weight=0.01. "
    "nitp: weight=1.0, shallow_layer (default 20% of depth), hidden_features. "
    "Example: --regularizer simreg:weight=2,temperature=0.05 --regularizer dispersion:weight=0.1,layers=-1/-2"
)


@dataclass(frozen=True)
class RegularizerSpec:
    """A parsed spec: the regulariser's name and its keyword arguments (already typed)."""

    name: str
    options: dict[str, Any]


def _convert(name: str, key: str, kind: str, raw: str) -> Any:
    text = raw.strip()
    try:
        if kind == "float":
            return float(text)
        if kind == "int":
            return int(text)
        if kind == "ints":
            parts = [p for p in text.replace(";", "/").split("/") if p.strip()]
            if not parts:
                raise ValueError
            return [int(p) for p in parts]
        return text
    except ValueError:
        expected = {"float": "a number", "int": "an integer", "ints": "integers separated by '/'"}[kind]
        raise JTCSEError(f"regulariser {name!r}: {key}={raw!r} is not {expected}") from None


def parse_regularizer_spec(spec: str) -> RegularizerSpec:
    """``"dispersion:weight=0.1,layers=-1/-2"`` → ``RegularizerSpec("dispersion", {"weight": 0.1, "layers": [-1, -2]})``."""
    if not isinstance(spec, str) or not spec.strip():
        raise JTCSEError("empty regulariser spec; expected NAME[:key=value,...], e.g. simreg:weight=2.0")
    name, _, rest = spec.strip().partition(":")
    name = name.strip().lower()
    if name not in _KEYS:
        raise JTCSEError(f"unknown regulariser {name!r} in {spec!r}; choose one of {', '.join(_KEYS)}")
    known = _KEYS[name]
    options: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip().lower().replace("-", "_")
        if not sep or not value.strip():
            raise JTCSEError(f"regulariser {name!r}: {item!r} is not key=value")
        if key not in known:
            raise JTCSEError(f"regulariser {name!r} has no option {key!r}; options: {', '.join(known)}")
        if key in options:
            raise JTCSEError(f"regulariser {name!r}: option {key!r} given twice")
        options[key] = _convert(name, key, known[key][0], value)
    return RegularizerSpec(name, options)


def _build_one(model, spec: RegularizerSpec):
    from jtcse.losses.dispersion import DispersionLoss
    from jtcse.losses.nitp import NITPLoss
    from jtcse.losses.simreg import SimRegLoss

    cls = {"simreg": SimRegLoss, "dispersion": DispersionLoss, "nitp": NITPLoss}[spec.name]
    try:
        return cls(model, **spec.options)
    except ValueError as exc:  # a bad value (temperature ≤ 0, unknown variant, layer out of range …)
        raise JTCSEError(f"regulariser {spec.name!r}: {exc}") from None


def build_regularised_loss(model, base_loss, specs: Sequence[str]):
    """Wrap ``base_loss`` with the regularisers named in ``specs`` (returns ``base_loss`` if there are none).

    Options are checked when the losses are built (layer indices against the model), so a typo fails
    before training starts.
    """
    from jtcse.losses.regularized import RegularizedLoss

    parsed = [parse_regularizer_spec(s) for s in specs]
    if not parsed:
        return base_loss
    names = [p.name for p in parsed]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise JTCSEError(f"regulariser {duplicates[0]!r} given more than once; give it once with all its options")
    regularizers = [_build_one(model, spec) for spec in parsed]
    try:
        return RegularizedLoss(model, base_loss, regularizers)
    except ValueError as exc:
        raise JTCSEError(str(exc)) from None

