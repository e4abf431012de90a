"""Tools for tests, examples and quick benchmarks, shipped with the library so that the test suite and the scripts
share them (no script imports another script or ``tests/``).

- ``towers``: tiny random towers with real tokenizers (:func:`make_tiny_tower`);
- ``train_steps``: one JTCSE training step against two SimCSE steps, built and timed side by side
  (``scripts/bench_train.py``, ``scripts/bench_gpu.py``);
- ``translate_stub``: a local https stand-in for Google Translate (the RTT tests, ``scripts/bench_rtt.py``);
- ``server_thread``: the life cycle of such a local ``http.server``;
- ``user_folder``: a user's folder of files for the sweeps that try jtcse's commands as a user would
  (``scripts/sweep_outputs.py``): real command lines against any checkout, and what became of the user's files.
"""

from __future__ import annotations

from jtcse.testing.towers import make_tiny_tower

__all__ = ["make_tiny_tower"]
