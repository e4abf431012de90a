"""The training-curve figure every stage writes: logged loss terms per step, and dev Spearman when evaluated.

Object-API matplotlib (no pyplot global state), saved like the diagnostics figures
(:mod:`jtcse.evaluation.plots`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CURVES_FILE = "training_curves.png"
_NOT_TERMS = {"loss", "grad_norm", "learning_rate", "epoch", "step"}


def logged_terms(entry: dict[str, Any]) -> dict[str, float]:
    """The named loss terms of one training log entry (``nce_1``, ``simcse``, ``dispersion`` ...)."""
    return {key: value for key, value in entry.items() if key not in _NOT_TERMS}


def plot_training_curves(log_history: list[dict[str, Any]], metric: str, path: str | Path) -> str | None:
    """Total loss and each logged term per step (left), ``metric`` per evaluation (right); ``None`` when
    nothing was logged."""
    from matplotlib.figure import Figure

    from jtcse.evaluation.plots import _save

    train = [entry for entry in log_history if "loss" in entry]
    dev = [(entry["step"], entry[metric]) for entry in log_history if metric in entry]
    if not train and not dev:
        return None
    terms = sorted({key for entry in train for key in logged_terms(entry)})
    fig = Figure(figsize=(11 if dev else 6, 4))
    axes = fig.subplots(1, 2 if dev else 1, squeeze=False)[0]
    steps = [entry["step"] for entry in train]
    axes[0].plot(steps, [entry["loss"] for entry in train], label="total", linewidth=2)
    for term in terms:
        axes[0].plot(steps, [entry.get(term, float("nan")) for entry in train], label=term)
    axes[0].set(xlabel="step", ylabel="loss", title="loss terms")
    axes[0].legend()
    if dev:
        axes[1].plot([s for s, _ in dev], [v for _, v in dev], marker="o")
        axes[1].set(xlabel="step", ylabel="Spearman (cosine)", title="STS dev")
    fig.tight_layout()
    return _save(fig, path)
