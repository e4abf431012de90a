"""``jtcse ensemble``: combine several encoders into one sentence-transformers checkpoint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Optional

import typer

from jtcse.commands import _options as opts


def parse_weights(text: str | None) -> list[float] | None:
    """``"1,0.5"`` -> ``[1.0, 0.5]``; None stays None."""
    from jtcse.errors import JTCSEError

    if text is None:
        return None
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise JTCSEError(f"--weights must be comma-separated numbers such as 1,0.5; got {text!r}.") from None


def register(app: typer.Typer) -> None:
    app.command("ensemble")(ensemble)


def ensemble(
    models: list[str] = typer.Argument(
        ..., help="Two or more member models: jtcse twins, towers or any sentence-transformers checkpoint."
    ),
    output_dir: Path = opts.output_dir_option("the ensemble checkpoint"),
    combine: str = typer.Option("concat", help="concat (any widths) or sum (members of one width)."),
    weights: Optional[str] = typer.Option(
        None, help="One positive weight per member, comma-separated (e.g. 1,0.5). Default: all 1."
    ),
    overwrite: bool = opts.overwrite_option(),
) -> None:
    """Combine models into one checkpoint: each member keeps its own tokenizer and pooling.

    The embedding is the members' L2-normalised embeddings, each times its weight, concatenated
    (default) or summed. The result loads like any jtcse checkpoint (jtcse eval sts, encode,
    index build, distill --teacher); see docs/ensemble.md.

    Example: jtcse ensemble runs/twin all-MiniLM-L6-v2-dir -o runs/ensemble
    """
    from jtcse.errors import JTCSEError
    from jtcse.locking import output_lock
    from jtcse.modeling.ensemble import COMBINE_CHOICES, build_ensemble, check_weights

    if combine not in COMBINE_CHOICES:
        raise JTCSEError(f"--combine must be one of {', '.join(COMBINE_CHOICES)}, not {combine!r}.")
    if len(models) < 2:
        raise JTCSEError(f"An ensemble needs at least two models; got {len(models)}.")
    parsed = check_weights(parse_weights(weights), len(models))
    output_dir = Path(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise JTCSEError(f"{output_dir} is a file, not a folder.")
    if output_dir.is_dir() and any(output_dir.iterdir()) and not overwrite:
        raise JTCSEError(f"{output_dir} already exists and is not empty; pass --overwrite to replace it.")
    with output_lock(output_dir):
        model = build_ensemble(models, combine=combine, weights=parsed, device="cpu")
        tmp = output_dir.with_name(f".{output_dir.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        model.save(str(tmp))
        if output_dir.exists():
            shutil.rmtree(output_dir)
        tmp.rename(output_dir)
    summary = {
        "output_dir": str(output_dir),
        "members": [str(m) for m in models],
        "combine": combine,
        "weights": parsed,
        "dimension": model.get_embedding_dimension(),
    }
    typer.echo(json.dumps(summary, indent=2))
