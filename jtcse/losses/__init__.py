"""Loss classes (sentence-transformers conventions) and their pure-tensor forms in ``jtcse.losses.functional``."""

from jtcse.losses.dispersion import DispersionLoss  # noqa: F401
from jtcse.losses.jtcse_loss import JTCSELoss  # noqa: F401
from jtcse.losses.nitp import NITPHead, NITPLoss, remove_nitp_head  # noqa: F401
from jtcse.losses.regularized import RegularizedLoss, TokenRegularizer  # noqa: F401
from jtcse.losses.simreg import SimRegLoss  # noqa: F401
from jtcse.losses.thresholding import (  # noqa: F401
    ThresholdedCrossEntropyLoss,
    ThresholdedMultipleNegativesRankingLoss,
)
