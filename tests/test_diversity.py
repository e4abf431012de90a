"""Diversity of ensemble members (jtcse/evaluation/diversity.py) against hand-computed cases and the kernel form."""

from __future__ import annotations

import numpy as np
import pytest

from jtcse.evaluation.diversity import error_agreement, linear_cka, rank_errors


def test_rank_errors_by_hand():
    # cosines rank the pairs 1, 2, 3; gold ranks them 1, 3, 2
    assert rank_errors(np.array([0.1, 0.2, 0.3]), np.array([1.0, 3.0, 2.0])) == pytest.approx([0, -1 / 3, 1 / 3])
    with pytest.raises(ValueError, match="one cosine per gold score"):
        rank_errors(np.zeros(3), np.zeros(4))


def test_members_that_err_alike_agree_and_opposite_errors_disagree():
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 200)
    a = gold + rng.normal(0, 1, 200)
    assert error_agreement(a, a, gold) == pytest.approx(1.0)
    assert error_agreement(a, a * 3 + 1, gold) == pytest.approx(1.0)  # a monotone change ranks alike
    b = 2 * gold - a  # b errs where a does, the other way
    assert error_agreement(a, b, gold) < -0.6
    independent = gold + rng.normal(0, 1, 200)
    assert abs(error_agreement(a, independent, gold)) < 0.3


def _cka_by_kernels(x, y):
    """CKA as HSIC of the linear kernels, the definition, with explicit centring matrices."""
    n = len(x)
    h = np.eye(n) - np.ones((n, n)) / n
    kx, ky = h @ (x @ x.T) @ h, h @ (y @ y.T) @ h
    return np.sum(kx * ky) / np.sqrt(np.sum(kx * kx) * np.sum(ky * ky))


def test_linear_cka_matches_the_kernel_definition_and_ignores_rotation_and_scale():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(40, 8)), rng.normal(size=(40, 5))
    assert linear_cka(x, y) == pytest.approx(_cka_by_kernels(x, y), rel=1e-10)
    rotation, _ = np.linalg.qr(rng.normal(size=(8, 8)))
    assert linear_cka(x, 3 * x @ rotation + 7) == pytest.approx(1.0)
    assert linear_cka(x, y) < 0.5
    with pytest.raises(ValueError, match="the same sentences"):
        linear_cka(x, y[:10])
