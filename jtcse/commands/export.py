"""``jtcse export``: a single-tower checkpoint as an ONNX or OpenVINO model (optionally int8)."""

from __future__ import annotations

from pathlib import Path

import typer

from jtcse.commands import _options as opts


def register(app: typer.Typer) -> None:
    app.command("export")(export)


def export(
    model: Path = typer.Argument(..., help="Single-tower checkpoint folder (warm-up, distilled or exported tower)."),
    format: str = typer.Option(
        "openvino", "--format", "-f", help="openvino or onnx (blocked upstream today: docs/export.md)."
    ),
    quantize: str = typer.Option(
        "none", "--quantize", "-q", help="none or int8 (ONNX Runtime dynamic / OpenVINO static quantization)."
    ),
    calibration: Path | None = typer.Option(
        None,
        "--calibration",
        help="OpenVINO int8: text file, one sentence per line (e.g. your corpus; 300 are drawn), to calibrate on. Required offline; default: GLUE SST-2 from the Hugging Face Hub.",
    ),
    output: Path = opts.output_option("the exported model"),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace an earlier export in the output folder (a folder of yours never is)."
    ),
) -> None:
    """Convert a checkpoint with sentence-transformers' ONNX/OpenVINO backends for fast CPU inference.

    Needs the extra for the format: pip install jtcse\\[openvino] (or jtcse\\[onnx], which Optimum does not support beside transformers 5 yet: docs/export.md). The result loads with SentenceTransformer(OUTPUT, backend=FORMAT). Twins and ensembles are refused: export each tower (TwinTowers.export_towers) and combine their embeddings.

    Example: jtcse export runs/distilled -f openvino -q int8 --calibration corpus.txt -o runs/distilled-ov-int8
    """
    from jtcse.backend_export import export_model

    written = export_model(
        model, output, format=format, quantize=quantize, calibration=calibration, overwrite=overwrite
    )
    typer.echo(f"Exported {model} ({format}, {quantize}) to {written}")
