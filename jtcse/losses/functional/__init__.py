"""Pure-tensor forms of the jtcse losses (no model, no module state)."""

from jtcse.losses.functional.token import (  # noqa: F401
    DISPERSION_VARIANTS,
    dispersion,
    nitp,
    simreg,
    simreg_chunked,
    threshold_logits,
    thresholded_cross_entropy,
)
