"""The run summary (``<output_dir>/run_summary.json``): what ran, on what, and how it went, and what its
model card says about it.

The stage runner (:func:`jtcse.training.trainer_run.run_trainer`) builds it (:func:`run_summary`) and writes it last
(:func:`write_run_summary`): its presence marks a finished run. The keys are listed in ``docs/runs.md``;
``schema_version`` (:data:`SCHEMA_VERSION`) changes whenever one is renamed, moved or removed, and
:func:`facts_from_run_summary`, which turns a summary into model-card facts, reads that one layout.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_write_json
from jtcse.processes import world_size
from jtcse.training.arguments import DEV_METRIC
from jtcse.training.curves import logged_terms
from jtcse.training.run_dir import RUN_SUMMARY_NAME, checkpoints_dir
from jtcse.training.settings import CHECKPOINTS, card_keys

if TYPE_CHECKING:
    from jtcse.model_card import CardFacts

SCHEMA_VERSION = 1
"""The summary layout of ``docs/runs.md`` (summaries written before the version was recorded have the same one)."""


def run_summary(
    stage, trainer, progress, *, final_dev: float | None, training_length: int, training_curves: str | None
) -> dict[str, Any]:
    """The run summary of ``stage`` (a :class:`~jtcse.training.trainer_run.TrainerRun`) trained by ``trainer``; loss and
    time (``progress``, a :class:`~jtcse.training.progress.RunProgress`) cover the whole run, resumes included.
    ``training_length``: the length the model trained with; ``training_curves``: the plot's path, if any."""
    s = stage.settings
    history = trainer.state.log_history
    last_logged = next((entry for entry in reversed(history) if "loss" in entry), {})
    return {
        "schema_version": SCHEMA_VERSION,
        "stage": stage.name,
        "output_dir": str(Path(stage.output_dir).resolve()),
        "saved_model": CHECKPOINTS[s.checkpoint],
        "model": stage.model_info,
        "data": stage.data,
        "loss": {"name": type(stage.loss).__name__, **_config_of(stage.loss)},
        "settings": {
            **s.model_dump(),
            "max_seq_length": training_length,
            "world_size": world_size(),
            "global_batch_size": world_size() * s.batch_size,
        },
        "resumed_from": stage.resume_from,
        "steps": trainer.state.global_step,
        "seconds": round(progress.seconds, 2),
        "train_loss": progress.train_loss,
        **loss_history(history),
        **_kept(trainer.state, s.kept_by_dev),
        "loss_terms": logged_terms(last_logged),
        "dev_file": stage.evaluator.path if stage.evaluator is not None else None,
        "final_dev_spearman": final_dev,
        "checkpoints": str(checkpoints_dir(stage.output_dir)) if s.keep_checkpoints else None,
        "training_curves": training_curves,
        "versions": versions(),
        "config": stage.config,
    }


def _config_of(loss) -> dict[str, Any]:
    return loss.get_config_dict() if hasattr(loss, "get_config_dict") else {}


def versions() -> dict[str, str]:
    """Versions of jtcse and the libraries a run depends on, for its summary."""
    import sentence_transformers
    import torch
    import transformers

    import jtcse

    return {
        "jtcse": jtcse.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }


def loss_history(log_history: list[dict[str, Any]]) -> dict[str, Any]:
    """First/last logged training loss and the dev scores by step, from ``trainer.state.log_history``."""
    losses = [entry["loss"] for entry in log_history if "loss" in entry]
    devs = dict((entry["step"], entry[DEV_METRIC]) for entry in log_history if DEV_METRIC in entry)
    scored = {step: score for step, score in devs.items() if isinstance(score, (int, float)) and math.isfinite(score)}
    best_step = max(scored, key=scored.__getitem__) if scored else None
    return {
        "first_logged_loss": losses[0] if losses else None,
        "last_logged_loss": losses[-1] if losses else None,
        "dev_spearman_by_step": devs,
        "best_dev_spearman": scored[best_step] if scored else None,
        "best_step": best_step,
    }


