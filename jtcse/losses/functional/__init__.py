"""Pure-tensor loss functions (no models, no state): the maths behind the loss classes."""

from jtcse.losses.functional.contrastive import icnce, ictm, info_nce, tmc  # noqa: F401
