"""The pipeline's defaults, each number in one place, and the checks of its settings that need no file or model.

* Each training stage's settings are its trainer's preset (:data:`STAGE_DEFAULTS`: warm-ups
  :data:`~jtcse.training.simcse.SIMCSE_SETTINGS`, twin :data:`~jtcse.training.twin.TWIN_SETTINGS`, distillation
  :data:`~jtcse.training.distill.DISTILL_SETTINGS`), so ``jtcse train`` and the pipeline's twin stage share one
  default; the pipeline's own numbers are :data:`ENSEMBLE_WEIGHTS` and the probe's.
* :func:`stage_settings` puts a stage's given settings on top of its preset; :func:`check_settings` checks every
  argument of :func:`~jtcse.training.pipeline.run_pipeline` that can be checked before anything is read or
  loaded (``jtcse pipeline --recipe`` checks a recipe with it too).

The CPU recipe these defaults are is measured in ``evaluation/DEFAULTS.md``; the paper's are in ``models/``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from jtcse.errors import JTCSEError
from jtcse.training.distill import DISTILL_SETTINGS, distill
from jtcse.training.simcse import SIMCSE_SETTINGS, train_simcse
from jtcse.training.stage import TrainingSettings
from jtcse.training.twin import TWIN_SETTINGS, train_twin

UNTIL = ("warmup", "twin", "ensemble", "distill", "eval")
"""The stages a run may stop after (``--until``)."""

STAGE_DEFAULTS: dict[str, TrainingSettings] = {
    "warmup": SIMCSE_SETTINGS,
    "twin": TWIN_SETTINGS,
    "distill": DISTILL_SETTINGS,
}
"""Each stage's training settings unless the caller gives them: its trainer's preset, the CPU recipe of
``evaluation/DEFAULTS.md`` (a warm-up is one pass of plain SimCSE; the twin trains briefly at a low learning rate,
which measured least harmful to pre-trained towers; the distillation is two passes over the corpus). Each number lives in
its trainer's module; the paper's settings are in ``models/``."""
ENSEMBLE_WEIGHTS = {"warmups": (1.25, 1.25, 1.0), "twin": (2.0, 1.0)}
"""The default ensemble's weights when no selection file chooses them, measured on the selection split
(``evaluation/DEFAULTS.md``): (warm-up I, warm-up II, the starting model) without a twin, (the twin, the starting
model) with one."""
PROBE_LEARNING_RATES = (1e-5, 3e-5, 1e-4)
"""The twin learning rates the probe stage tries (with ``selection_file``)."""
PROBE_STEPS = 100
"""How long each probe twin trains."""

TRAINERS: dict[str, Callable[..., dict[str, Any]]] = {"warmup": train_simcse, "twin": train_twin, "distill": distill}
_SET_BY_THE_PIPELINE = {"settings", "dev_file", "pooling", "student_pooling", "device", "seed", "resume", "pairs_file"}


def stage_settings(stage: str, given: Mapping[str, Any] | None) -> tuple[TrainingSettings, dict[str, Any]]:
    """``(settings, others)`` of one stage (``warmup``, ``twin`` or ``distill``), checked now: the fields of
    :class:`~jtcse.training.stage.TrainingSettings` among ``given`` on top of :data:`STAGE_DEFAULTS` ``[stage]``,
    and the trainer's other keywords (``cael_every`` and the loss weights for the twin, ``objective`` for the
    distillation). A name that is neither is an error naming the valid ones."""
    names = {f.name for f in fields(TrainingSettings)}
    keywords = [
        p.name
        for p in inspect.signature(TRAINERS[stage]).parameters.values()
        if p.kind is p.KEYWORD_ONLY and p.name not in _SET_BY_THE_PIPELINE
    ]
    given = dict(given or {})
    unknown = sorted(set(given) - names - set(keywords))
    if unknown:
        raise JTCSEError(f"{unknown[0]!r} is not a {stage} setting; valid: {', '.join(sorted(names | set(keywords)))}.")
    chosen = {k: v for k, v in given.items() if k in names}
    return STAGE_DEFAULTS[stage].given(None, chosen, f"{stage}_settings"), {
        k: v for k, v in given.items() if k not in names
    }


def check_settings(
    *,
    until: str = "eval",
    pooling: str | None = None,
    warmup_settings: Mapping[str, Any] | None = None,
    twin_settings: Mapping[str, Any] | None = None,
    distill_settings: Mapping[str, Any] | None = None,
    twin: bool | None = None,
    ensemble: bool | None = None,
    ensemble_with: Sequence[str] = (),
    probe_learning_rates: Sequence[float] = PROBE_LEARNING_RATES,
    probe_steps: int = PROBE_STEPS,
    selection_file=None,
    student_pooling: str | None = None,
) -> dict[str, tuple[TrainingSettings, dict[str, Any]]]:
    """The checks of :func:`~jtcse.training.pipeline.run_pipeline`'s arguments that read no file and load no model (a recipe is checked
    with them too); returns each stage's :func:`stage_settings`."""
    from jtcse.modeling.loading import POOLING_CHOICES, check_pooling
    from jtcse.training.distill import check_objective

    check_pooling(pooling)
    if student_pooling not in (None, *POOLING_CHOICES):
        raise JTCSEError(f"student pooling must be one of {', '.join(POOLING_CHOICES)}, not {student_pooling!r}.")
    if until not in UNTIL:
        raise JTCSEError(f"--until must be one of warmup, twin, ensemble, distill, eval (got {until!r}).")
    if ensemble is False and ensemble_with:
        raise JTCSEError(
            "ensemble=False (--no-ensemble) and models to ensemble with (--ensemble-with) contradict each other."
        )
    if isinstance(probe_steps, bool) or not isinstance(probe_steps, int) or probe_steps < 1:
        raise JTCSEError(f"probe steps must be at least 1 (got {probe_steps!r}).")
    if twin not in (None, True, False):
        raise JTCSEError(f"twin must be true, false or unset (got {twin!r}).")
    # with twin=None the start decides (run_pipeline checks it again once it knows)
    if twin and selection_file is not None and (twin_settings or {}).get("learning_rate") is not None:
        raise JTCSEError("a twin learning rate was given and a selection file to probe for one; give one of them.")
    if not probe_learning_rates or not all(isinstance(lr, (int, float)) and lr > 0 for lr in probe_learning_rates):
        raise JTCSEError(f"probe learning rates must be positive numbers (got {list(probe_learning_rates)!r}).")
    settings = {
        stage: stage_settings(stage, given)
        for stage, given in (("warmup", warmup_settings), ("twin", twin_settings), ("distill", distill_settings))
    }
    if "objective" in settings["distill"][1]:
        check_objective(settings["distill"][1]["objective"])
    return settings
