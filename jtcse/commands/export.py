"""``jtcse export``: a single-tower checkpoint as an ONNX or OpenVINO model (optionally int8)."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("export")(export)


def export(
    model: Path = typer.Argument(..., help="Single-tower checkpoint folder (warm-up, distilled or exported tower)."),
    format: str = typer.Option("onnx", "--format", "-f", help="onnx or openvino."),
    quantize: str = typer.Option("none", "--quantize", "-q", help="none or int8 (ONNX Runtime dynamic / OpenVINO static quantization)."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder to write the exported model to."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a non-empty output folder."),
) -> None:
    """Convert a checkpoint with sentence-transformers' ONNX/OpenVINO backends for fast CPU inference.

    Needs the extra for the format: pip install jtcse\\[onnx] or jtcse\\[openvino]. The result loads with SentenceTransformer(OUTPUT, backend=FORMAT). Twins are refused: export each tower (TwinTowers.export_towers) and sum their embeddings.

    Example: jtcse export runs/distilled -f onnx -q int8 -o runs/distilled-onnx-int8
    """
    from jtcse.export import export_model

    written = export_model(model, output, format=format, quantize=quantize, overwrite=overwrite)
    typer.echo(f"Exported {model} ({format}, {quantize}) to {written}")
