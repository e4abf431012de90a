"""PNG figures of the diagnostics (matplotlib, object API: no pyplot global state).

Every figure is saved at exactly ``figsize × dpi`` pixels (no tight bounding box).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

DPI = 100


def _save(fig, path: str | Path) -> str:
    fig.savefig(path, dpi=DPI, format="png")
    return str(path)


def attention_grid_size(n_layers: int) -> tuple[int, int]:
    """(columns, rows) of the per-layer heat-map grid."""
    cols = min(n_layers, 4)
    return cols, math.ceil(n_layers / cols)


def plot_attention_grid(maps: list[np.ndarray], path: str | Path, title: str) -> str:
    """One heat map per layer (query rows × key columns, head- and sequence-averaged), 3×3 inches each."""
    from matplotlib.figure import Figure

    cols, rows = attention_grid_size(len(maps))
    fig = Figure(figsize=(3 * cols, 3 * rows), dpi=DPI)
    for layer, attention in enumerate(maps, start=1):
        ax = fig.add_subplot(rows, cols, layer)
        image = ax.imshow(np.ma.masked_invalid(attention), cmap="viridis", vmin=0.0, aspect="equal")
        ax.set_title(f"layer {layer}", fontsize=9)
        ax.set_xlabel("key position", fontsize=7)
        ax.set_ylabel("query position", fontsize=7)
        ax.tick_params(labelsize=6)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.suptitle(title, fontsize=10)
    fig.subplots_adjust(hspace=0.45, wspace=0.45)
    return _save(fig, path)


def plot_layer_curves(
    curves: dict[str, list[float]], path: str | Path, ylabel: str, title: str, first_layer: int = 1
) -> str:
    """Lines of a per-layer quantity, one per encoder; 6×4 inches."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), dpi=DPI)
    ax = fig.add_subplot(1, 1, 1)
    for name, values in curves.items():
        ax.plot(range(first_layer, first_layer + len(values)), values, marker="o", label=name)
    ax.set_xlabel("layer")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.subplots_adjust(left=0.15, bottom=0.13)
    return _save(fig, path)


def plot_alignment_uniformity(points: dict[str, tuple[float, float]], path: str | Path) -> str:
    """Scatter of (uniformity, alignment) per embedding; lower-left is better; 5×4 inches."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 4), dpi=DPI)
    ax = fig.add_subplot(1, 1, 1)
    for name, (unif, align) in points.items():
        ax.scatter([unif], [align], s=40)
        ax.annotate(name, (unif, align), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("uniformity  log E exp(-2‖f(x)-f(y)‖²)")
    ax.set_ylabel("alignment  E‖f(x)-f(x⁺)‖²")
    ax.set_title("alignment vs uniformity")
    ax.margins(0.2)
    ax.grid(alpha=0.3)
    fig.subplots_adjust(left=0.16, bottom=0.14)
    return _save(fig, path)