def _kept(state, kept_by_dev: bool) -> dict[str, Any]:
    """Which step the saved model is: the last, or when it is ``kept_by_dev`` the checkpoint the trainer kept as
    best (``best_step`` and ``best_dev_spearman`` are then that checkpoint's, which only saved steps can
    be: a dev score of an unsaved step, e.g. before the first update, does not count)."""
    if not kept_by_dev:
        return {"saved_step": state.global_step}
    if not state.best_model_checkpoint:  # no saved step was scored: the last step is kept, and no step is "best"
        return {"saved_step": state.global_step, "best_step": None, "best_dev_spearman": None}
    step = int(Path(state.best_model_checkpoint).name.rsplit("-", 1)[1])
    return {"saved_step": step, "best_step": step, "best_dev_spearman": state.best_metric}


def write_run_summary(output_dir: str | Path, summary: dict[str, Any]) -> Path:
    """Write ``summary`` as ``<output_dir>/run_summary.json`` (the mark of a finished run), atomically."""
    return atomic_write_json(Path(output_dir) / RUN_SUMMARY_NAME, summary)


def read_run_summary(output_dir: str | Path) -> dict[str, Any]:
    """The summary of the finished run in ``output_dir``; a ``JTCSEError`` when there is none."""
    path = Path(output_dir) / RUN_SUMMARY_NAME
    if not path.is_file():
        raise JTCSEError(f"{output_dir} holds no finished run ({RUN_SUMMARY_NAME} is missing).")
    return json.loads(path.read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------------- the summary -> card facts
_CARD_KINDS = {"simcse": "warmup", "distill": "distilled", "twin": "twin"}
"""The card kind of each trainer's run (``run_summary.json``'s ``stage``: the trainers' names)."""
_RUN_FACTS = ("num_layers", "loss_weights", "dev_file")
"""What a card lists after the settings declared for it (:func:`~jtcse.training.settings.card_keys`): facts of the
run, not settings. Each is looked up, like a setting, in the summary's top level, ``model``, ``settings`` (what
was used), then ``config`` (what was asked for)."""
_DATA_LABELS = {
    "source": "corpus",
    "pairs_file": "pairs file",
    "lines": "lines read",
    "skipped_blank_lines": "blank lines skipped",
    "duplicates_dropped": "duplicates dropped",
    "truncated_to_max_seq_length": "sentences truncated to max_seq_length",
    "sentences": "sentences used",
    "rows": "training rows",
    "paraphrase_rows": "paraphrase rows",
    "dropout_only_rows": "dropout-only rows",
    "pairs_used": "pairs used",
    "pairs_dropped_identical": "identical pairs dropped",
    "pairs_dropped_empty": "empty pairs dropped",
}
"""The summary's ``data`` counts a card shows, with their labels, in the card's order."""


def infer_kind(summary: dict[str, Any]) -> str:
    """The card kind of a run summary, from its ``stage``: ``simcse`` → warmup, ``distill`` → distilled,
    ``twin`` → twin."""
    trainer = summary.get("stage")
    if trainer not in _CARD_KINDS:
        raise JTCSEError(
            f"cannot tell what kind of model this run summary describes (stage {trainer!r}); pass kind= explicitly."
        )
    return _CARD_KINDS[trainer]


def _regularizer_name(entry: Any) -> str:
    """The loss class name of a regulariser entry: a config dict (``loss.regularizers``) or a spec such as
    ``simreg:weight=2`` (``config.regularizers``)."""
    from jtcse.losses.registry import REGULARIZERS

    if isinstance(entry, dict):
        return str(entry.get("name", entry))
    name = str(entry).split(":")[0]
    return REGULARIZERS[name][1] if name in REGULARIZERS else name


def _regularizer_label(entry: Any) -> str:
    """``SimRegLoss(weight=2)`` for a config dict; a spec string as it is."""
    from jtcse.model_card import format_value

    if not isinstance(entry, dict):
        return str(entry)
    return f"{_regularizer_name(entry)}({format_value({k: v for k, v in entry.items() if k != 'name'})})"


def facts_from_run_summary(summary: dict[str, Any], kind: str | None = None) -> CardFacts:
    """:class:`~jtcse.model_card.CardFacts` from a run summary of ``train``, ``simcse`` or ``distill`` (the
    layout of :data:`SCHEMA_VERSION`, ``docs/runs.md``); what it lacks is left out.

    Read: ``stage`` (the kind, unless ``kind`` is given), ``model`` (``towers``, ``source``, ``student``,
    ``teacher``, ``objective``), the settings declared for the card and the facts in ``_RUN_FACTS``, ``steps``, ``loss`` and the regularisers,
    the ``data`` counts in ``_DATA_LABELS``, ``dev_spearman_by_step``, ``best_dev_spearman`` and
    ``final_dev_spearman``. A distilled card states and cites the objective it was trained with.
    """
    from jtcse.model_card import EMBEDDED_MINILM_HUB_ID, CardFacts, default_citations, distilled_recipe, loss_citations

    version = summary.get("schema_version", 1)
    if version != SCHEMA_VERSION:
        raise JTCSEError(f"this run summary has schema_version {version!r}; this jtcse reads {SCHEMA_VERSION}.")
    kind = kind or infer_kind(summary)
    model, config, used = summary.get("model") or {}, summary.get("config") or {}, summary.get("settings") or {}
    settings: dict[str, Any] = {}
    for key in (*card_keys(), *_RUN_FACTS):
        source = next((s for s in (summary, model, used, config) if key in s), None)
        if source is not None:
            settings[key] = source[key]
    if summary.get("steps") is not None:
        settings["steps trained"] = summary["steps"]
    regularizers = config.get("regularizers") or []
    loss = summary.get("loss")
    if isinstance(loss, dict):  # a loss's get_config_dict(); a wrapped loss nests its base loss's
        flat = {**loss, **(loss.get("base_loss_config") or {})}
        settings["loss"] = {k: v for k, v in flat.items() if not isinstance(v, (dict, list))}
        regularizers = regularizers or loss.get("regularizers") or []
    if regularizers:
        settings["regularizers"] = [_regularizer_label(r) for r in regularizers]
    counts = summary.get("data") or {}
    data = {label: counts[key] for key, label in _DATA_LABELS.items() if counts.get(key) is not None}
    dev_history = [(int(step), float(score)) for step, score in (summary.get("dev_spearman_by_step") or {}).items()]

    recipe, citations = None, default_citations(kind)
    if kind == "twin":
        towers = [str(t) for t in model.get("towers") or []]
    elif kind == "distilled":
        towers = [str(model["student"])] if model.get("student") else []
        objective = model.get("objective", config.get("objective"))
        recipe = distilled_recipe(objective) if objective is not None else None
        if isinstance(loss, dict) and objective is not None:
            for name, bibtex in loss_citations([loss.get("name")]).items():
                if bibtex not in citations.values():
                    citations[f"{name} (objective `{objective}`)"] = bibtex
    else:
        towers = [str(model["source"])] if model.get("source") else []
    towers = ["embedded MiniLM (all-MiniLM-L6-v2)" if "embedded MiniLM" in t else t for t in towers]
    citations.update(loss_citations(_regularizer_name(r) for r in regularizers))
    return CardFacts(
        kind=kind,
        recipe=recipe,
        towers=towers,
        teacher=str(model["teacher"]) if model.get("teacher") else None,
        settings=settings,
        data=data,
        dev_history=dev_history,
        best_dev_spearman=summary.get("best_dev_spearman"),
        final_dev_spearman=summary.get("final_dev_spearman"),
        citations=citations,
        base_model=EMBEDDED_MINILM_HUB_ID if towers and all("all-MiniLM-L6-v2" in t for t in towers) else None,
    )


def write_run_card(output_dir: str | Path, model=None, kind: str | None = None) -> Path:
    """The card of the finished run in ``output_dir``: facts from its ``run_summary.json``
    (:func:`facts_from_run_summary`), the model given or the one saved in ``output_dir``."""
    from jtcse.model_card import write_model_card
    from jtcse.modeling.loading import load_model

    facts = facts_from_run_summary(read_run_summary(output_dir), kind)
    return write_model_card(model if model is not None else load_model(output_dir), output_dir, facts)
