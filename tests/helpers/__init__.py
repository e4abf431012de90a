"""Test helpers (not test modules; fixtures live in tests/conftest.py).

- ``cli``: every child process the tests start (``run_cli``, ``run_python``, ``start_cli``, ``start_python``,
  one environment rule ``subprocess_env``), ``invoke_cli`` (``jtcse`` in the test process, where a fresh
  interpreter is not the point) and ``one_error_line`` for refused commands;
- ``shared``: ``built_once``, an artefact (tower, twin, trained run) made once per test run and shared by the
  pytest-xdist workers (the session fixtures of conftest.py);
- ``rtt``: ``google`` points the googletrans backend at the local https stand-in for Google Translate
  (``jtcse.testing.translate_stub``, shared with ``scripts/bench_rtt.py``; fixtures ``stub``, ``stub_cert``);
- ``file_server``: a local HTTP file server for the download tests (``jtcse.testing.server_thread``);
- ``spread_towers``: tiny towers whose CLS vectors differ between sentences (trainable in a few steps).
- ``backends``: whether OpenVINO's Optimum backend is installed (``needs_openvino``, the ``export`` tests).

Markers (registered in pytest.ini, ``--strict-markers``): ``slow`` (trains, starts a child process that
imports torch, or takes more than about a quarter second of CPU), ``cli`` (runs the ``jtcse`` command line),
``network_stub`` (uses the stand-in server; set automatically by its fixtures), ``distributed`` (torchrun).
The fast subset: ``bash scripts/test.sh -m "not slow"``.
"""
