"""Each study's own: its table layout, choice rules and row kinds, beside its study file (evaluation/README.md)."""
