"""The project's studies: each a TOML file in ``studies/``, made, scored and reported by one runner
(``python -m evaluation.run``; ``evaluation/README.md``)."""
