"""Pure-tensor forms of the jtcse losses (no model, no module state): the maths behind the loss classes."""

from jtcse.losses.functional.contrastive import cos_sim, icnce, ictm, info_nce, tmc  # noqa: F401
from jtcse.losses.functional.token import (  # noqa: F401
    DISPERSION_VARIANTS,
    dispersion,
    nitp,
    simreg,
    simreg_chunked,
    threshold_logits,
    thresholded_cross_entropy,
)
