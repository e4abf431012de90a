"""Round-trip translation (English → pivot → English) paraphrases for tower warm-up.

Modules, one concern each: ``pairs`` (the pairs-file format), ``base`` (the translator interface),
``cache`` (the persistent SQLite cache), ``googletrans_backend`` / ``seq2seq`` / ``replay`` (backends), ``backends`` (a backend by name),
``runner`` (the resumable job), ``stub_server`` (a local stand-in for the web service, for tests and
benchmarks). Nothing here imports torch at module level.
"""
