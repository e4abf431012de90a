"""Round-trip translation (English → pivot → English) paraphrases for tower warm-up.

Modules, one concern each: ``pairs`` (the pairs-file format), ``base`` (the translator interface),
``cache`` (the persistent SQLite cache), ``googletrans_backend`` / ``seq2seq`` / ``replay`` (backends),
``backends`` (a backend by name), ``runner`` (the resumable job). Nothing here imports torch at module
level; the local stand-in for the web service (tests, benchmark) is ``jtcse.testing.translate_stub``.
"""
