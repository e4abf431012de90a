"""Saving an ensemble checkpoint (``jtcse ensemble`` and the pipeline's ensemble stage): the members combined
(:func:`jtcse.modeling.build.build_ensemble`), its model card, one writer and an all-or-nothing folder; and how an
ensemble is joined as settings (:data:`Weights`, :func:`combine_setting`, :func:`weights_setting`: one type each,
wherever given)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from jtcse.errors import JTCSEError, SettingError
from jtcse.locking import locks_output
from jtcse.modeling.combine import Combine, check_weights
from jtcse.output_paths import FolderOutput
from jtcse.schema import Array, Positive, Settings, setting

Weights = Annotated[Array[Positive], Field(min_length=1)]
"""Ensemble weights: one positive number per member (at least one), the one type wherever they are given (``jtcse
ensemble --weights``, the pipeline's ``[ensemble] weights``): comma-separated on a command line, an array in a recipe;
counted against the members by :func:`member_weights`."""


def combine_setting(help: str) -> Any:
    """How an ensemble joins its members (a :data:`~jtcse.modeling.combine.Combine`), ``concat`` by default: the
    declaration of ``jtcse ensemble --combine`` and the pipeline's ``[ensemble] combine``."""
    return setting("concat", help)


def weights_setting(help: str, unset: str) -> Any:
    """:data:`Weights`, ``unset`` saying what ``None`` means (all 1, or the pipeline's choice)."""
    return setting(None, help, unset=unset)


def member_weights(weights: Sequence[float] | None, count: int) -> list[float]:
    """``weights`` for ``count`` members (``None``: all 1) by the ensemble's own check
    (:func:`~jtcse.modeling.combine.check_weights`), a wrong count a :class:`~jtcse.errors.SettingError` naming the
    weights."""
    try:
        return check_weights(weights, count)
    except ValueError as err:
        raise SettingError("{weights}: {problem}", ["weights"], problem=str(err)) from None


class JoinSettings(Settings):
    """How ``jtcse ensemble`` joins its members."""

    combine: Combine = combine_setting("concat (any widths) or sum (members of one width).")
    weights: Weights | None = weights_setting(
        "One positive weight per ensemble member, comma-separated (e.g. 1,0.5).", unset="all 1"
    )


def ensemble_card_facts(model, sources):
    """:class:`~jtcse.model_card.CardFacts` of an ensemble ``model`` (a ``SentenceTransformer`` whose module is an
    ``Ensemble``) built from ``sources`` (the paths or models it was given): each member with its pooling, width
    and weight."""
    from jtcse.model_card import CardFacts, describe_pooling
    from jtcse.modeling.loading import describe_source

    ensemble = model[0]
    members = [
        f"`{describe_source(source)}`: {describe_pooling(member)}; {width} dimensions, weight {weight:g}"
        for source, member, width, weight in zip(
            sources, ensemble.members, ensemble.widths, ensemble.weights, strict=True
        )
    ]
    return CardFacts(
        kind="ensemble",
        towers=members,
        settings={
            "combine": ensemble.combine,
            "weights": list(ensemble.weights),
            "member widths": list(ensemble.widths),
            "output width": ensemble.get_embedding_dimension(),
        },
    )


@locks_output("output_dir")
def save_ensemble(
    models: Sequence,
    output_dir: str | Path,
    *,
    combine: str = "concat",
    weights: Sequence[float] | None = None,
    overwrite: bool = False,
    device: str | None = None,
):
    """Combine ``models`` into one ensemble (:func:`~jtcse.modeling.build.build_ensemble`) and save it, with its
    model card (:func:`ensemble_card_facts`), as ``output_dir``; returns the model.

    Under the output's lock: a folder that is there and not empty is refused unless ``overwrite``, and the
    new checkpoint replaces it in one rename (:meth:`~jtcse.output_paths.FolderOutput.replacing`), so a failed or
    killed save leaves the old folder as it was. Only an earlier ensemble whose record lists every file in it
    (``jtcse_outputs.json``) or an empty folder is ever replaced, never a member, a folder holding one, the working
    directory or a folder holding it (:mod:`jtcse.output_paths`).
    """
    from jtcse.model_card import attach_card_data
    from jtcse.modeling.build import build_ensemble

    out = FolderOutput(output_dir, "jtcse ensemble", inputs=models, whole=True)
    out.check()
    member_weights(weights, len(models))  # before any member loads
    if out.path.is_dir() and any(out.path.iterdir()) and not overwrite:
        raise JTCSEError(f"{out.path} holds an earlier ensemble; pass --overwrite to replace it.")
    model = build_ensemble(models, combine=combine, weights=weights, device=device)
    facts = ensemble_card_facts(model, models)
    facts.model_path = str(out.path.resolve())  # the card's snippet names the final folder, not the temporary one
    attach_card_data(model, facts)  # model.save writes this card
    with out.replacing() as new:
        model.save(str(new.path))
    return model
