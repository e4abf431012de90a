"""The write-ups' results (``*.md``, one folder of results each) and the drivers that produce them
(:mod:`evaluation.drivers`)."""
