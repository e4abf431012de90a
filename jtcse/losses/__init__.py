"""Loss classes following the sentence-transformers conventions, and their functional forms."""

from jtcse.losses.jtcse_loss import JTCSELoss  # noqa: F401
