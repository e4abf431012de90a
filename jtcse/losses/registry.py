"""Command-line regulariser specs → loss objects (``simreg:weight=2.0,temperature=0.01`` …).

``jtcse train`` / ``jtcse simcse`` take repeated ``--regularizer SPEC`` options and call
:func:`build_regularised_loss`. A spec is ``NAME`` or ``NAME:key=value,key=value``; list values
(``layers``) are separated by ``/`` or ``;`` (``layers=-1/-2/-3``). Every mistake raises
``ValueError`` with a one-line explanation.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jtcse.errors import SettingError

__all__ = [
    "REGULARIZERS",
    "REGULARIZER_HELP",  # noqa: F822 (built on first use by the module __getattr__ below)
    "RegularizerSpec",
    "build_regularised_loss",
    "check_mini_batch_size",
    "parse_regularizer_spec",
    "regularizer_help",
    "regularizer_options",
]

REGULARIZERS: dict[str, tuple[str, str]] = {
    "simreg": ("simreg", "SimRegLoss"),
    "dispersion": ("dispersion", "DispersionLoss"),
    "nitp": ("nitp", "NITPLoss"),
}
"""CLI name -> (module in ``jtcse.losses``, class)."""


@dataclass(frozen=True)
class Option:
    """One regulariser option as its class declares it: its kind and default (``__init__``) and meaning (docstring)."""

    kind: str  # float | int | ints | str
    default: Any
    meaning: str


_ROLE = re.compile(r":\w+:`~?(?:[\w.]*\.)?([^`]+)`")  # :func:`~jtcse.losses.functional.simreg` -> simreg
_LITERAL = re.compile(r'``"?([^`"]*)"?``')  # ``"angular"`` -> angular


def _documented_args(docstring: str) -> dict[str, str]:
    """``{parameter: first sentence}`` of the ``Args:`` block of a (cleaned) Google-style docstring, markup removed."""
    lines = docstring.splitlines()
    start = lines.index("Args:") + 1
    entries: dict[str, list[str]] = {}
    for line in lines[start:]:
        if line and not line.startswith(" "):
            break  # the next section
        match = re.match(r" {4}(\w+): (.*)", line)
        if match:
            entries[match[1]] = [match[2]]
        elif line.strip() and entries:
            entries[list(entries)[-1]].append(line.strip())
    meanings = {}
    for name, parts in entries.items():
        text = _LITERAL.sub(r"\1", _ROLE.sub(r"\1", " ".join(parts)))
        meanings[name] = re.split(r"\.(?:\s|$)", text, maxsplit=1)[0]
    return meanings


def _kind(annotation: str) -> str:
    if "Sequence" in annotation:
        return "ints"
    for kind in ("float", "int", "str"):
        if annotation.split("|")[0].strip() == kind:
            return kind
    raise TypeError(f"regulariser option annotation {annotation!r} has no command-line form")


@cache
def regularizer_options(name: str) -> dict[str, Option]:
    """``{option: Option}`` for regulariser ``name``, read from its class: the options are its
    ``cli_options``, their types and defaults come from its ``__init__`` signature and their meanings
    from the ``Args:`` block of the ``__init__`` docstring (the first sentence of each entry).

    The class is read from the module's source (``ast``), so the CLI gets all this without importing
    torch; it is written only in the loss class.
    """
    module, cls = REGULARIZERS[name]
    spec = importlib.util.find_spec(f"jtcse.losses.{module}")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    klass = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == cls)
    init = next(node for node in klass.body if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    keys = next(
        ast.literal_eval(node.value)
        for node in klass.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "cli_options" for t in node.targets)
    )
    params = init.args.args[len(init.args.args) - len(init.args.defaults) :]
    declared = {
        arg.arg: (ast.unparse(arg.annotation), ast.literal_eval(default))
        for arg, default in zip(params, init.args.defaults, strict=True)
    }
    meanings = _documented_args(ast.get_docstring(init) or "")
    return {key: Option(_kind(declared[key][0]), declared[key][1], meanings[key]) for key in keys}


def regularizer_help() -> str:
    """The ``--regularizer`` help text: every regulariser with its options and their defaults."""
    described = []
    for name in REGULARIZERS:
        options = ", ".join(
            (f"{key}={option.default}" if option.default is not None else key)
            + f" ({option.meaning}{'; several as -1/-2' if option.kind == 'ints' else ''})"
            for key, option in regularizer_options(name).items()
        )
        described.append(f"{name}: {options}.")
    return (
        "Token-level regulariser added to the training loss on the same forward pass; repeat for several. "
        f"SPEC is NAME[:key=value,...] with NAME one of {', '.join(REGULARIZERS)}. "
        + " ".join(described)
        + " Example: --regularizer simreg:weight=2,temperature=0.05 --regularizer dispersion:weight=0.1,layers=-1/-2"
    )


def __getattr__(name: str):
    if name == "REGULARIZER_HELP":
        return regularizer_help()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
        raise ValueError(f"regulariser {name!r}: {key}={raw!r} is not {expected}.") from None


def parse_regularizer_spec(spec: str) -> RegularizerSpec:
    """``"dispersion:weight=0.1,layers=-1/-2"`` → ``RegularizerSpec("dispersion", {"weight": 0.1, "layers": [-1, -2]})``."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("empty regulariser spec; expected NAME[:key=value,...], e.g. simreg:weight=2.0")
    name, _, rest = spec.strip().partition(":")
    name = name.strip().lower()
    if name not in REGULARIZERS:
        raise ValueError(f"unknown regulariser {name!r} in {spec!r}; choose one of {', '.join(REGULARIZERS)}")
    known = regularizer_options(name)
    options: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip().lower().replace("-", "_")
        if not sep or not value.strip():
            raise ValueError(f"regulariser {name!r}: {item!r} is not key=value.")
        if key not in known:
            raise ValueError(f"regulariser {name!r} has no option {key!r}; options: {', '.join(known)}.")
        if key in options:
            raise ValueError(f"regulariser {name!r}: option {key!r} given twice.")
        options[key] = _convert(name, key, known[key].kind, value)
    return RegularizerSpec(name, options)


