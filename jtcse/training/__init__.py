"""Training entry points built on ``SentenceTransformerTrainer``."""
