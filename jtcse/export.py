"""Export a single-tower checkpoint for fast CPU inference with sentence-transformers' backends.

The conversion is sentence-transformers' own: loading with ``backend="onnx"`` / ``"openvino"``
exports the transformer through Optimum, ``save_pretrained`` writes it, and int8 uses
``export_dynamic_quantized_onnx_model`` (ONNX Runtime dynamic quantization) or
``export_static_quantized_openvino_model`` (OpenVINO post-training quantization; its calibration
set, GLUE SST-2 by default, comes from the Hugging Face Hub). The quantized graph replaces the
float one under its default name, so ``SentenceTransformer(DIR, backend=FORMAT)`` loads what was
asked for; ``export.json`` records how the folder was made.

Twins are refused: a twin's embedding is the sum of its towers' embeddings, and the backends
export one transformer per model. Write the towers with ``TwinTowers.export_towers``, export each, and sum their embeddings.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

from jtcse.errors import JTCSEError

FORMATS = ("onnx", "openvino")
QUANTIZATIONS = ("none", "int8")
EXPORT_FILE = "export.json"
# format → (modules that must import, the extra that installs them)
_REQUIREMENTS = {
    "onnx": (("onnxruntime", "optimum.onnxruntime"), "onnx"),
    "openvino": (("openvino", "optimum.intel.openvino"), "openvino"),
}
# Where sentence-transformers' backends put the float graph, and what the int8 exporters add.
_GRAPH = {"onnx": "onnx/model.onnx", "openvino": "openvino/openvino_model.xml"}
_INT8_SUFFIX = {"onnx": "qint8_avx512_vnni", "openvino": "qint8_quantized"}


def check_options(format: str, quantize: str | None) -> str:
    """Validate the format and quantization names; returns the quantization ("none" for None)."""
    if format not in FORMATS:
        raise JTCSEError(f"Unknown export format {format!r}; valid ones: {', '.join(FORMATS)}.")
    quantize = quantize or "none"
    if quantize not in QUANTIZATIONS:
        raise JTCSEError(f"Unknown quantization {quantize!r}; valid ones: {', '.join(QUANTIZATIONS)}.")
    return quantize


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


def _is_twin(path: Path) -> bool:
    """A module of class TwinTowers in modules.json, whether named by package path or by checkpoint file."""
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        return any(str(entry.get("type", "")).endswith("TwinTowers") for entry in modules)
    except (OSError, ValueError, AttributeError):
        return False


def check_single_tower(model_path: str | Path) -> Path:
    """The folder must be a sentence-transformers checkpoint of one tower; twins get what to do instead."""
    path = Path(model_path)
    if not path.is_dir():
        raise JTCSEError(f"Model folder not found: {path}")
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise JTCSEError(
            f"{path} is not a model folder (no modules.json or config.json); give a sentence-transformers checkpoint."
        )
    if _is_twin(path):
        raise JTCSEError(
            f"{path} is a twin; export takes single towers. Write each tower with "
            f"load_model({str(path)!r})[0].export_towers(DIR), export DIR/tower_1 and DIR/tower_2, and sum their embeddings."
        )
    return path


def export_model(
    model_path: str | Path,
    output_dir: str | Path,
    *,
    format: str = "onnx",
    quantize: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``output_dir``: the checkpoint with a ``format`` graph (int8 if ``quantize="int8"``).

    Checks every input before writing anything; the result loads with
    ``SentenceTransformer(output_dir, backend=format)``.
    """
    quantize = check_options(format, quantize)
    source = check_single_tower(model_path)
    output_dir = Path(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise JTCSEError(f"Output {output_dir} is a file; give a folder.")
    if output_dir.resolve() == source.resolve():
        raise JTCSEError("The output folder must differ from the model folder.")
    if output_dir.is_dir() and any(output_dir.iterdir()) and not overwrite:
        raise JTCSEError(f"{output_dir} is not empty; pass --overwrite to replace it.")
    check_backend(format)

    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(source), backend=format, device="cpu")  # exports the transformer
    tmp = output_dir.with_name(output_dir.name + ".export-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    graph = tmp / _GRAPH[format]
    if quantize == "int8":
        suffix = _INT8_SUFFIX[format]
        if format == "onnx":
            from sentence_transformers.backend import export_dynamic_quantized_onnx_model

            export_dynamic_quantized_onnx_model(model, "avx512_vnni", str(tmp), file_suffix=suffix)
            quantized = graph.with_name(f"model_{suffix}.onnx")
        else:
            from sentence_transformers.backend import export_static_quantized_openvino_model

            export_static_quantized_openvino_model(model, None, str(tmp), file_suffix=suffix)
            quantized = graph.with_name(f"openvino_model_{suffix}.xml")
            quantized.with_suffix(".bin").replace(graph.with_suffix(".bin"))
        quantized.replace(graph)
    (tmp / EXPORT_FILE).write_text(
        json.dumps({"source": str(source.resolve()), "format": format, "quantize": quantize, "graph": _GRAPH[format]}, indent=2)
        + "\n",
        encoding="utf-8",
    )
    if output_dir.exists():
        shutil.rmtree(output_dir)
    tmp.replace(output_dir)
    return output_dir