def _build_one(model, spec: RegularizerSpec):
    module, name = REGULARIZERS[spec.name]
    cls = getattr(importlib.import_module(f"jtcse.losses.{module}"), name)
    try:
        return cls(model, **spec.options)
    except ValueError as exc:  # a bad value (temperature ≤ 0, unknown variant, layer out of range …)
        raise ValueError(f"regulariser {spec.name!r}: {exc}") from None


def build_regularised_loss(model, base_loss, specs: Sequence[str], extra_terms=None, base_name: str = "base"):
    """``base_loss`` plus the regularisers named in ``specs`` and the ``{name: fn(features)}`` in
    ``extra_terms``, as one :class:`~jtcse.losses.RegularizedLoss` (``base_loss`` itself if there are none).

    Options are checked when the losses are built (layer indices against the model), so a typo fails
    before training starts.
    """
    from jtcse.losses.regularized import RegularizedLoss, regularizer_name

    parsed = [parse_regularizer_spec(s) for s in specs]
    if not parsed and not extra_terms:
        return base_loss
    names = [p.name for p in parsed]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"regulariser {duplicates[0]!r} given more than once; give it once with all its options.")
    terms = {regularizer_name(reg): reg for reg in (_build_one(model, spec) for spec in parsed)}
    clash = sorted(set(terms) & set(extra_terms or {}))
    if clash:
        raise ValueError(f"extra loss term {clash[0]!r} has the name of a regulariser; rename it")
    return RegularizedLoss(model, base_loss, {**terms, **(extra_terms or {})}, base_name=base_name)


def check_mini_batch_size(mini_batch_size: int | None, specs: Sequence[str], extra_terms=None) -> None:
    """Refuse a GradCache ``mini_batch_size`` that is not a whole number from 0, or one combined with token-level
    terms (regularisers, extra losses): checked before anything is loaded. ``None`` or 0 means no GradCache.

    A cached loss embeds without a graph and back-propagates mini-batch by mini-batch, so no token
    states reach a regulariser (:class:`jtcse.losses.RegularizedLoss` refuses cached losses).
    """
    if mini_batch_size is None:
        return
    names = {"mini_batch_size": "--mini-batch-size", "regularizers": "--regularizer"}
    if isinstance(mini_batch_size, bool) or not isinstance(mini_batch_size, int) or mini_batch_size < 0:
        raise SettingError(
            "{mini_batch_size} must be a whole number from 0, not {value!r}.", names, value=mini_batch_size
        )
    if mini_batch_size == 0:  # GradCache off
        return
    extra = [parse_regularizer_spec(s).name for s in specs] + sorted(extra_terms or {})
    if extra:
        raise SettingError(
            "{mini_batch_size} (GradCache) cannot be combined with token-level terms ({terms}): the cached loss "
            "embeds without a graph, so no token states reach them. Turn it off ({mini_batch_size} 0) or drop the "
            "{regularizers} options.",
            names,
            terms=", ".join(extra),
        )
