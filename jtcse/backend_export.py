"""Export a single-tower checkpoint for fast CPU inference with sentence-transformers' backends.

The conversion is sentence-transformers' own: loading with ``backend="onnx"`` / ``"openvino"``
(through :func:`jtcse.modeling.loading.load_model`) exports the transformer through Optimum,
``save_pretrained`` writes it, and int8 uses ``export_dynamic_quantized_onnx_model`` (ONNX Runtime
dynamic quantization, no data needed) or ``export_static_quantized_openvino_model`` (OpenVINO
post-training static quantization, calibrated on sample sentences: ``calibration``, one sentence per
line, up to :data:`CALIBRATION_SAMPLES` of them; without it, GLUE SST-2 from the Hugging Face Hub,
so offline it is required). The quantized graph replaces the float one under its default name, so
``SentenceTransformer(DIR, backend=FORMAT)`` loads what was asked for; ``export.json`` records how
the folder was made.

Twins and ensembles are refused: their embedding combines several towers' embeddings, and the
backends export one transformer per model. Export each tower (a twin's come from
``TwinTowers.export_towers``) and combine their embeddings.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import random
import tempfile
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_write_json
from jtcse.output_paths import FolderOutput

FORMATS = ("onnx", "openvino")
QUANTIZATIONS = ("none", "int8")
EXPORT_FILE = "export.json"
CALIBRATION_SAMPLES = 300  # sentences OpenVINO's int8 calibration runs (its default sample count)
CALIBRATION_LENGTH = 384  # sentence-transformers' OpenVINO quantizer pads every calibration sentence to this
# format → (modules that must import, the extra that installs them)
_REQUIREMENTS = {
    "onnx": (("onnxruntime", "optimum.onnxruntime"), "onnx"),
    "openvino": (("openvino", "optimum.intel.openvino"), "openvino"),
}
# Where sentence-transformers' backends put the float graph, and what the int8 exporters add.
_GRAPH = {"onnx": "onnx/model.onnx", "openvino": "openvino/openvino_model.xml"}
_INT8_SUFFIX = {"onnx": "qint8_avx512_vnni", "openvino": "qint8_quantized"}


def check_options(format: str, quantize: str | None, calibration: str | Path | None = None) -> str:
    """Validate the format, quantization and calibration choice; returns the quantization ("none" for None)."""
    if format not in FORMATS:
        raise JTCSEError(f"Unknown export format {format!r}; valid ones: {', '.join(FORMATS)}.")
    quantize = quantize or "none"
    if quantize not in QUANTIZATIONS:
        raise JTCSEError(f"Unknown quantization {quantize!r}; valid ones: {', '.join(QUANTIZATIONS)}.")
    static = format == "openvino" and quantize == "int8"
    if calibration is not None and not static:
        raise JTCSEError(
            "--calibration applies to --format openvino --quantize int8 (static quantization); "
            f"{format} {quantize} needs no calibration sentences."
        )
    if static and calibration is None:
        from huggingface_hub import constants

        if constants.HF_HUB_OFFLINE:
            raise JTCSEError(
                "OpenVINO int8 calibrates on sample sentences, and its default set (GLUE SST-2) is on the Hugging "
                "Face Hub, which is off (HF_HUB_OFFLINE); give your own with --calibration FILE (one sentence per line)."
            )
    return quantize


def read_calibration(path: str | Path, samples: int = CALIBRATION_SAMPLES, seed: int = 0) -> list[str]:
    """Up to ``samples`` sentences of the text file ``path`` (one per line), a seeded random choice if more."""
    from jtcse.corpus import read_corpus

    sentences = read_corpus(path).sentences
    if len(sentences) > samples:
        sentences = random.Random(seed).sample(sentences, samples)
    return sentences


def _module_present(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def check_backend(format: str) -> None:
    """Raise one clear error naming the extra when the backend's packages are not importable."""
    modules, extra = _REQUIREMENTS[format]
    missing = [name for name in modules if not _module_present(name)]
    if missing:
        raise JTCSEError(
            f"Exporting to {format} needs {', '.join(missing)} (not installed): pip install jtcse[{extra}]"
        )


def _combined_kind(path: Path) -> str | None:
    """ "twin" or "ensemble" when ``modules.json`` names jtcse's TwinTowers or Ensemble module (by package
    path or as checkpoint code), else None. Read as JSON, so refusing costs no torch import."""
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        types = [str(entry.get("type", "")) for entry in modules]
    except (OSError, ValueError, AttributeError):
        return None
    if any(t.endswith("TwinTowers") for t in types):
        return "twin"
    if any(t.split(".")[-1] == "Ensemble" for t in types):
        return "ensemble"
    return None


def check_single_tower(model_path: str | Path) -> Path:
    """The folder must be a sentence-transformers checkpoint of one tower; twins and ensembles get what to do."""
    path = Path(model_path)
    if not path.is_dir():
        raise JTCSEError(f"Model folder not found: {path}")
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise JTCSEError(
            f"{path} is not a model folder (no modules.json or config.json); give a sentence-transformers checkpoint."
        )
    kind = _combined_kind(path)
    if kind == "twin":
        raise JTCSEError(
            f"{path} is a twin; export takes single towers. Write each tower with "
            f"load_model({str(path)!r})[0].export_towers(DIR), export DIR/tower_1 and DIR/tower_2, and sum their embeddings."
        )
    if kind == "ensemble":
        raise JTCSEError(
            f"{path} is an ensemble; export takes single towers. Export each single-tower member "
            f"({path / 'member_1'}, ...) and combine their embeddings as the ensemble does (docs/ensemble.md)."
        )
    return path


