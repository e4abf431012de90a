"""Numbers as the write-ups' tables print them: Spearman ×100, mean ± sample std over seeds."""

from __future__ import annotations

import statistics


def mean_std(values: list[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (``None`` for a single value)."""
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def percent(value: float | None) -> str:
    """``value`` ×100 with two decimals; ``–`` when missing."""
    return "–" if value is None else f"{100 * value:.2f}"


def mean_std_text(values: list[float], count: bool = False) -> str:
    """``mean ± std`` ×100 of ``values`` (the std only for several), ``(n=...)`` after it with ``count``;
    ``not run`` when there are none."""
    if not values:
        return "not run"
    m, sd = mean_std(values)
    return (
        f"{100 * m:.2f}" + (f" ± {100 * sd:.2f}" if sd is not None else "") + (f" (n={len(values)})" if count else "")
    )
