"""The reproduction drivers: each trains and scores the rows of one write-up in ``evaluation/`` and rebuilds its
results from them. Run from the repository root::

    python -m evaluation.drivers.repro_cpu      # REPRODUCTION.md, evaluation/repro/
    python -m evaluation.drivers.repro_ucd      # UCD.md, evaluation/ucd/
    python -m evaluation.drivers.repro_default  # DEFAULTS.md, evaluation/default/
    python -m evaluation.drivers.genre_tradeoff # DEFAULTS.md's genre trade-off, evaluation/default/genre_tradeoff.json

Each driver takes ``--quick`` (tiny settings, a smoke run), ``--report-only`` (rebuild the results from the row
files, train nothing), ``--stages``, ``--data`` (``wiki12k.txt`` and ``stsbenchmark/``), ``--work`` and
``-o/--output`` (:mod:`.cli`). They are built on the library's public API: the trainers (a rerun of a finished
training returns its summary, an interrupted one resumes), :func:`jtcse.training.selection.concat_cosine` and
:data:`~jtcse.training.selection.WEIGHT_GRID`.

The pieces they share: :mod:`.cli` (options, folders, writing the results), :mod:`.grid` (the row files, the
shared training inputs, the warm-up towers), :mod:`.splits` (the selection split of STS-B train, choosing on it),
:mod:`.speed` (encode throughput rows), :mod:`.formatting` (numbers in the tables). Each driver with more than one
concern is split into its runner and its report (``*_report``); ``repro_default``'s runner into settings, scores,
twins and the rest.
"""
