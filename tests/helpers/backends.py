"""Which optional inference backends this environment has, for tests that convert models with them."""

from __future__ import annotations

import importlib.util

import pytest


def installed(package: str) -> bool:
    """Whether ``package`` (dotted names too) can be imported here, without importing it."""
    try:
        return importlib.util.find_spec(package) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


OPENVINO = installed("optimum.intel") and installed("openvino")
needs_openvino = pytest.mark.skipif(
    not OPENVINO, reason="needs OpenVINO's Optimum backend: pip install jtcse[openvino]"
)
"""Skips a test where OpenVINO's Optimum backend is missing (``.venv-openvino`` has it: scripts/test.sh --export)."""
