"""``jtcse ensemble``: combine several encoders into one sentence-transformers checkpoint."""

from __future__ import annotations

from pathlib import Path

import typer

from jtcse.commands import _options as opts
from jtcse.commands._settings import Options, settings_from, with_settings
from jtcse.locking import json_text
from jtcse.training.ensemble import JoinSettings

OPTIONS = Options(JoinSettings, JoinSettings())


def register(app: typer.Typer) -> None:
    app.command("ensemble")(ensemble)


@with_settings(OPTIONS)
def ensemble(
    models: list[str] = typer.Argument(
        ..., help="Two or more member models: jtcse twins, towers or any sentence-transformers checkpoint."
    ),
    output: Path = opts.output_option("the ensemble checkpoint"),
    output_dir_alias: Path | None = opts.old_output_option("--output-dir"),
    overwrite: bool = opts.overwrite_option(),
    **options,
) -> None:
    """Combine models into one checkpoint: each member keeps its own tokenizer and pooling.

    The embedding is the members' L2-normalised embeddings, each times its weight, concatenated
    (default) or summed. The result loads like any jtcse checkpoint (jtcse eval sts, encode,
    index build, distill --teacher) and, with trust_remote_code=True, like any sentence-transformers
    model without jtcse. README.md is a model card listing the members and weights; see docs/ensemble.md.

    Example: jtcse ensemble runs/twin all-MiniLM-L6-v2-dir -o runs/ensemble
    """
    from jtcse.errors import JTCSEError
    from jtcse.training.ensemble import save_ensemble

    join = settings_from(OPTIONS, options)
    output_dir = Path(output)
    if len(models) < 2:
        raise JTCSEError(f"An ensemble needs at least two models; got {len(models)}.")
    model = save_ensemble(
        models, output_dir, combine=join.combine, weights=join.weights, overwrite=overwrite, device="cpu"
    )
    summary = {
        "output_dir": str(output_dir),
        "members": [str(m) for m in models],
        "combine": join.combine,
        "weights": model[0].weights,
        "dimension": model.get_embedding_dimension(),
    }
    typer.echo(json_text(summary), nl=False)
