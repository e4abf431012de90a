"""How an ensemble joins its members' embeddings: the choices (:data:`COMBINE_CHOICES`) and the checks of a choice
and of the members' weights, the one list and the one check wherever they are given (``jtcse ensemble``, the
pipeline's ``[ensemble]``, :class:`~jtcse.modeling.ensemble.Ensemble` itself).

This file travels with every ensemble checkpoint (``ensemble.py`` imports it), so it imports only the standard
library and raises plain ``ValueError``; importing it loads no torch, so option parsers may read the list.
"""

from __future__ import annotations

import math
import typing
from typing import Any, Literal

Combine = Literal["concat", "sum"]
"""``concat``: the members' weighted, L2-normalised embeddings side by side (any widths); ``sum``: added (one
width)."""
COMBINE_CHOICES = typing.get_args(Combine)


def check_combine(combine: str) -> str:
    """``combine`` if it is one of :data:`COMBINE_CHOICES`, else a ``ValueError``."""
    if combine not in COMBINE_CHOICES:
        raise ValueError(f"combine must be one of {', '.join(COMBINE_CHOICES)}, not {combine!r}.")
    return combine


def check_weights(weights: Any, count: int) -> list[float]:
    """``weights`` as ``count`` positive finite floats (None: all 1.0)."""
    if weights is None:
        return [1.0] * count
    try:
        values = [float(w) for w in weights]
    except (TypeError, ValueError):
        raise ValueError(f"Ensemble weights must be numbers, not {weights!r}.") from None
    if len(values) != count:
        raise ValueError(f"{len(values)} weight(s) given for {count} ensemble members; give one weight per member.")
    bad = [w for w in values if not (math.isfinite(w) and w > 0)]
    if bad:
        raise ValueError(f"Ensemble weights must be positive finite numbers; got {bad}.")
    return values