def _backend_failure(format: str, err: BaseException) -> JTCSEError:
    """One line for a backend that is installed but breaks inside the export (e.g. an Optimum release
    written for another transformers)."""
    import transformers

    cause = err.__cause__ if isinstance(err, JTCSEError) and err.__cause__ is not None else err
    first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    return JTCSEError(
        f"The installed {format} backend fails inside the export with transformers {transformers.__version__} "
        f"({type(cause).__name__}: {first}); install versions that fit together with pip install jtcse[{format}] "
        "(docs/export.md lists them)."
    )


def _write_calibration_dataset(sentences: list[str], folder: Path) -> dict:
    """A local dataset folder (``train.csv``, column ``sentence``) and the exporter's arguments naming it."""
    with (folder / "train.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sentence"])
        writer.writerows([sentence] for sentence in sentences)
    return {
        "dataset_name": str(folder),
        "dataset_config_name": "default",
        "dataset_split": "train",
        "column_name": "sentence",
    }


def _convert(source: Path, tmp: Path, format: str, quantize: str, calibration: list[str] | None) -> None:
    """Write ``source`` converted to ``format`` (and int8) into the new folder ``tmp``."""
    from jtcse.modeling.loading import load_model

    try:
        model = load_model(source, backend=format, device="cpu")  # the backend exports the transformer
    except (ImportError, JTCSEError) as err:
        if isinstance(err, ImportError) or isinstance(err.__cause__, ImportError):
            raise _backend_failure(format, err) from err
        raise
    model.save_pretrained(str(tmp))
    if quantize == "none":
        return
    graph = tmp / _GRAPH[format]
    suffix = _INT8_SUFFIX[format]
    if format == "onnx":
        from sentence_transformers.backend import export_dynamic_quantized_onnx_model

        try:
            export_dynamic_quantized_onnx_model(model, "avx512_vnni", str(tmp), file_suffix=suffix)
        except ImportError as err:
            raise _backend_failure(format, err) from err
        quantized = graph.with_name(f"model_{suffix}.onnx")
    else:
        from sentence_transformers.backend import export_static_quantized_openvino_model

        positions = getattr(getattr(model[0].auto_model, "config", None), "max_position_embeddings", None)
        if positions is not None and positions < CALIBRATION_LENGTH:
            raise JTCSEError(
                f"OpenVINO int8 calibration pads sentences to {CALIBRATION_LENGTH} tokens, but {source} holds only "
                f"{positions} positions; export it without --quantize (float)."
            )
        with tempfile.TemporaryDirectory(prefix="jtcse-calibration-") as folder:
            dataset = {}
            config = None
            if calibration is not None:
                from optimum.intel.openvino import OVQuantizationConfig

                dataset = _write_calibration_dataset(calibration, Path(folder))
                config = OVQuantizationConfig(num_samples=len(calibration))
            try:
                export_static_quantized_openvino_model(model, config, str(tmp), file_suffix=suffix, **dataset)
            except ImportError as err:
                raise _backend_failure(format, err) from err
            except Exception as err:  # noqa: BLE001 - the default calibration set comes from the Hub: say what to do
                if calibration is not None:
                    raise
                first = (str(err).strip().splitlines() or [type(err).__name__])[0]
                raise JTCSEError(
                    f"OpenVINO int8 calibration on GLUE SST-2 from the Hugging Face Hub failed ({type(err).__name__}: "
                    f"{first}); give your own sentences with --calibration FILE (one sentence per line)."
                ) from err
        quantized = graph.with_name(f"openvino_model_{suffix}.xml")
        quantized.with_suffix(".bin").replace(graph.with_suffix(".bin"))
    quantized.replace(graph)


def export_model(
    model_path: str | Path,
    output_dir: str | Path,
    *,
    format: str = "openvino",
    quantize: str | None = None,
    calibration: str | Path | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``output_dir``: the checkpoint with a ``format`` graph (int8 if ``quantize="int8"``).

    ``calibration``: a text file, one sentence per line, for OpenVINO int8 (required offline). Checks
    every input before writing anything, holds the output's lock while writing, and writes under a
    temporary name renamed at the end (removed if anything fails). The result loads with
    ``SentenceTransformer(output_dir, backend=format)``. The output is never the model or calibration file, a
    folder holding them, the working directory or a folder holding it; a non-empty one is replaced only with
    ``overwrite`` and only when an earlier export wrote every file in it (its ``jtcse_outputs.json`` lists them):
    :mod:`jtcse.output_paths`.
    """
    quantize = check_options(format, quantize, calibration)
    source = check_single_tower(model_path)
    sentences = read_calibration(calibration) if calibration is not None else None
    out = FolderOutput(output_dir, "jtcse export", inputs=[source, calibration], whole=True)
    with out.writing():
        if out.path.is_dir() and any(out.path.iterdir()) and not overwrite:
            raise JTCSEError(f"{out.path} holds an earlier export; pass --overwrite to replace it.")
        check_backend(format)
        with out.replacing() as new:
            tmp = new.path
            _convert(source, tmp, format, quantize, sentences)
            record = {
                "source": str(source.resolve()),
                "format": format,
                "quantize": quantize,
                "graph": _GRAPH[format],
                "calibration": None
                if calibration is None
                else {"file": str(Path(calibration).resolve()), "sentences": len(sentences)},
            }
            atomic_write_json(tmp / EXPORT_FILE, record)
    return out.path
